// ngram_match: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
// Contract: docs/contract/ngram.md#ngram_match. B = batch; W = token_ids_stride; K + 1 =
// draft_stride.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "ngram_common/ngram_walk.h"
#include "speculate_common/draft_batch.h"
#include "speculate_common/speculate_slot.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

// The nine shared inputs (draft_batch.h; the history shorter than kMaxHaystackLen), then the op's
// own.
struct NgramMatchParams : DraftBatchParams {
  int64_t batch;             // B (0: no-op)
  int max_ngram_size;        // 1 .. kMaxNgramSize
  int64_t max_draft_tokens;  // graph mode's pad length - 1 (else unused: the cap is per slot)
  bool pad_to_max;           // graph mode: every decoding slot ends with max_draft_tokens + 1
  int64_t threshold;         // T: token budget of the whole batch
};

// Per-slot draft budget before the threshold: min(draft_token_num, max_dec_len - s - 1, K), and at
// least 0. Clamping to K keeps every write inside draft_tokens (docs/contract/general.md). Clamping
// at 0 changes no outcome (a budget <= 0 drafts nothing, before or after the threshold cut, whose
// own result T - S - L is then negative too) but keeps S + budget + L far from the int64 limits:
// with max_dec_len near INT64_MIN the sum wrapped to a huge positive value and the cut turned "no
// room" into a positive budget (drafts written for a slot that may not grow).
FDSPEC_HD int64_t ngram_match_slot_budget(const NgramMatchParams& p, int32_t draft_token_num,
                                          int64_t max_dec_len, int64_t s) {
  const int64_t cap = min_of<int64_t>(draft_token_num, sub_sat(max_dec_len, s + 1));
  return max_of<int64_t>(min_of<int64_t>(cap, p.draft_stride - 1), 0);
}

// Slot b's own inputs that its view and its walk facts depend on (all but a prefill slot's length),
// read in one place: on the GPU they arrive in one round trip, and the search issues them before
// its first tile request (ngram_search.cuh).
struct NgramMatchSlotIn {
  int64_t prompt_len, step_idx, max_dec_len;
  int32_t draft_token_num, encoder, decoder;
};

FDSPEC_HD NgramMatchSlotIn ngram_match_slot_in(const NgramMatchParams& p, int64_t b) {
  return NgramMatchSlotIn{p.prompt_lens[b],     p.step_idx[b],         p.max_dec_len[b],
                          p.draft_token_num[b], p.seq_lens_encoder[b], p.seq_lens_decoder[b]};
}

// Where slot b's tokens are: its row, P clamped to [0, W] and s to [0, W - P].
struct NgramMatchView {
  const int64_t* row;
  int64_t P;
  int64_t s;
};

FDSPEC_HD NgramMatchView ngram_match_view(const NgramMatchParams& p, int64_t b,
                                          const NgramMatchSlotIn& in) {
  const int64_t W = p.token_ids_stride;
  const int64_t P = clamp_to<int64_t>(in.prompt_len, 0, W);
  return NgramMatchView{p.token_ids_all + b * W, P, clamp_to<int64_t>(in.step_idx, 0, W - P)};
}
FDSPEC_HD NgramMatchView ngram_match_view(const NgramMatchParams& p, int64_t b) {
  return ngram_match_view(p, b, ngram_match_slot_in(p, b));
}

// The prompt, then the generated tokens; the pattern ends at the newest generated token. With s = 0
// there is none (no pattern size fits): point at the row, not before it.
FDSPEC_HD NgramHaystacks ngram_match_haystacks(const NgramMatchView& v) {
  return NgramHaystacks{v.row, v.P, v.row + v.P, v.s, v.row + v.P + (v.s > 0 ? v.s - 1 : 0), v.s};
}

// Slot b as the walk sees it (ngram_common/ngram_walk.h), from its inputs `in`
// (ngram_match_slot_in: the budget's inputs are read whatever the slot's kind, so that on the GPU
// they arrive with the rest, not in a second round trip behind the kind's branch). The slot
// states are those of speculate_slot.h (no stop flag here: a finished slot has seq_lens_decoder 0).
// A decoding slot takes part with base 1 (the last accepted token) and is padded in graph mode; a
// prefill slot keeps its seq_lens_this_time, summed as given; an empty slot gets 0. `unprocessed`
// counts the prefill slots and the decoding slots with seq_lens_decoder > 0 (upstream's count: a
// prefill slot stays counted, and a negative seq_lens_decoder, which no runner produces, decodes
// uncounted). Reads the slot's seq_lens_this_time only for a prefill slot, which no path writes
// (untouched: the GPU's walk-free bound reads it from other slots' blocks while they run).
FDSPEC_HD WalkSlot ngram_match_walk_slot(const NgramMatchParams& p, int64_t b,
                                         const NgramMatchSlotIn& in) {
  const int32_t enc = in.encoder;
  const int32_t dec = in.decoder;
  const int64_t budget =
      ngram_match_slot_budget(p, in.draft_token_num, in.max_dec_len, ngram_match_view(p, b, in).s);
  WalkSlot w;
  w.counted = enc > 0 || dec > 0;
  switch (slot_kind(false, enc, dec)) {
    case SlotKind::kPrefill:
      w.base = p.seq_lens_this_time[b];
      w.untouched = true;
      break;
    case SlotKind::kDecoding:
      w.processed = true;
      w.padded = true;
      w.base = 1;
      w.budget = budget;
      break;
    case SlotKind::kEmpty:
      break;
  }
  return w;
}

// Slot b's term of the walk-free bound (ngram_walk.h), from inputs that the op never writes.
FDSPEC_HD int64_t ngram_match_walk_free_term(const NgramMatchParams& p, int64_t b,
                                             const NgramMatchSlotIn& in) {
  return ngram_walk_free_term(ngram_match_walk_slot(p, b, in));
}
FDSPEC_HD int64_t ngram_match_walk_free_term(const NgramMatchParams& p, int64_t b) {
  return ngram_match_walk_free_term(p, b, ngram_match_slot_in(p, b));
}

FDSPEC_HD WalkOutputs ngram_match_outputs(const NgramMatchParams& p) {
  return WalkOutputs{p.draft_tokens, p.draft_stride, p.seq_lens_this_time,
                     graph_pad_length(p.pad_to_max, p.max_draft_tokens, p.draft_stride)};
}

// The walk of docs/contract/ngram.md#ngram_match on the host (ngram_walk_host). O(B * (P + s) *
// max_ngram_size).
void ngram_match_cpu(const NgramMatchParams& p);

#ifdef FDSPEC_WITH_CUDA
// Two kernels on `stream`, no allocation, no host synchronisation (CUDA-graph capturable): a
// parallel search, one block (a cluster of up to 8 for a small batch) per decoding slot, then one
// block for the batch-wide budget walk and the copy of the drafts. Returns the launch status.
cudaError_t ngram_match_gpu(const NgramMatchParams& p, cudaStream_t stream);
#endif

}  // namespace fdspec
