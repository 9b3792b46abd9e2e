// speculate_logprobs_topk: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
// Contract: docs/contract/logprobs.md (logprobs of the gathered rows). N = rows; V = vocabulary; k
// = top_k.
//
// For each valid row r (r < cu[B], read where the data lives) with scaled logits x = logits[r] * s
// (s = 1 / temperature of the row's slot; 1 without temperature, or below kMinTemperature):
//   column 0:     the accepted token token_ids[r] and its score; rank[r] = #{v : x[v] >= x[token]}
//   columns 1..k: the k best entries by (x descending, token id ascending), with their scores
// where score(v) = x[v] - logsumexp(x) (or x[v] itself with raw_logits), clipped below at -FLT_MAX
// as upstream clips its logprobs. Ids and ranks depend only on comparisons of x, which both sides
// compute with the same float32 operations, so they are identical on CPU and GPU; the scores differ
// by the rounding of the log-sum-exp. Padding rows (r >= cu[B]) and an accepted token outside [0,
// V) get the defined values of kPad*: no stale memory ever reaches the outputs.
#pragma once

#include <cfloat>
#include <cstdint>

#include "common/fdspec_common.h"
#include "common/half_bits.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

constexpr int64_t kPadTokenId = -1;  // padding rows: ids of every column
constexpr float kPadScore = 0.0f;    // padding rows: every score; also an out-of-vocabulary token's
constexpr int64_t kPadRank = 0;      // padding rows, out-of-vocabulary token
constexpr int32_t kNoEntryId = INT32_MAX;  // top-k sentinel: worse than every real entry

// Temperatures below this (0, negative, NaN and tiny positive values alike) mark a greedy slot,
// whose logits are not scaled; so does +inf. The bound is the sampling epsilon vLLM and FastDeploy
// use for "greedy". It keeps 1 / T finite and small enough that x / T of any realistic logit (|x| <
// 3e33) stays finite: below about 3e-39, 1 / T is +inf and a scaled row turns into inf - inf = NaN
// scores with a wrong order.
constexpr float kMinTemperature = 1e-5f;

struct LogprobsTopkParams {
  const void* logits;  // [N, V] float32 / float16 / bfloat16 (dtype)
  LogitsDType dtype;
  int64_t rows;                          // N
  int64_t vocab;                         // V (1 .. 2^24; k > V leaves -1 / 0 columns)
  const int64_t* token_ids;              // [N] int64: the accepted token of each row
  const int32_t* cu_batch_token_offset;  // [B + 1] int32: rows cu[b] .. cu[b+1]-1 belong to slot b
  int64_t batch;                         // B (0: every row is padding)
  const float* temperature;  // [B] float32 per slot, or nullptr; < kMinTemperature or non-finite: 1
  int64_t* logprob_token_ids;  // [N, k + 1] int64, written
  float* logprob_scores;       // [N, k + 1] float32, written
  int64_t* logprob_ranks;      // [N] int64, written
  int top_k;                   // k, 0 .. kMaxLogprobTopK
  bool raw_logits;             // scores are the scaled logits, not logprobs
};

// Rows [0, valid) are computed; the rest is padding.
FDSPEC_HD int64_t logprobs_valid_rows(const LogprobsTopkParams& p) {
  return packed_valid_rows(p.cu_batch_token_offset, p.batch, p.rows);
}

// Multiplier applied to the row's logits (x * (1 / T), the same float32 operations on both sides).
FDSPEC_HD float logprobs_row_scale(const LogprobsTopkParams& p, int64_t r) {
  if (p.temperature == nullptr) return 1.0f;
  const float t = p.temperature[packed_slot_of_row(p.cu_batch_token_offset, p.batch, r)];
  return (t >= kMinTemperature && t <= FLT_MAX) ? 1.0f / t : 1.0f;
}

// Total order of the top-k: larger value first, then lower token id. NaN is never better.
FDSPEC_HD bool logprobs_better(float v, int32_t id, float w, int32_t wid) {
  return v > w || (v == w && id < wid);
}

FDSPEC_HD float logprobs_clip(float v) { return v < -FLT_MAX ? -FLT_MAX : v; }

void logprobs_topk_cpu(const LogprobsTopkParams& p);

#ifdef FDSPEC_WITH_CUDA
// Grid: N rows (so no host read of cu[B]), each row shared by `parts` blocks. Blocks of padding
// rows write the defaults and exit. A valid row is read once, in vectors, each block streaming its
// slice and computing the online log-sum-exp, its share of the token's rank and each warp's top-k
// in the same pass; the warps' lists merge in the block, and on sm_90+ the blocks of a row form one
// thread-block cluster whose leader merges their partials through distributed shared memory.
// Splitting rows keeps every SM busy when there are about as many rows as SMs. parts = 0 picks the
// split from V (1 before sm_90); tests and probes pass 1..8 to cover each merge shape. No
// allocation, no host synchronisation: CUDA-graph capturable.
cudaError_t logprobs_topk_gpu(const LogprobsTopkParams& p, cudaStream_t stream, int parts = 0);
#endif

}  // namespace fdspec
