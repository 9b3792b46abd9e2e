// naive_update_model_status: CUDA implementation (rule in naive_update_model_status.h).
#include "naive_update_model_status/naive_update_model_status.h"

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kNaiveThreads = 128;

__global__ void __launch_bounds__(kNaiveThreads)
    naive_update_kernel(NaiveUpdateModelStatusParams p) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kNaiveThreads + threadIdx.x;
  if (b < p.batch) naive_update_slot(p, b);
}

}  // namespace

cudaError_t naive_update_model_status_gpu(const NaiveUpdateModelStatusParams& p,
                                          cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const int64_t blocks = ceil_div<int64_t>(p.batch, kNaiveThreads);
  naive_update_kernel<<<static_cast<unsigned>(blocks), kNaiveThreads, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
