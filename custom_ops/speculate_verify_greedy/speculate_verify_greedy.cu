// speculate_verify_greedy: CUDA implementation (rule in speculate_verify_greedy.h). No Paddle include.
// Design: docs/design/step_ops.md.
#include "speculate_verify_greedy/speculate_verify_greedy.h"

#include "speculate_common/warp_per_slot.cuh"

namespace fdspec {
namespace {

__device__ void verify_slot(const SpeculateVerifyGreedyParams& p, int lane, int64_t b) {
  const int64_t D = verify_num_drafts(p, b);
  if (D < 0) {
    if (lane == 0) p.accept_num[b] = 0;
    return;
  }
  // cut(D) holds, so the scan ends by chunk D / 32 at the latest.
  int64_t first_cut = D;
  for (int64_t base = 0; base <= D; base += kSlotWarp) {
    const int64_t j = base + lane;
    const unsigned cuts = __ballot_sync(0xFFFFFFFFu, j <= D && verify_cut(p, b, j, D));
    if (cuts != 0) {
      first_cut = base + __ffs(cuts) - 1;
      break;
    }
  }
  const int64_t n = verify_accept_count(p, b, first_cut);
  for (int64_t j = lane; j < n; j += kSlotWarp) {
    p.accept_tokens[b * p.width + j] = p.target_tokens[b * p.width + j];
  }
  if (lane == 0) p.accept_num[b] = static_cast<int32_t>(n);
}

}  // namespace

cudaError_t speculate_verify_greedy_gpu(const SpeculateVerifyGreedyParams& p, cudaStream_t stream) {
  return launch_warp_per_slot<SpeculateVerifyGreedyParams, verify_slot>(p, stream);
}

}  // namespace fdspec
