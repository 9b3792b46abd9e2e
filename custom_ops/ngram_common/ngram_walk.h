// The batch-wide token-budget walk of the n-gram ops: the slot state, the walk itself on the host,
// and the graph-mode padding. No Paddle or CUDA include. ngram_match and hybrid_mtp_ngram
// (docs/contract/ngram.md) both run on it: each op only says what a slot is (its `*_walk_slot`
// function, the one definition its CPU path, its search kernel and its GPU walk all read) and how a
// slot searches. The GPU form of the walk is in ngram_walk.cuh.
//
// The slots are visited in batch order with a batch budget T; a processed slot gives up when
// G_b = S_b + L_b >= T - 1, else keeps min(u_b, T - G_b) drafts. With every fixed length >= 0 and
// every base >= 1, G never decreases, so the walk is a prefix sum up to the first slot that is
// clamped or gives up (the proof: docs/design/ngram.md, "The budget walk"). A negative fixed length
// sends the GPU to its sequential form. pad_to_max (FastDeploy #7849) raises every padded slot to
// min(max_draft_tokens, K) + 1 tokens after the walk, repeating its last valid token.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "ngram_common/ngram_search.h"

namespace fdspec {

// What the walk needs of one slot. Each op builds it in one function (ngram_match_walk_slot,
// hybrid_walk_slot).
struct WalkSlot {
  bool processed = false;  // takes part: drops `unprocessed` and may draft
  bool counted = false;    // counted in the initial `unprocessed` (I)
  bool padded = false;     // graph mode raises its length to the pad length (then base >= 1)
  int64_t base = 0;        // processed: length before drafts (>= 1); others: the fixed length
  int64_t budget = 0;      // processed: q, drafts allowed before the threshold (may be <= 0)
  bool untouched =
      false;  // fixed: its seq_lens_this_time is left as given (base may differ from it)
};

// Where the walk writes, and the graph-mode pad length (0: no padding).
struct WalkOutputs {
  int64_t* draft_tokens;        // [>= B, K + 1]: columns base .. base + c - 1, then the padding
  int64_t draft_stride;         // K + 1
  int32_t* seq_lens_this_time;  // [B]: the final length
  int64_t pad_length;
};

// The length every padded slot ends with: max_draft_tokens + 1, kept within the K + 1 columns of
// draft_tokens (a larger max_draft_tokens would make upstream write past the row). 0 when off.
FDSPEC_HD int64_t graph_pad_length(bool pad_to_max, int64_t max_draft_tokens,
                                   int64_t draft_stride) {
  return pad_to_max ? max_of<int64_t>(min_of<int64_t>(max_draft_tokens, draft_stride - 1) + 1, 0)
                    : 0;
}

// Writes slot b's outcome: `kept` drafts from `src` after its base, the graph-mode padding, and its
// final length (a fixed slot's length is written back unchanged: the same value, or the clamp the
// op's slot function applied). `lanes` threads may share the writes (lane 0 .. lanes - 1, each
// calling it; a walk-free search block's warp): a lane writes every lanes-th column, and the
// padding repeats the last draft as read from `src`, which no lane writes, or with none kept
// row[base - 1], an input column.
FDSPEC_HD void ngram_walk_finish(const WalkOutputs& o, int64_t b, const WalkSlot& w,
                                 const int64_t* src, int64_t kept, int lane = 0, int lanes = 1) {
  if (w.untouched) return;
  int64_t* row = o.draft_tokens + b * o.draft_stride;
  for (int64_t k = lane; k < kept; k += lanes) row[w.base + k] = src[k];
  int64_t len = w.base + kept;
  if (w.padded && len >= 1 && len < o.pad_length) {
    const int64_t last = kept > 0 ? src[kept - 1] : row[len - 1];
    for (int64_t k = len + lane; k < o.pad_length; k += lanes) row[k] = last;
    len = o.pad_length;
  }
  if (lane == 0) o.seq_lens_this_time[b] = static_cast<int32_t>(len);
}

// The walk-free bound (data-dependent). Let t_b = counted_b + (processed_b ? base_b + budget_b - 1
// : max(base_b, 0)) and U = sum over the batch of t_b. At every processed slot b, S_b + budget_b +
// L_b
// <= U whatever the searches find: the final lengths before b are at most their base plus budget
// (fixed lengths at most max(base, 0)), L_b = I - D_b (D_b: processed slots up to b), and every
// term after b is >= 0 (a processed base is >= 1, a budget >= 0). So U <= T - 1 means that no slot
// is clamped (S + budget + L <= T - 1) and that no slot with budget >= 1 gives up (S + L <= T - 2);
// a slot with budget <= 0 drafts nothing either way. Every processed slot then keeps its
// untruncated u and each slot's outcome depends on that slot alone: the GPU ops finish each slot in
// its search block and the walk kernel exits at once. U = T is not enough (a budget of 1 at S + L =
// T - 1 gives up). Each term is capped at kWalkFreeTermCap before the sum (no overflow for B <=
// kWalkFreeMaxBatch, whatever max_dec_len, draft_token_num or K say); a capped term makes U >= the
// cap: not walk-free.
constexpr int64_t kWalkFreeTermCap = int64_t{1} << 41;
constexpr int64_t kWalkFreeMaxBatch = int64_t{1} << 20;

// t_b for a slot the op describes exactly (ngram_match; hybrid_mtp_ngram bounds it differently, see
// hybrid_walk_free_term).
FDSPEC_HD int64_t ngram_walk_free_term(const WalkSlot& w) {
  const int64_t own = w.processed ? w.base - 1 + clamp_to<int64_t>(w.budget, 0, kWalkFreeTermCap)
                                  : clamp_to<int64_t>(w.base, 0, kWalkFreeTermCap);
  return min_of<int64_t>(own + w.counted, kWalkFreeTermCap);
}

// Whether a batch of B slots whose terms sum to U (each capped) is walk-free under threshold T.
FDSPEC_HD bool ngram_walk_free(int64_t B, int64_t T, int64_t U) {
  return B <= kWalkFreeMaxBatch && U < kWalkFreeTermCap && U < T;
}

// The walk on the host, as stated above, over `batch` slots with threshold T. slot(b) gives slot
// b's WalkSlot (called before slot b is written); search(b, budget) its first productive match with
// that budget (an NgramMatch).
template <class SlotFn, class SearchFn>
void ngram_walk_host(int64_t B, int64_t T, const WalkOutputs& out, const SlotFn& slot,
                     const SearchFn& search) {
  int64_t unprocessed = 0;
  for (int64_t b = 0; b < B; ++b) unprocessed += slot(b).counted;

  int64_t prefix = 0;  // the final (unpadded) lengths of the slots before b
  for (int64_t b = 0; b < B; ++b) {
    const WalkSlot w = slot(b);
    NgramMatch m;
    if (w.processed) {
      --unprocessed;
      const int64_t S = prefix + w.base;
      const int64_t L = unprocessed;
      int64_t budget = w.budget;
      if (S + budget + L > T) budget = T - S - L;
      if (S + L < T - 1) m = search(b, budget);
    }
    prefix += w.base + m.count;
    ngram_walk_finish(out, b, w, m.src, m.count);
  }
}

}  // namespace fdspec
