// speculate_step_update: CUDA implementation (rule in speculate_step_update.h). No Paddle include.
#include "speculate_step_update/speculate_step_update.h"

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;  // slots are independent and tiny: small blocks fill the SMs sooner

__global__ void __launch_bounds__(kWarpsPerBlock * kWarp)
    speculate_step_update_kernel(SpeculateStepUpdateParams p) {
  const int lane = threadIdx.x % kWarp;
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (b >= p.batch) return;
  const StepUpdateSlot u = step_update_slot(p, b);
  int64_t* row = p.token_ids_all + b * p.token_ids_stride + u.row;
  for (int64_t i = lane; i < u.n; i += kWarp) row[i] = p.accept_tokens[b * p.width + i];
  // Every lane has read the slot's scalars before lane 0 overwrites them.
  __syncwarp();
  if (lane == 0) step_update_write_scalars(p, b, u);
}

}  // namespace

cudaError_t speculate_step_update_gpu(const SpeculateStepUpdateParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const int64_t blocks = ceil_div<int64_t>(p.batch, kWarpsPerBlock);
  speculate_step_update_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarp, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
