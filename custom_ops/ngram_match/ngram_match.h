// ngram_match: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
// Contract: SPEC §1. B = batch; W = token_ids_stride; K + 1 = draft_stride.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

struct NgramMatchParams {
  const int64_t* token_ids_all;      // [>= B, W] int64: prompt then generated tokens, -1 padded
  int64_t token_ids_stride;          // W (< kMaxHaystackLen)
  const int64_t* prompt_lens;        // [B] int64: P, clamped to [0, W]
  const int64_t* step_idx;           // [B] int64: s, generated tokens, clamped to [0, W - P]
  const int32_t* draft_token_num;    // [B] int32: per-slot draft cap
  int64_t* draft_tokens;             // [B, K + 1] int64, in place: columns 1 .. count written
  int64_t draft_stride;              // K + 1 (>= 1)
  int32_t* seq_lens_this_time;       // [B] int32, in place: 1 + drafts for decoding slots, 0 empty
  const int32_t* seq_lens_encoder;   // [B] int32: > 0 marks a prefill slot (left untouched)
  const int32_t* seq_lens_decoder;   // [B] int32: 0 marks an empty slot
  const int64_t* max_dec_len;        // [B] int64
  int64_t batch;                     // B (0: no-op)
  int max_ngram_size;                // 1 .. kMaxNgramSize
  int64_t threshold;                 // T: token budget of the whole batch
};

// Per-slot draft budget before the threshold: min(draft_token_num, max_dec_len - s - 1, K), and at
// least 0. Clamping to K keeps every write inside draft_tokens (SPEC §0). Clamping at 0 changes no
// outcome (a budget <= 0 drafts nothing, before or after the threshold cut, whose own result
// T - S - L is then negative too) but keeps S + budget + L far from the int64 limits: with
// max_dec_len near INT64_MIN the sum wrapped to a huge positive value and the cut turned "no room"
// into a positive budget (drafts written for a slot that may not grow).
FDSPEC_HD int64_t ngram_match_slot_budget(const NgramMatchParams& p, int64_t b, int64_t s) {
  const int64_t cap = min_of<int64_t>(p.draft_token_num[b], sub_sat(p.max_dec_len[b], s + 1));
  return max_of<int64_t>(min_of<int64_t>(cap, p.draft_stride - 1), 0);
}

// Sequential reference walk of SPEC §1 on the host. O(B * (P + s) * max_ngram_size).
void ngram_match_cpu(const NgramMatchParams& p);

#ifdef FDSPEC_WITH_CUDA
// Two kernels on `stream`, no allocation, no host synchronisation (CUDA-graph capturable): a parallel
// search, one block per decoding slot, then one block for the batch-wide budget walk and the
// copy of the drafts. Returns the launch status.
cudaError_t ngram_match_gpu(const NgramMatchParams& p, cudaStream_t stream);
#endif

}  // namespace fdspec
