// suffix_match: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
// Contract: docs/contract/suffix.md. B = batch; W = token_ids_stride; K + 1 = draft_stride.
//
// Suffix decoding over each slot's own history H (prompt then generated tokens): for every match
// length L of the context's suffix, a greedy path through the continuation counts of H, scored by
// the product of count ratios; the best-scoring path becomes the slot's draft, then the batch token
// budget of ngram_match (docs/contract/ngram.md#ngram_match) and pad_to_max apply. No per-slot
// state: every call reads the history, so nothing has to be inserted at prefill and a slot's new
// request needs no reset.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "common/float_rn.h"
#include "speculate_common/draft_batch.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/launch_plan.h"
#endif

namespace fdspec {

// The GPU kernel keeps the context (the last max_tree_depth tokens), the per-match-length
// histogram, the match lengths of its candidates (8 bits) and the warp path's continuations (up to
// kMaxSuffixSpecTokens per lane) in shared memory; these bound both. Histories are addressed with
// int32 positions (the same 2^30 bound as the n-gram ops).
constexpr int kMaxSuffixTreeDepth = 256;
constexpr int kMaxSuffixSpecTokens = 64;
constexpr int64_t kMaxSuffixHistory = int64_t{1} << 30;

// The nine shared inputs (draft_batch.h; K <= kMaxSuffixSpecTokens, the history shorter than
// kMaxSuffixHistory), then the op's own.
struct SuffixMatchParams : DraftBatchParams {
  int64_t* suffix_tokens;  // [>= B, K] int64, out: a decoding slot's draft before the
                           //   batch budget, -1 after its m tokens (other rows untouched)
  float* suffix_probs;     // [>= B, K] float32, out: the draft's probabilities, 0 after m
  int32_t* suffix_meta;    // [>= B, 2] int32, out: (m, match length L)
  int64_t batch;           // B (0: no-op)
  int max_tree_depth;      // D, 1 .. kMaxSuffixTreeDepth
  float max_spec_factor;   // finite
  float max_spec_offset;   // finite
  float min_token_prob;    // finite
  int max_draft_tokens;    // 0 .. K: the slot cap and the pad_to_max length
  bool pad_to_max;         // every decoding slot leaves with max_draft_tokens + 1
  int64_t threshold;       // T: token budget of the whole batch
};

// count(s.d.t) / count(s.d) in float32, the counts rounded to float first (as Arctic does).
FDSPEC_HD float suffix_ratio(int64_t num, int64_t den) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(__ll2float_rn(num), __ll2float_rn(den));
#else
  return static_cast<float>(num) / static_cast<float>(den);
#endif
}

// Draft length allowed at match length L: min(cap, floor(float32(float32(L * factor) + offset) +
// 1e-6)), at least 0 (Arctic's rule, its float32 steps included).
FDSPEC_HD int64_t suffix_spec_limit(int L, float factor, float offset, int64_t cap) {
  const float x = fadd_rn(fmul_rn(static_cast<float>(L), factor), offset);
#if defined(__CUDA_ARCH__)
  const double y = __dadd_rn(static_cast<double>(x), 1e-6);
#else
  const double y = static_cast<double>(x) + 1e-6;
#endif
  if (!(y >= 0.0)) return 0;
  const int64_t whole = static_cast<int64_t>(y < 1e15 ? y : 1e15);
  return min_of<int64_t>(whole, cap);
}

// SplitMix64's finaliser: a bijection of the 64-bit tokens (hash tables of next tokens on the GPU,
// the cache's position keys).
FDSPEC_HD uint64_t suffix_mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// What one slot reads: its history row, P + s = N (both clamped), and its draft cap
// min(draft_token_num, max_draft_tokens, K, max_dec_len - s - 1, W - N - 1), at least 0.
struct SuffixSlot {
  const int64_t* row;
  int64_t n;
  int64_t cap;
};

FDSPEC_HD SuffixSlot suffix_slot(const SuffixMatchParams& p, int64_t b) {
  const int64_t W = p.token_ids_stride;
  const int64_t P = clamp_to<int64_t>(p.prompt_lens[b], 0, W);
  const int64_t s = clamp_to<int64_t>(p.step_idx[b], 0, W - P);
  int64_t cap = min_of<int64_t>(p.draft_token_num[b], p.max_draft_tokens);
  cap = min_of<int64_t>(cap, p.draft_stride - 1);
  cap = min_of<int64_t>(cap, sub_sat(p.max_dec_len[b], s + 1));
  cap = min_of<int64_t>(cap, W - P - s - 1);
  return SuffixSlot{p.token_ids_all + b * W, P + s, max_of<int64_t>(cap, 0)};
}

// The walk's slot kinds, as ngram_match reads them (docs/contract/ngram.md#ngram_match).
FDSPEC_HD bool suffix_is_decoding(int32_t enc, int32_t dec) { return enc <= 0 && dec != 0; }
FDSPEC_HD bool suffix_is_counted(int32_t enc, int32_t dec) { return enc > 0 || dec > 0; }

// Sequential reference on the host. Per decoding slot O(N * D) for the match lengths plus
// O(sum over L, steps of |S| log |S|) for the paths (N * D * K log N at worst, with one token).
void suffix_match_cpu(const SuffixMatchParams& p);
// Its two halves, for ops that combine drafts before the walk (suffix_cache): the search writes the
// suffix outputs of every decoding slot; the walk reads suffix_meta's lengths and suffix_tokens.
void suffix_search_cpu(const SuffixMatchParams& p);
void suffix_walk_cpu(const SuffixMatchParams& p);

#ifdef FDSPEC_WITH_CUDA
// Two kernels on `stream`, no allocation, no host synchronisation (CUDA-graph capturable): the
// draft search, one block per slot, then the batch budget walk of ngram_common/ngram_walk.cuh,
// which also copies the drafts and pads. Returns the launch status.
cudaError_t suffix_match_gpu(const SuffixMatchParams& p, cudaStream_t stream);
cudaError_t suffix_search_gpu(const SuffixMatchParams& p, cudaStream_t stream);
cudaError_t suffix_walk_gpu(const SuffixMatchParams& p, cudaStream_t stream);
// Whether the batch budget walk can keep fewer tokens than every draft's (host, from the threshold
// and the batch alone): when it cannot, each search block writes its slot's outcome itself.
bool suffix_budget_never_binds(const SuffixMatchParams& p);
// The search's forms (candidates held per round and the shared memory each needs per block); the
// launcher takes the largest that fits the device (launch_plan.h).
SuffixSearchForms suffix_match_search_forms();
#endif

}  // namespace fdspec
