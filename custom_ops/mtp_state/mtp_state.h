// FastDeploy's MTP bookkeeping ops under their upstream names and contracts: kernel layer (CPU
// implementations and CUDA launchers). No Paddle include. Contract: docs/contract/mtp_state.md.
//
// FastDeploy's MTPProposer (CUDA path) runs, per decode step:
//   draft_model_preprocess      the draft side's "shadow state" from the target's (accepted tokens)
//   eagle_get_hidden_states     the target's hidden states of the accepted tokens
//   num_model_steps x (draft model, sampler, draft_model_update)
//   draft_model_postprocess     the target's seq_lens_this_time from its draft tokens
// draft_model_set_value_by_flags and eagle_get_self_hidden_states are registered by upstream beside
// them. Every op is upstream's rule on the inputs its call sites give; on others every index is
// clamped (a write outside a tensor is skipped, a read outside one reads as -1 / zeros), where
// upstream reads and writes out of bounds. not_need_stop is written on the device (upstream's XPU
// wrapper copies it to the host; ours never does): a caller reads it where it needs the value.
// Each GPU path is one kernel, allocates nothing, never synchronises (CUDA-graph capturable) and
// takes any batch size.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

FDSPEC_HD int32_t sat_i32(int64_t v) {
  return static_cast<int32_t>(clamp_to<int64_t>(v, INT32_MIN, INT32_MAX));
}

// ---- draft_model_preprocess
// -------------------------------------------------------------------------

struct MtpPreprocessParams {
  int64_t* draft_tokens;         // [>= B, Wd] int64, in place: [0, n) <- accepted
  int64_t draft_tokens_stride;   // Wd (>= 1)
  int64_t* input_ids;            // [>= B, Wi] int64, in place: [enc - 1] <- first token
  int64_t input_ids_stride;      // Wi (>= 1)
  bool* stop_flags;              // [B] bool, in place (draft side)
  int32_t* seq_lens_this_time;   // [B] int32, in place (draft side)
  int32_t* seq_lens_encoder;     // [B] int32, in place (draft side)
  int32_t* seq_lens_decoder;     // [B] int32, in place (draft side)
  int64_t* step_idx;             // [B] int64, in place (draft side)
  bool* not_need_stop;           // [>= 1] bool, in place: [0] <- any slot runs
  int64_t* pre_ids;              // [>= B, D] int64, in place
  int64_t pre_ids_stride;        // D (>= 1)
  const int64_t* accept_tokens;  // [>= B, Wa] int64
  int64_t accept_stride;         // Wa (>= 1)
  const int32_t* accept_num;     // [B] int32
  const int32_t* target_model_seq_lens_encoder;  // [B] int32 (unused, as upstream)
  const int32_t* target_model_seq_lens_decoder;  // [B] int32
  const int64_t* target_model_step_idx;          // [B] int64
  const bool* target_model_stop_flags;           // [B] bool
  const int64_t* max_dec_len;                    // [B] int64
  int64_t* target_model_draft_tokens;            // [>= B, Wt] int64, in place: [1, Wt) <- -1
  int64_t target_draft_stride;                   // Wt (>= 1)
  int64_t num_model_step;                        // attribute
  bool is_splitwise_prefill;                     // attribute
  int64_t batch;                                 // B (0: only not_need_stop[0] <- false)
};

// What the preprocess of slot b does, from its scalars (loaded together on the GPU).
struct MtpPreprocessSlot {
  bool runs = false;  // not skipped: the draft model runs for the slot
  int32_t enc = 0;    // draft-side seq_lens_encoder (> 0: the prefill branch)
  int64_t n = 0;  // accepted tokens copied (clamped to the widths of accept_tokens, draft_tokens)
  int64_t target_step = 0;
  int32_t target_dec = 0;
};

FDSPEC_HD MtpPreprocessSlot mtp_preprocess_load(const MtpPreprocessParams& p, int64_t b) {
  MtpPreprocessSlot s;
  const bool stopped = p.target_model_stop_flags[b];
  s.target_step = p.target_model_step_idx[b];
  s.target_dec = p.target_model_seq_lens_decoder[b];
  s.enc = p.seq_lens_encoder[b];
  const int32_t accepted = p.accept_num[b];
  const int64_t max_dec = p.max_dec_len[b];
  // Near the end of max_dec_len (not on a splitwise prefill node): the draft model would pass it.
  const bool at_end =
      !p.is_splitwise_prefill && s.target_step >= sub_sat(max_dec, p.num_model_step);
  s.runs = !stopped && !at_end;
  s.n = clamp_to<int64_t>(accepted, 0, min_of(p.accept_stride, p.draft_tokens_stride));
  return s;
}

