// verify_draft_tokens: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
//
// FastDeploy's verification of one decode step (its newest GPU semantics; contract:
// docs/contract/decode_step.md#verify_draft_tokens). Per slot b of the R output rows, with
// W = columns of step_output_ids, B = the length of seq_lens_this_time (B <= R) and the slot's
// packed target rows starting at r0 = cu_seqlens_q_output[b]:
//   every row: step_output_ids[b, :] = -1, step_output_len[b] = 0 first;
//   b >= B, blocked, stopped, seq_lens_this_time <= 0, or r0 outside [0, T): nothing more;
//   P = min(seq_lens_this_time, T - r0, W) positions; D = P - 1 drafts (0 for a prefill slot,
//   reasoning_status == 1, reject_all);
//   drafts i = 0 .. D-1 are accepted left to right while they pass the strategy (accept_all: every
//   draft passes), each emitted token stopping the row when it is an end token or reaches
//   max_dec_len; the first failing (or last) position i emits the target's token (TOPP: a Philox
//   draw from the position's candidate set), which may end the row but is always written.
// Emitting at output position j = step_idx[b] + i: a token reaching max_dec_len that is no end
// token is replaced by end_tokens[0] (when E > 0).
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "common/philox.h"
#include "speculate_common/speculate_slot.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

enum class VerifyStrategy : int32_t { kTopp = 0, kGreedy = 1, kTargetMatch = 2 };

struct VerifyDraftTokensParams {
  int64_t* step_output_ids;            // [>= R, W] int64, in place: -1, then the emitted tokens
  int32_t* step_output_len;            // [R] int32, in place: tokens emitted
  const int64_t* step_input_ids;       // [>= R, W] int64: column 0 last token, 1 .. drafts
  const int64_t* target_tokens;        // [T] int64 (GREEDY: argmax, TARGET_MATCH: sampled) or null
  const int64_t* candidate_ids;        // [T, C] int64 (TOPP) or null
  const float* candidate_scores;       // [T, C] float32 (TOPP) or null
  const int32_t* candidate_lens;       // [T] int32 (TOPP; clamped to [0, C]) or null
  const float* topp;                   // [R] float32: the slot's top_p (scales the TOPP draw)
  const bool* stop_flags;              // [R] bool
  const int32_t* seq_lens_encoder;     // [R] int32: != 0 marks a prefill slot
  const int32_t* seq_lens_this_time;   // [B] int32: 1 + drafts
  const int64_t* end_tokens;           // [E] int64 (E may be 0)
  int64_t num_end_tokens;              // E
  const bool* is_block_step;           // [R] bool
  const int32_t* cu_seqlens_q_output;  // [>= B] int32: first packed target row of each slot
  const int32_t* reasoning_status;     // [R] int32: 1 = emit the target's token only
  const int64_t* max_dec_len;          // [R] int64, or null (15-tensor form: no length limit)
  const int64_t* step_idx;             // [R] int64: tokens generated before this step, or null
  const int64_t* seeds;                // [R] int64: Philox key of each slot, or null (key = b)
  int64_t rows;                        // R (0: no-op)
  int64_t batch;                       // B
  int64_t width;                       // W >= 1
  int64_t token_rows;                  // T: rows of the strategy's packed tensor(s)
  int64_t num_candidates;              // C >= 1 (TOPP)
  VerifyStrategy strategy;
  bool reject_all;
  bool accept_all;
};

FDSPEC_HD int64_t inc_sat(int64_t v) { return v == INT64_MAX ? v : v + 1; }

