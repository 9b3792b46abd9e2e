// speculate_verify_greedy: CUDA implementation (rule in speculate_verify_greedy.h). No Paddle include.
#include "speculate_verify_greedy/speculate_verify_greedy.h"

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;  // slots are independent and tiny: small blocks fill the SMs sooner

__global__ void __launch_bounds__(kWarpsPerBlock * kWarp)
    speculate_verify_greedy_kernel(SpeculateVerifyGreedyParams p) {
  const int lane = threadIdx.x % kWarp;
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (b >= p.batch) return;  // whole warps leave together: b is uniform within a warp
  const int64_t D = verify_num_drafts(p, b);
  if (D < 0) {
    if (lane == 0) p.accept_num[b] = 0;
    return;
  }
  // cut(D) holds, so the scan ends by chunk D / 32 at the latest.
  int64_t first_cut = D;
  for (int64_t base = 0; base <= D; base += kWarp) {
    const int64_t j = base + lane;
    const unsigned cuts = __ballot_sync(0xFFFFFFFFu, j <= D && verify_cut(p, b, j, D));
    if (cuts != 0) {
      first_cut = base + __ffs(cuts) - 1;
      break;
    }
  }
  const int64_t n = verify_accept_count(p, b, first_cut);
  for (int64_t j = lane; j < n; j += kWarp) {
    p.accept_tokens[b * p.width + j] = p.target_tokens[b * p.width + j];
  }
  if (lane == 0) p.accept_num[b] = static_cast<int32_t>(n);
}

}  // namespace

cudaError_t speculate_verify_greedy_gpu(const SpeculateVerifyGreedyParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const int64_t blocks = ceil_div<int64_t>(p.batch, kWarpsPerBlock);
  speculate_verify_greedy_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarp, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
