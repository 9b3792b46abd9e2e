// hybrid_mtp_ngram: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
// Contract: docs/contract/ngram.md#hybrid_mtp_ngram.
// B = batch; W = token_ids_stride; D = pre_ids_stride; K + 1 = draft_stride.
//
// Clamps, where the contract is silent (a runner never hits them; they keep every read and write
// inside the tensors):
// - P to [0, W]; s to [0, D - 1] (pre_ids[b, s] is the pattern's newest token).
// - A negative seq_lens_this_time is a length below its bound: taken as 0 (the slot is skipped, as
//   `ori == 0` is) and written back as 0. This also keeps every length the walk sums >= 0, which
//   its GPU form relies on (ngram_common/ngram_walk.h).
// - The slot budget q also stays within the columns left after the MTP drafts (K + 1 - ori), see
//   hybrid_slot_budget.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "ngram_common/ngram_walk.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

struct HybridMtpNgramParams {
  const int64_t* token_ids_all;  // [>= B, W] int64: row b starts with the slot's prompt
  int64_t token_ids_stride;      // W (< kMaxHaystackLen)
  const int64_t* prompt_lens;    // [B] int64: P, clamped to [0, W]
  const int64_t* pre_ids;        // [>= B, D] int64: the draft model's generated tokens
  int64_t pre_ids_stride;        // D (1 .. kMaxHaystackLen - 1)
  const int64_t*
      step_idx;           // [B] int64: s, index of the newest pre_ids token, clamped to [0, D - 1]
  int64_t* draft_tokens;  // [>= B, K + 1] int64, in place: columns ori .. ori + m - 1 written
  int64_t draft_stride;   // K + 1 (>= 1)
  int32_t* seq_lens_this_time;      // [B] int32, in place: ori = 1 + MTP drafts in, ori + m out
  const int32_t* seq_lens_decoder;  // [B] int32: > 0 counts the slot in `unprocessed`
  const int64_t* max_dec_len;       // [B] int64
  int64_t batch;                    // B (0: no-op)
  int max_ngram_size;               // 1 .. kMaxNgramSize
  int min_ngram_size;               // 1 .. max_ngram_size
  int64_t max_draft_tokens;  // most tokens per slot after the last accepted one (MTP + n-gram)
  bool pad_to_max;           // graph mode: every slot with ori > 0 ends with max_draft_tokens + 1
  int64_t threshold;         // T: token budget of the whole batch
};

// Where slot b's tokens are: its prompt (P clamped to [0, W]) and its pre_ids row (s clamped to
// [0, D - 1]).
struct HybridView {
  const int64_t* prompt;
  const int64_t* pre;
  int64_t P;
  int64_t s;
};

FDSPEC_HD HybridView hybrid_view(const HybridMtpNgramParams& p, int64_t b) {
  return HybridView{p.token_ids_all + b * p.token_ids_stride, p.pre_ids + b * p.pre_ids_stride,
                    clamp_to<int64_t>(p.prompt_lens[b], 0, p.token_ids_stride),
                    clamp_to<int64_t>(p.step_idx[b], 0, p.pre_ids_stride - 1)};
}

// The prompt, then pre_ids[0 .. s); the pattern ends at pre_ids[s].
FDSPEC_HD NgramHaystacks hybrid_haystacks(const HybridView& v) {
  return NgramHaystacks{v.prompt, v.P, v.pre, v.s, v.pre + v.s, v.s};
}

// The MTP length of slot b as the walk reads it: seq_lens_this_time, negative taken as 0.
FDSPEC_HD int64_t hybrid_ori(const HybridMtpNgramParams& p, int64_t b) {
  return max_of<int64_t>(p.seq_lens_this_time[b], 0);
}

// Per-slot budget q before the threshold: min(max_draft_tokens - ori + 1, max_dec_len - s - 1,
// K + 1 - ori). The last term keeps every write (columns ori .. ori + q - 1) inside draft_tokens
// (docs/contract/general.md); it binds only when max_draft_tokens > K, where upstream would write
// past the row.
FDSPEC_HD int64_t hybrid_slot_budget(const HybridMtpNgramParams& p, int64_t b, int64_t ori,
                                     int64_t s) {
  const int64_t q = min_of<int64_t>(p.max_draft_tokens - ori + 1, sub_sat(p.max_dec_len[b], s + 1));
  return min_of<int64_t>(q, p.draft_stride - ori);
}

// Whether slot b takes part in the walk (docs/contract/ngram.md#hybrid_mtp_ngram: not
// `ori == 0 or q <= 0`). Such a slot has 1 <= ori <= hybrid_max_ori(p).
FDSPEC_HD bool hybrid_is_processed(const HybridMtpNgramParams& p, int64_t b, int64_t ori,
                                   int64_t s) {
  const int64_t q = hybrid_slot_budget(p, b, ori, s);  // read whatever ori is: see hybrid_walk_slot
  return ori > 0 && q > 0;
}