// The TOPP draw of slot b at position i (packed row r): a uniform u from Philox (key = the slot's
// seed, counter = output position j, stream kVerifyTopp), scaled by top_p, walked along the
// candidates' running score sum; candidate 0 when the walk ends first (as upstream).
FDSPEC_HD int64_t verify_topp_draw(const VerifyDraftTokensParams& p, int64_t b, int64_t r,
                                   uint64_t j) {
  const int64_t C = p.num_candidates;
  const int64_t len = clamp_to<int64_t>(p.candidate_lens[r], 0, C);
  const uint64_t seed =
      p.seeds != nullptr ? static_cast<uint64_t>(p.seeds[b]) : static_cast<uint64_t>(b);
  const float u = philox_uniform(seed, j, RngStream::kVerifyTopp) * p.topp[b];
  const int64_t* ids = p.candidate_ids + r * C;
  const float* scores = p.candidate_scores + r * C;
  float sum = 0.0f;
  for (int64_t k = 0; k < len; ++k) {
    sum += scores[k];
    if (u <= sum) return ids[k];
  }
  return ids[0];
}

FDSPEC_HD bool verify_accepts(const VerifyDraftTokensParams& p, int64_t r, int64_t draft) {
  if (p.strategy != VerifyStrategy::kTopp) return p.target_tokens[r] == draft;
  const int64_t C = p.num_candidates;
  const int64_t len = clamp_to<int64_t>(p.candidate_lens[r], 0, C);
  for (int64_t k = 0; k < len; ++k) {
    if (p.candidate_ids[r * C + k] == draft) return true;
  }
  return false;
}

// The whole rule for one output row b < R; run by one thread (GPU) or in a loop (CPU).
FDSPEC_HD void verify_draft_tokens_row(const VerifyDraftTokensParams& p, int64_t b) {
  const int64_t W = p.width;
  int64_t* out = p.step_output_ids + b * W;
  for (int64_t c = 0; c < W; ++c) out[c] = -1;
  p.step_output_len[b] = 0;
  if (b >= p.batch || p.is_block_step[b] || p.stop_flags[b]) return;
  const int64_t slt = p.seq_lens_this_time[b];
  const int64_t r0 = p.cu_seqlens_q_output[b];
  if (slt <= 0 || r0 < 0 || r0 >= p.token_rows) return;
  const int64_t positions = min_of<int64_t>(min_of<int64_t>(slt, p.token_rows - r0), W);
  const bool drafts_checked =
      !p.reject_all && p.seq_lens_encoder[b] == 0 && p.reasoning_status[b] != 1;
  const int64_t D = drafts_checked ? positions - 1 : 0;
  const int64_t* in = p.step_input_ids + b * W;
  const int64_t s = p.step_idx != nullptr ? p.step_idx[b] : 0;
  int64_t cur = s;
  int64_t n = 0;
  // Writes the token at position n; true when it ends the row.
  auto emit = [&](int64_t token) -> bool {
    cur = inc_sat(cur);
    const bool eos = is_end_token(token, p.end_tokens, p.num_end_tokens);
    const bool at_max = p.max_dec_len != nullptr && cur >= p.max_dec_len[b];
    if (at_max && !eos && p.num_end_tokens > 0) token = p.end_tokens[0];
    out[n++] = token;
    return eos || at_max;
  };
  int64_t i = 0;
  for (; i < D; ++i) {
    const int64_t draft = in[i + 1];
    if (!p.accept_all && !verify_accepts(p, r0 + i, draft)) break;
    if (emit(draft)) {
      p.step_output_len[b] = static_cast<int32_t>(n);
      return;
    }
  }
  const int64_t token = p.strategy == VerifyStrategy::kTopp
                            ? verify_topp_draw(p, b, r0 + i, static_cast<uint64_t>(s) + i)
                            : p.target_tokens[r0 + i];
  emit(token);
  p.step_output_len[b] = static_cast<int32_t>(n);
}

// Sequential reference on the host. O(R * (W + W * max(C, E))).
void verify_draft_tokens_cpu(const VerifyDraftTokensParams& p);

#ifdef FDSPEC_WITH_CUDA
// One thread per output row, as many blocks as the rows need (any R). One kernel on `stream`, no
// allocation, no host synchronisation (CUDA-graph capturable). Returns the launch status.
cudaError_t verify_draft_tokens_gpu(const VerifyDraftTokensParams& p, cudaStream_t stream);
#endif

}  // namespace fdspec