// The writes of slot b but the target draft-token clear. accept_tokens is read only here.
FDSPEC_HD void mtp_preprocess_store(const MtpPreprocessParams& p, int64_t b,
                                    const MtpPreprocessSlot& s) {
  if (!s.runs) {
    p.stop_flags[b] = true;
    p.seq_lens_this_time[b] = 0;
    p.seq_lens_decoder[b] = 0;
    p.seq_lens_encoder[b] = 0;
    p.step_idx[b] = 0;
    return;
  }
  p.stop_flags[b] = false;
  const int64_t* acc = p.accept_tokens + b * p.accept_stride;
  int64_t* pre = p.pre_ids + b * p.pre_ids_stride;
  if (s.enc > 0) {  // prefill, chunked prefill, prompt cache, recovery: the target's first token
    const int64_t first = acc[0];
    pre[0] = first;
    if (s.enc - 1 < p.input_ids_stride) p.input_ids[b * p.input_ids_stride + s.enc - 1] = first;
    p.seq_lens_this_time[b] = s.enc;
    p.step_idx[b] = sub_sat(s.target_step, 1);
    return;
  }
  // Decode: the shadow state is the target's minus the accepted tokens, which the draft model
  // reads.
  const int32_t n32 = static_cast<int32_t>(s.n);
  p.seq_lens_decoder[b] = sat_i32(int64_t{s.target_dec} - s.n);
  p.step_idx[b] = sub_sat(s.target_step, s.n);
  int64_t* draft = p.draft_tokens + b * p.draft_tokens_stride;
  for (int64_t i = 0; i < s.n; ++i) {
    const int64_t tok = acc[i];
    draft[i] = tok;
    const int64_t pos = sub_sat(s.target_step, s.n - i);
    if (pos >= 0 && pos < p.pre_ids_stride) pre[pos] = tok;
  }
  p.seq_lens_this_time[b] = n32;
}

void mtp_preprocess_cpu(const MtpPreprocessParams& p);

// ---- draft_model_update
// -----------------------------------------------------------------------------

struct MtpUpdateParams {
  const int64_t* inter_next_tokens;  // [N] int64: one sampled token per slot with
                                     // seq_lens_this_time > 0, in slot order
  int64_t next_tokens_len;           // N (a slot whose index is >= N reads -1)
  int64_t* draft_tokens;             // [>= B, Wd] int64, in place: column 0
  int64_t draft_tokens_stride;       // Wd (>= 1)
  int64_t* pre_ids;                  // [>= B, D] int64, in place
  int64_t pre_ids_stride;            // D (>= 1)
  int32_t* seq_lens_this_time;  // [B] int32, in place: 1 for a running slot, 0 for a stopped one
  int32_t* seq_lens_encoder;    // [B] int32, in place
  int32_t* seq_lens_decoder;    // [B] int32, in place
  int64_t* step_idx;            // [B] int64, in place
  const bool* stop_flags;       // [B] bool (declared in place upstream, never written)
  bool* not_need_stop;          // [>= 1] bool, in place: [0] <- stopped active slots < B
  const int64_t* max_dec_len;   // [B] int64
  int64_t* base_model_draft_tokens;  // [>= B, Wb] int64, in place: column substep + 1
  int64_t base_draft_stride;         // Wb (>= substep + 2)
  int64_t substep;                   // attribute (0-based draft-model step)
  int64_t batch;                     // B (0: only not_need_stop[0] <- false)
};

struct MtpUpdateSlot {
  int32_t len = 0;  // seq_lens_this_time (<= 0: the slot is left alone)
  int32_t enc = 0;
  int32_t dec = 0;
  int64_t step = 0;
  int64_t max_dec = 0;
  bool stopped = false;
};

FDSPEC_HD MtpUpdateSlot mtp_update_load(const MtpUpdateParams& p, int64_t b) {
  MtpUpdateSlot s;
  s.len = p.seq_lens_this_time[b];
  s.enc = p.seq_lens_encoder[b];
  s.dec = p.seq_lens_decoder[b];
  s.step = p.step_idx[b];
  s.max_dec = p.max_dec_len[b];
  s.stopped = p.stop_flags[b];
  return s;
}