// Slot b as the walk sees it (ngram_common/ngram_walk.h), given its MTP length ori (hybrid_ori, or
// what the GPU search kept of it) and its clamped step s. Every slot keeps ori as its length unless
// it takes part; it is counted when seq_lens_decoder > 0 (a skipped slot stays counted: upstream's
// quirk, kept); in graph mode every slot the draft model scheduled (ori > 0) is padded, the ones
// with no budget (q <= 0) too, so that the captured shape holds for every one of them.
// The budget's input (max_dec_len) is read whatever ori is (in bounds for every b < B): on the GPU
// the slot's facts then arrive in one round trip, not two behind the test of ori.
FDSPEC_HD WalkSlot hybrid_walk_slot(const HybridMtpNgramParams& p, int64_t b, int64_t ori,
                                    int64_t s) {
  const int64_t q = hybrid_slot_budget(p, b, ori, s);
  WalkSlot w;
  w.counted = p.seq_lens_decoder[b] > 0;
  w.padded = ori > 0;
  w.base = ori;
  if (ori > 0 && q > 0) {  // hybrid_is_processed
    w.processed = true;
    w.budget = q;
  }
  return w;
}

FDSPEC_HD WalkOutputs hybrid_outputs(const HybridMtpNgramParams& p) {
  return WalkOutputs{p.draft_tokens, p.draft_stride, p.seq_lens_this_time,
                     graph_pad_length(p.pad_to_max, p.max_draft_tokens, p.draft_stride)};
}

// Largest ori of a processed slot: q > 0 needs ori <= max_draft_tokens and ori <= K.
FDSPEC_HD int64_t hybrid_max_ori(const HybridMtpNgramParams& p) {
  return min_of<int64_t>(p.max_draft_tokens, p.draft_stride - 1);
}

// Slot b's term of the walk-free bound (ngram_walk.h): counted_b + max(entry, A) with A =
// max(hybrid_max_ori + 1, 0), entry being slot b's seq_lens_this_time as found. It bounds t_b (a
// processed slot has ori + q - 1 <= hybrid_max_ori, since q <= max_draft_tokens - ori + 1 and q <=
// K + 1 - ori; any other slot adds its ori), so it is one more per processed slot than the exact
// term, and it is the same for every value the GPU op ever leaves in the entry: the input, the
// packed search result (negative), the clamped 0, or a final length (ori + kept <= A, the
// graph-mode pad length is A, a skipped slot keeps ori or is padded to A). The GPU's blocks read
// other slots' entries while those slots' blocks rewrite them, and all reach the same decision
// whichever value they see.
FDSPEC_HD int64_t hybrid_walk_free_floor(const HybridMtpNgramParams& p) {
  return clamp_to<int64_t>(hybrid_max_ori(p) + 1, 0, kWalkFreeTermCap);
}
FDSPEC_HD int64_t hybrid_walk_free_term(const HybridMtpNgramParams& p, int32_t entry,
                                        int32_t decoder) {
  return max_of<int64_t>(entry, hybrid_walk_free_floor(p)) + (decoder > 0);
}
FDSPEC_HD int64_t hybrid_walk_free_term(const HybridMtpNgramParams& p, int64_t b, int32_t entry) {
  return hybrid_walk_free_term(p, entry, p.seq_lens_decoder[b]);
}

// Whether the batch can be walk-free at all: every term is at least A, so U >= B x A (a host-side
// test that spares the GPU the bound's sums where it cannot hold, e.g. B = 256 at T = 1024, K = 5).
FDSPEC_HD bool hybrid_may_be_walk_free(const HybridMtpNgramParams& p) {
  return p.batch <= kWalkFreeMaxBatch && p.batch * hybrid_walk_free_floor(p) < p.threshold;
}

// The GPU path keeps a processed slot's ori and search result together in its seq_lens_this_time
// entry between its two kernels (hybrid_mtp_ngram.cu), in max_ori * (W + D) values; the bindings
// check this bound for both paths, so that both accept the same calls. Any real configuration fits
// (K = 16 drafts with W + D = 2^27 tokens is at the limit).
constexpr int64_t kHybridPackedLimit = int64_t{1} << 31;

inline bool hybrid_packing_fits(int64_t max_ori, int64_t token_ids_width, int64_t pre_ids_width) {
  return max_of<int64_t>(max_ori, 1) * (token_ids_width + pre_ids_width) < kHybridPackedLimit;
}

// The walk of docs/contract/ngram.md#hybrid_mtp_ngram on the host (ngram_walk_host). O(B * (P + s)
// * max_ngram_size).
void hybrid_mtp_ngram_cpu(const HybridMtpNgramParams& p);

#ifdef FDSPEC_WITH_CUDA
// Two kernels on `stream`, no allocation, no host synchronisation (CUDA-graph capturable): a
// parallel search, one block (a cluster of up to 8 for a small batch) per slot, then one block for
// the batch-wide budget walk and the copy of the drafts. Returns the launch status.
cudaError_t hybrid_mtp_ngram_gpu(const HybridMtpNgramParams& p, cudaStream_t stream);
#endif

}  // namespace fdspec
