// speculate_verify_greedy: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
//
// Greedy (top-1) verification of one decode step: each slot accepts the longest prefix of its drafts
// that equals the target model's own greedy tokens, plus the target's token after that prefix. This
// is upstream FastDeploy's `speculate_verify` in its top-1 form (SPECULATE_VERIFY_USE_TOPK /
// USE_TARGET_SAMPLING), with three differences, all decisions of this plugin:
//   * the target tokens arrive as a padded [B, K + 1] tensor (row b, column j: the target's greedy
//     token after input position j of slot b) rather than upstream's packed rows;
//   * the op only decides what is accepted (accept_tokens, accept_num); step_idx, stop flags and
//     the token history are advanced by speculate_step_update, which owns the slot's state;
//   * a slot stopped by max_dec_len keeps the target's token (upstream overwrites it with
//     end_tokens[0]): the output is never altered, only cut.
//
// Per slot b, with s = step_idx[b], D = clamp(seq_lens_this_time[b] - 1, 0, K) drafts, draft i
// (1-based) = draft_tokens[b, i] and t_j = target_tokens[b, j]:
//   empty, stopped or unscheduled slot (speculate_slot.h) -> accept_num = 0
//   prefill slot                              -> D := 0 (the target's first token only)
//   cut(j) = j == D  or  draft_{j+1} != t_j  or  t_j is an end token
//   n = min(1 + first j in [0, D] with cut(j),  max_dec_len[b] - s), at least 0
//   accept_tokens[b, 0 .. n-1] = t_0 .. t_{n-1}, accept_num[b] = n
// (while the drafts agree, t_j equals draft_{j+1}, so copying the target's tokens copies the drafts).
// Columns >= n of accept_tokens keep their values. Every length is clamped in the kernel; nothing is
// read or written outside a tensor whatever its values.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "speculate_common/speculate_slot.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

struct SpeculateVerifyGreedyParams {
  const int64_t* target_tokens;      // [>= B, K + 1] int64: the target's greedy token per input position
  const int64_t* draft_tokens;       // [>= B, K + 1] int64: column 0 last accepted token, 1 .. D drafts
  int64_t* accept_tokens;            // [>= B, K + 1] int64, in place: columns 0 .. n-1 written
  int32_t* accept_num;               // [B] int32, in place: n
  int64_t width;                     // K + 1 (>= 1): columns of the three token tensors
  const int64_t* step_idx;           // [B] int64: s, tokens generated before this step
  const bool* stop_flags;            // [B] bool: set slots accept nothing
  const int32_t* seq_lens_this_time; // [B] int32: 1 + D for decoding slots
  const int32_t* seq_lens_encoder;   // [B] int32: > 0 marks a prefill slot
  const int32_t* seq_lens_decoder;   // [B] int32: 0 (with encoder <= 0) marks an empty slot
  const int64_t* max_dec_len;        // [B] int64: most tokens a slot may generate
  const int64_t* end_tokens;         // [E] int64: tokens that end a sequence (E may be 0)
  int64_t num_end_tokens;            // E
  int64_t batch;                     // B (0: no-op)
};

// Drafts verified by slot b (D above), or -1 when the slot accepts nothing.
FDSPEC_HD int64_t verify_num_drafts(const SpeculateVerifyGreedyParams& p, int64_t b) {
  const int32_t slt = p.seq_lens_this_time[b];
  if (slt <= 0) return -1;
  switch (slot_kind(p.stop_flags[b], p.seq_lens_encoder[b], p.seq_lens_decoder[b])) {
    case SlotKind::kPrefill: return 0;
    case SlotKind::kDecoding: return min_of<int64_t>(slt - 1, p.width - 1);
    default: return -1;
  }
}

// cut(j) above, for 0 <= j <= D.
FDSPEC_HD bool verify_cut(const SpeculateVerifyGreedyParams& p, int64_t b, int64_t j, int64_t D) {
  const int64_t t = p.target_tokens[b * p.width + j];
  return j == D || p.draft_tokens[b * p.width + j + 1] != t ||
         is_end_token(t, p.end_tokens, p.num_end_tokens);
}

// n from the first cut position: capped by what the slot may still generate.
FDSPEC_HD int64_t verify_accept_count(const SpeculateVerifyGreedyParams& p, int64_t b,
                                      int64_t first_cut) {
  const int64_t room = sub_sat(p.max_dec_len[b], p.step_idx[b]);
  return clamp_to<int64_t>(min_of<int64_t>(first_cut + 1, room), 0, p.width);
}

// Sequential reference on the host. O(B * (K + 1) * E).
void speculate_verify_greedy_cpu(const SpeculateVerifyGreedyParams& p);

#ifdef FDSPEC_WITH_CUDA
// One warp per slot: a ballot finds the first cut among 32 positions at a time, the lanes then copy
// the accepted tokens. One kernel on `stream`, no allocation, no host synchronisation (CUDA-graph
// capturable). Returns the launch status.
cudaError_t speculate_verify_greedy_gpu(const SpeculateVerifyGreedyParams& p, cudaStream_t stream);
#endif

}  // namespace fdspec