// The writes of an active slot (len > 0) given its sampled token (index `rank` among the active
// slots, read by the caller: -1 past the end of inter_next_tokens).
FDSPEC_HD void mtp_update_store(const MtpUpdateParams& p, int64_t b, const MtpUpdateSlot& s,
                                int64_t token) {
  int64_t* base = p.base_model_draft_tokens + b * p.base_draft_stride + p.substep + 1;
  int64_t* draft = p.draft_tokens + b * p.draft_tokens_stride;
  int64_t* pre = p.pre_ids + b * p.pre_ids_stride;
  if (s.stopped) {
    draft[0] = -1;
    *base = -1;
    p.seq_lens_this_time[b] = 0;
    p.seq_lens_encoder[b] = 0;
    return;
  }
  if (s.enc > 0) {  // the prefill's token
    const int64_t step = add_sat(s.step, 1);
    p.seq_lens_decoder[b] = sat_i32(int64_t{s.enc} + s.dec);
    p.seq_lens_encoder[b] = 0;
    if (p.pre_ids_stride > 1) pre[1] = token;
    p.step_idx[b] = step;
    draft[0] = token;
    if (step < s.max_dec) *base = token;
  } else if (s.dec > 0) {
    if (s.step >= sub_sat(s.max_dec, 1)) {  // at max_dec_len - 1: computed, not kept
      *base = -1;
    } else {
      const int64_t step = add_sat(s.step, s.len);
      p.seq_lens_decoder[b] = sat_i32(int64_t{s.dec} + s.len);
      draft[0] = token;
      *base = token;
      p.step_idx[b] = step;
      if (step >= 0 && step < p.pre_ids_stride) pre[step] = token;
    }
  }
  p.seq_lens_this_time[b] = 1;
}

void mtp_update_cpu(const MtpUpdateParams& p);

// ---- draft_model_postprocess
// ------------------------------------------------------------------------

struct MtpPostprocessParams {
  const int64_t*
      base_model_draft_tokens;  // [>= B, Wb] int64 (declared in place upstream, read only)
  int64_t base_draft_stride;    // Wb (>= 1)
  int32_t* base_model_seq_lens_this_time;      // [B] int32, in place
  const int32_t* base_model_seq_lens_encoder;  // [B] int32
  const bool* base_model_stop_flags;           // [B] bool (declared in place upstream, read only)
  int64_t batch;                               // B
};

// Slot b: a running decoding slot gets the count of its draft tokens that are not -1; a stopped one
// 0.
FDSPEC_HD void mtp_postprocess_slot(const MtpPostprocessParams& p, int64_t b) {
  const bool stopped = p.base_model_stop_flags[b];
  if (stopped) {
    p.base_model_seq_lens_this_time[b] = 0;
  } else if (p.base_model_seq_lens_encoder[b] == 0) {
    const int64_t* row = p.base_model_draft_tokens + b * p.base_draft_stride;
    int32_t n = 0;
    for (int64_t i = 0; i < p.base_draft_stride; ++i) n += row[i] != -1;
    p.base_model_seq_lens_this_time[b] = n;
  }
}

void mtp_postprocess_cpu(const MtpPostprocessParams& p);

// ---- draft_model_set_value_by_flags
// -----------------------------------------------------------------

struct MtpSetValueByFlagsParams {
  const int64_t* draft_tokens;  // [>= B, Wd] int64
  int64_t draft_tokens_stride;  // Wd (>= 1)
  int64_t* pre_ids_all;         // [>= B, D] int64, in place
  int64_t pre_ids_stride;       // D (>= 1)
  const bool* stop_flags;       // [B] bool
  int32_t* seq_lens_this_time;  // [B] int32, written (-> 1) as upstream does, undeclared there too
  const int64_t* step_idx;      // [B] int64
  int64_t batch;                // B
};

// Slot b (running, seq_lens_this_time != 0): its n = seq_lens_this_time drafts end at step_idx in
// pre_ids_all (a decode step, step_idx > 1), or its one token goes to [1] (step_idx == 1); then
// seq_lens_this_time = 1. n is clamped to [0, Wd].
FDSPEC_HD void mtp_set_value_by_flags_slot(const MtpSetValueByFlagsParams& p, int64_t b) {
  const int32_t len = p.seq_lens_this_time[b];
  if (len == 0 || p.stop_flags[b]) return;
  const int64_t step = p.step_idx[b];
  const int64_t* draft = p.draft_tokens + b * p.draft_tokens_stride;
  int64_t* pre = p.pre_ids_all + b * p.pre_ids_stride;
  const int64_t n = clamp_to<int64_t>(len, 0, p.draft_tokens_stride);
  if (step > 1) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = step - i;
      if (pos >= 0 && pos < p.pre_ids_stride) pre[pos] = draft[n - 1 - i];
    }
  } else if (step == 1 && p.pre_ids_stride > 1) {
    pre[1] = draft[0];
  }
  p.seq_lens_this_time[b] = 1;
}

