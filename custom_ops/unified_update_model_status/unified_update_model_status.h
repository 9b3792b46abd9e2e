// unified_update_model_status: kernel layer (CPU implementation and CUDA launcher). No Paddle
// include.
//
// FastDeploy's state update that closes every decode step after verify_draft_tokens (contract:
// docs/contract/decode_step.md#unified_update_model_status). Per slot b of the R slots (R = the
// length of stop_flags), with B = the length of seq_lens_this_time (B <= R), W = columns of
// step_output_ids and step_input_ids, n = clamp(step_output_len[b], 0, W), s = step_idx[b]:
//   running (not stopped, not paused):
//     tokens k = 0 .. n-1: the first that is an end token or brings s + k + 1 to max_dec_len ends
//     the
//       slot there (n = k + 1; a non-end token at max_dec_len becomes end_tokens[0] when E > 0);
//     prefill (encoder > 0): decoder += encoder, encoder = 0; else decoder > 0: decoder += n
//       (saturating at INT32_MAX);
//     step_output_len = n, step_idx = s + n, stop_flags set when the slot ended;
//     token k goes to token_ids_all[b, prompt_lens[b] + s + k] when that column exists (0 <= column
//       < row width; columns past the row's end are dropped, the others written);
//     n > 0: step_input_ids[b, 0] = the last token;
//   stopped or paused, b < B: stop_flags = true, encoder = decoder = seq_lens_this_time = 0,
//     step_output_len = 0;  b >= B: left alone.
//   has_running_seqs[0] = some slot is running and did not end at this step.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "speculate_common/speculate_slot.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

struct UnifiedUpdateModelStatusParams {
  int32_t* seq_lens_encoder;    // [R] int32, in place
  int32_t* seq_lens_decoder;    // [R] int32, in place
  bool* has_running_seqs;       // [1] bool, in place (device memory for GPU calls)
  int64_t* step_input_ids;      // [>= R, W] int64, in place: column 0 only
  int64_t* step_output_ids;     // [>= R, W] int64, in place: the step's tokens (end replacement)
  int32_t* step_output_len;     // [R] int32, in place
  bool* stop_flags;             // [R] bool, in place
  int32_t* seq_lens_this_time;  // [B] int32, in place: 0 for stopped / paused slots
  const bool* is_paused;        // [R] bool
  int64_t* token_ids_all;       // [>= R, L] int64, in place: prompt then generated tokens
  int64_t token_ids_stride;     // L
  const int64_t* prompt_lens;   // [R] int64
  int64_t* step_idx;            // [R] int64, in place
  const int64_t* end_tokens;    // [E] int64 (E may be 0)
  int64_t num_end_tokens;       // E
  const int64_t* max_dec_len;   // [R] int64
  int64_t rows;                 // R (0: has_running_seqs = false)
  int64_t batch;                // B
  int64_t width;                // W >= 1
};

// The rule for slot b; returns true when the slot is still running after the step.
FDSPEC_HD bool unified_update_slot(const UnifiedUpdateModelStatusParams& p, int64_t b) {
  const bool running = !p.stop_flags[b] && !p.is_paused[b];
  if (!running) {
    if (b < p.batch) {
      p.stop_flags[b] = true;
      p.seq_lens_encoder[b] = 0;
      p.seq_lens_decoder[b] = 0;
      p.seq_lens_this_time[b] = 0;
      p.step_output_len[b] = 0;
    }
    return false;
  }
  const int64_t W = p.width;
  int64_t* out = p.step_output_ids + b * W;
  int64_t n = clamp_to<int64_t>(p.step_output_len[b], 0, W);
  const int64_t s = p.step_idx[b];
  bool ends = false;
  for (int64_t k = 0; k < n; ++k) {
    const bool eos = is_end_token(out[k], p.end_tokens, p.num_end_tokens);
    const bool at_max = add_sat(s, k + 1) >= p.max_dec_len[b];
    if (eos || at_max) {
      if (!eos && p.num_end_tokens > 0) out[k] = p.end_tokens[0];
      n = k + 1;
      ends = true;
      break;
    }
  }
  const int32_t enc = p.seq_lens_encoder[b];
  const int32_t dec = p.seq_lens_decoder[b];
  if (enc > 0) {
    p.seq_lens_decoder[b] = static_cast<int32_t>(min_of<int64_t>(int64_t{dec} + enc, INT32_MAX));
    p.seq_lens_encoder[b] = 0;
  } else if (dec > 0) {
    p.seq_lens_decoder[b] = static_cast<int32_t>(min_of<int64_t>(int64_t{dec} + n, INT32_MAX));
  }
  if (ends) p.stop_flags[b] = true;
  p.step_output_len[b] = static_cast<int32_t>(n);
  p.step_idx[b] = add_sat(s, n);
  // Columns prompt_len + s + k inside [0, L) are written, the others dropped (no overflow: both
  // bounds are checked before the sum is formed).
  const int64_t L = p.token_ids_stride;
  const int64_t plen = p.prompt_lens[b];
  if (plen >= 0 && plen < L) {
    int64_t* row = p.token_ids_all + b * L + plen;
    const int64_t room = L - plen;  // columns s + k < room fit
    for (int64_t k = 0; k < n; ++k) {
      if (s >= -k && s < room - k) row[s + k] = out[k];
    }
  }
  if (n > 0) p.step_input_ids[b * W] = out[n - 1];
  return !ends;
}

// Sequential reference on the host. O(R * (W * E)).
void unified_update_model_status_cpu(const UnifiedUpdateModelStatusParams& p);

#ifdef FDSPEC_WITH_CUDA
// G lanes per slot (speculate_common/slot_lanes.cuh), one launch: up to kUpdateOneBlockLanes lanes
// one block, whose OR-reduction writes has_running_seqs; up to 8 blocks of <= 1024 threads on an
// sm_90 image and device one thread-block cluster, which ORs in shared memory; more, a 1-byte
// memset of has_running_seqs to false, then a grid whose blocks each set it when one of their slots
// runs. Launched as a programmatic dependent of the work before it (sm_90). No allocation, no host
// synchronisation (CUDA-graph capturable). `form` forces one of the three (tests, benches):
// cudaErrorInvalidConfiguration, nothing launched, where it cannot take the batch
// (unified_update_form_fits).
enum class UpdateForm : int { kAuto = 0, kOneBlock = 1, kCluster = 2, kGrid = 3 };
constexpr int64_t kUpdateOneBlockLanes = 512;
cudaError_t unified_update_model_status_gpu(const UnifiedUpdateModelStatusParams& p,
                                            cudaStream_t stream,
                                            UpdateForm form = UpdateForm::kAuto);
cudaError_t unified_update_form_fits(const UnifiedUpdateModelStatusParams& p, UpdateForm form,
                                     bool* fits);
#endif

}  // namespace fdspec
