// speculate_step_update: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
//
// The state update that closes a decode step, after verification: the accepted tokens join the
// slot's history and its lengths, step count and stop flag move on. It folds what upstream FastDeploy
// spreads over speculate_verify (step_idx, stop flags), speculate_update (sequence lengths,
// draft_tokens[:, 0]) and the token-history write into one op that owns the slot's state. (It is not
// named `speculate_update` because upstream's op of that name takes other arguments.)
//
// Per slot b, with W = token_ids_all width, P = clamp(prompt_lens[b], 0, W),
// s = clamp(step_idx[b], 0, W - P), n = clamp(accept_num[b], 0, min(K + 1, W - P - s)):
//   stopped slot (stop flag set on entry) -> freed: seq_lens_this_time = encoder = decoder = 0
//   empty slot (speculate_slot.h)        -> seq_lens_this_time = 0
//   unscheduled slot (seq_lens_this_time <= 0, not stopped) -> left as is
//   prefill or decoding slot:
//     token_ids_all[b, P + s + i] = accept_tokens[b, i]  for i < n     (layout of
// docs/contract/ngram.md#ngram_match)
//     step_idx = s + n
//     prefill:  seq_lens_decoder += seq_lens_encoder, seq_lens_encoder = 0 (the prompt is cached; the
//               slot decodes from the next step)
//     decoding: seq_lens_decoder += n (the last accepted token and the accepted drafts are cached)
//     n > 0:    draft_tokens[b, 0] = accept_tokens[b, n - 1] (the next step's first input)
//     stop when the last accepted token is an end token, or s + n >= max_dec_len[b], or the row is
//     full (P + s + n >= W), or the new seq_lens_decoder would pass INT32_MAX (the KV length no
//     longer fits its int32 counter: the slot is as full as a full row; it never wraps around):
//       stop_flags = true, seq_lens_this_time = 0; encoder and decoder lengths as a running slot's
//       (the decoder length saturating at INT32_MAX). The slot keeps the lengths of the step it
//       finished in, so that what reads this step's state after the update (the logprob message's
//       `seq_lens_decoder < prompt_lens` rule) sees its tokens; it is freed at the next step, as
//       upstream's update leaves a finishing slot to the step after (by the runner's scheduling, or
//       by this op's stopped-slot rule). step_idx and the row keep the output.
//     else seq_lens_this_time = 1 (the proposer raises it to 1 + drafts)
// Every length is clamped in the kernel; nothing is written outside a tensor whatever its values.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "speculate_common/speculate_slot.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

struct SpeculateStepUpdateParams {
  const int64_t* accept_tokens;      // [>= B, K + 1] int64: the accepted tokens of the step
  const int32_t* accept_num;         // [B] int32: n, clamped as above
  int64_t width;                     // K + 1 (>= 1): columns of accept_tokens and draft_tokens
  int64_t* token_ids_all;            // [>= B, W] int64, in place: prompt then generated tokens
  int64_t token_ids_stride;          // W
  const int64_t* prompt_lens;        // [B] int64: P
  int64_t* step_idx;                 // [B] int64, in place: s -> s + n
  const int64_t* max_dec_len;        // [B] int64
  const int64_t* end_tokens;         // [E] int64 (E may be 0)
  int64_t num_end_tokens;            // E
  bool* stop_flags;                  // [B] bool, in place: set when the slot finishes
  int32_t* seq_lens_this_time;       // [B] int32, in place: 1 (running) or 0 (empty / finished)
  int32_t* seq_lens_encoder;         // [B] int32, in place: 0 after this step
  int32_t* seq_lens_decoder;         // [B] int32, in place: tokens in the KV cache, 0 when freed
  int64_t* draft_tokens;             // [>= B, K + 1] int64, in place: column 0 only
  int64_t batch;                     // B (0: no-op)
};

// What one slot becomes; computed by every lane of the slot's warp on the GPU, once on the host.
struct StepUpdateSlot {
  SlotKind kind = SlotKind::kEmpty;
  bool scheduled = false;  // a running slot that took part in this step
  bool finishes = false;  // a running slot that stops at this step
  int64_t s = 0;          // clamped step_idx before the update
  int64_t row = 0;        // first column written: P + s
  int64_t n = 0;          // tokens appended
  int64_t dec = 0;        // seq_lens_decoder after the step, in int64 (may pass INT32_MAX)
};

FDSPEC_HD StepUpdateSlot step_update_slot(const SpeculateStepUpdateParams& p, int64_t b) {
  StepUpdateSlot u;
  u.kind = slot_kind(p.stop_flags[b], p.seq_lens_encoder[b], p.seq_lens_decoder[b]);
  u.scheduled = u.kind != SlotKind::kEmpty && p.seq_lens_this_time[b] > 0;
  if (!u.scheduled) return u;
  const int64_t W = p.token_ids_stride;
  const int64_t P = clamp_to<int64_t>(p.prompt_lens[b], 0, W);
  u.s = clamp_to<int64_t>(p.step_idx[b], 0, W - P);
  u.row = P + u.s;
  u.n = clamp_to<int64_t>(p.accept_num[b], 0, min_of<int64_t>(p.width, W - u.row));
  const bool ends = u.n > 0 && is_end_token(p.accept_tokens[b * p.width + u.n - 1], p.end_tokens,
                                            p.num_end_tokens);
  // The decoder length this step would reach, in int64: at INT32_MAX the counter cannot grow.
  const int32_t enc = p.seq_lens_encoder[b];
  u.dec = int64_t{p.seq_lens_decoder[b]} + (enc > 0 ? int64_t{enc} : u.n);
  u.finishes = ends || u.s + u.n >= p.max_dec_len[b] || u.row + u.n >= W || u.dec > INT32_MAX;
  return u;
}

// Writes the slot's scalars (everything but the token history). Reads stop_flags[b] and the
// sequence lengths of b before writing them.
FDSPEC_HD void step_update_write_scalars(const SpeculateStepUpdateParams& p, int64_t b,
                                         const StepUpdateSlot& u) {
  if (u.kind == SlotKind::kEmpty) {
    p.seq_lens_this_time[b] = 0;
    if (p.stop_flags[b]) {  // finished at an earlier step, or stopped from outside: free it
      p.seq_lens_encoder[b] = 0;
      p.seq_lens_decoder[b] = 0;
    }
    return;
  }
  if (!u.scheduled) return;
  p.step_idx[b] = u.s + u.n;
  if (u.n > 0) p.draft_tokens[b * p.width] = p.accept_tokens[b * p.width + u.n - 1];
  // A finishing slot keeps its lengths until the next step frees it; only its decoder length can
  // pass INT32_MAX (that is why it finished), and it saturates there instead of wrapping around.
  p.seq_lens_decoder[b] = static_cast<int32_t>(min_of<int64_t>(u.dec, INT32_MAX));
  p.seq_lens_encoder[b] = 0;
  p.seq_lens_this_time[b] = u.finishes ? 0 : 1;
  if (u.finishes) p.stop_flags[b] = true;
}

// Sequential reference on the host. O(B * (K + 1 + E)).
void speculate_step_update_cpu(const SpeculateStepUpdateParams& p);

#ifdef FDSPEC_WITH_CUDA
// One warp per slot: the lanes append the accepted tokens, lane 0 writes the slot's scalars. One
// kernel on `stream`, no allocation, no host synchronisation (CUDA-graph capturable). Returns the
// launch status.
cudaError_t speculate_step_update_gpu(const SpeculateStepUpdateParams& p, cudaStream_t stream);
#endif

}  // namespace fdspec