void mtp_set_value_by_flags_cpu(const MtpSetValueByFlagsParams& p);

// ---- eagle_get_hidden_states / eagle_get_self_hidden_states
// -----------------------------------------

// Both gathers copy rows of hidden states, bit for bit (any 2- or 4-byte float dtype), from `input`
// (the tokens of the slots one after another: in_count[b] rows for slot b) to `out` (out_count[b]
// rows for slot b): out row out_off[b] + j <- input row in_off[b] + first[b] + j for j < copy[b];
// every other row of out (j >= copy[b], or past the last slot's) is zero. output_token_num[0] is
// the sum of out_count.
enum class HiddenGather : int { kTarget = 0, kSelf = 1 };

struct HiddenGatherParams {
  HiddenGather kind;
  const void* input;                  // [N, H] float16 / bfloat16 / float32
  void* out;                          // [N, H], same dtype: written whole
  int32_t* output_token_num;          // [1] int32
  int64_t rows;                       // N
  int64_t row_bytes;                  // H * element size
  const int32_t* seq_lens_this_time;  // [B] int32 (draft side)
  const int32_t* seq_lens_encoder;    // [B] int32 (draft side)
  // kTarget (eagle_get_hidden_states):
  const int32_t* accept_nums;                    // [B] int32
  const int32_t* base_model_seq_lens_this_time;  // [B] int32
  // kSelf (eagle_get_self_hidden_states):
  const int32_t* last_seq_lens_this_time;  // [B] int32
  int64_t batch;                           // B
};

struct HiddenSlotPlan {
  int64_t in_count = 0;   // input rows of the slot
  int64_t out_count = 0;  // output rows of the slot
  int64_t first = 0;      // first input row copied, relative to the slot's
  int64_t copy = 0;       // rows copied (<= out_count, clamped to the slot's input rows)
};

// Upstream's cases. Target: a prefill slot keeps its seq_lens_encoder rows; a slot whose draft side
// stopped (seq_lens_this_time 0) keeps none; a decoding slot keeps its first accept_num rows of the
// target's seq_lens_this_time. Self: a running slot keeps one row, its first (prefill) or its last.
FDSPEC_HD HiddenSlotPlan hidden_slot_plan(const HiddenGatherParams& p, int64_t b) {
  HiddenSlotPlan q;
  const int32_t len = p.seq_lens_this_time[b], enc = p.seq_lens_encoder[b];
  if (p.kind == HiddenGather::kTarget) {
    const int32_t base_len = p.base_model_seq_lens_this_time[b], accepted = p.accept_nums[b];
    if (enc > 0) {
      q.in_count = enc;
      q.out_count = enc;
      q.copy = enc;
    } else if (len == 0) {
      q.in_count = max_of<int32_t>(base_len, 0);
    } else {
      q.in_count = max_of<int32_t>(base_len, 0);
      q.out_count = max_of<int32_t>(accepted, 0);
      q.copy = base_len != 0 ? min_of<int64_t>(q.out_count, q.in_count) : 0;
    }
  } else {
    const int32_t last = max_of<int32_t>(p.last_seq_lens_this_time[b], 0);
    if (len > 0) {
      q.out_count = 1;
      if (enc > 0) {
        q.in_count = 1;
        q.copy = 1;
      } else {
        q.in_count = last;
        q.first = last - 1;
        q.copy = last > 0 ? 1 : 0;
      }
    } else {
      q.in_count = enc > 0 ? (last > 0 ? 1 : 0) : last;
    }
  }
  return q;
}

void hidden_gather_cpu(const HiddenGatherParams& p);

#ifdef FDSPEC_WITH_CUDA
// One block loops over the slots (thread per slot), the OR of "runs" by __syncthreads_or.
cudaError_t mtp_preprocess_gpu(const MtpPreprocessParams& p, cudaStream_t stream);
// One block loops over the slots in chunks: a block scan gives each active slot its token's index.
cudaError_t mtp_update_gpu(const MtpUpdateParams& p, cudaStream_t stream);
// A thread per slot.
cudaError_t mtp_postprocess_gpu(const MtpPostprocessParams& p, cudaStream_t stream);
cudaError_t mtp_set_value_by_flags_gpu(const MtpSetValueByFlagsParams& p, cudaStream_t stream);
// A block per slot (its offsets by a block reduction over the earlier slots' counts), which copies
// its rows in 16-byte (or 2-byte) units and zeroes its share of the rows no slot writes.
cudaError_t hidden_gather_gpu(const HiddenGatherParams& p, cudaStream_t stream);
#endif

}  // namespace fdspec
