// unified_update_model_status: CUDA implementation (rule in unified_update_model_status.h).
#include "unified_update_model_status/unified_update_model_status.h"

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kManyBlockThreads = 128;

// One block for the whole batch: __syncthreads_or gives has_running_seqs directly.
__global__ void __launch_bounds__(1024) update_one_block_kernel(UnifiedUpdateModelStatusParams p) {
  const int64_t b = threadIdx.x;
  const bool running = b < p.rows && unified_update_slot(p, b);
  if (__syncthreads_or(running) != 0) {
    if (threadIdx.x == 0) p.has_running_seqs[0] = true;
  } else if (threadIdx.x == 0) {
    p.has_running_seqs[0] = false;
  }
}

// Many blocks: has_running_seqs was cleared on the stream before; a block with a running slot sets
// it (every writer writes the same value).
__global__ void __launch_bounds__(kManyBlockThreads)
    update_many_blocks_kernel(UnifiedUpdateModelStatusParams p) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kManyBlockThreads + threadIdx.x;
  const bool running = b < p.rows && unified_update_slot(p, b);
  if (__syncthreads_or(running) != 0 && threadIdx.x == 0) p.has_running_seqs[0] = true;
}

}  // namespace

cudaError_t unified_update_model_status_gpu(const UnifiedUpdateModelStatusParams& p,
                                            cudaStream_t stream) {
  if (p.rows <= kUpdateOneBlock) {
    const int threads = static_cast<int>(max_of<int64_t>(32, ceil_div<int64_t>(p.rows, 32) * 32));
    update_one_block_kernel<<<1, threads, 0, stream>>>(p);
    return FDSPEC_LAUNCH_STATUS(stream);
  }
  cudaError_t err = cudaMemsetAsync(p.has_running_seqs, 0, sizeof(bool), stream);
  if (err != cudaSuccess) return err;
  const int64_t blocks = ceil_div<int64_t>(p.rows, kManyBlockThreads);
  update_many_blocks_kernel<<<static_cast<unsigned>(blocks), kManyBlockThreads, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
