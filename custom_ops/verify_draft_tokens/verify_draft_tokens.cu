// verify_draft_tokens: CUDA implementation (rule in verify_draft_tokens.h). No Paddle include.
#include "verify_draft_tokens/verify_draft_tokens.h"

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

// Rows are independent and tiny (W <= a few dozen columns): small blocks spread a batch of a few
// hundred rows over many SMs instead of one.
constexpr int kVerifyThreads = 64;

__global__ void __launch_bounds__(kVerifyThreads)
    verify_draft_tokens_kernel(VerifyDraftTokensParams p) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kVerifyThreads + threadIdx.x;
  if (b < p.rows) verify_draft_tokens_row(p, b);
}

}  // namespace

cudaError_t verify_draft_tokens_gpu(const VerifyDraftTokensParams& p, cudaStream_t stream) {
  if (p.rows <= 0) return cudaSuccess;
  const int64_t blocks = ceil_div<int64_t>(p.rows, kVerifyThreads);
  verify_draft_tokens_kernel<<<static_cast<unsigned>(blocks), kVerifyThreads, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
