// Draft-model bookkeeping of the MTP proposer: kernel layer (CPU implementations and CUDA launchers
// of three ops). No Paddle include. Contract: docs/contract/draft_model.md.
//
// The proposer owns the draft side's state, one row or entry per slot: pre_ids [B, D] (index 0
// holds -1, generated token k at k + 1, the newest at step_idx), step_idx, seq_lens_decoder,
// max_dec_len, input_ids (the draft model's next input) and mtp_draft_num (MTP drafts appended to
// pre_ids by the current step and not verified yet). A decode step is
//   draft_model_greedy_preprocess   drop unverified drafts, clear slots starting a request, build
//   inputs (draft model, draft_model_greedy_update) x num_model_steps: greedy choice fused with the
//   writes hybrid_mtp_ngram         (optional) n-gram extension, on the draft side's own lengths
//   ... target model, verification ...
//   draft_model_accept       drop the drafts, append the verified tokens
// Slot kinds come from the target (base model) state as every op of the plugin reads them
// (speculate_slot.h): stopped or empty slots are idle, seq_lens_encoder > 0 is a prefill (a request
// starts), otherwise seq_lens_decoder > 0 is a decoding slot, the only kind that drafts.
// Every length is clamped in the kernels; nothing is read or written outside a tensor whatever the
// values. The GPU paths launch one kernel each, allocate nothing and never synchronise (CUDA-graph
// capturable).
#pragma once

#include <cstdint>
#include <cstring>

#include "common/fdspec_common.h"
#include "common/half_bits.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

// The draft model's input for a slot that has nothing to feed (idle, prefill, no token yet): an id
// every embedding table has. -1 (pre_ids' fill) would read outside the table.
constexpr int64_t kDraftSafeTokenId = 0;

// ---- draft_model_greedy_preprocess
// -------------------------------------------------------------------------

struct DraftModelGreedyPreprocessParams {
  int64_t* input_ids;                      // [B] int64, in place: the draft model's input
  int32_t* seq_lens_decoder;               // [B] int32, in place: draft side, 0 unless decoding
  int64_t* step_idx;                       // [B] int64, in place: draft side, newest pre_ids index
  int64_t* pre_ids;                        // [>= B, D] int64, in place: rows of prefill slots -> -1
  int64_t pre_ids_stride;                  // D (>= 1)
  int32_t* mtp_draft_num;                  // [B] int32, in place: -> 0
  int64_t* max_dec_len;                    // [B] int64, in place: draft side, copy of the target's
  int32_t* base_model_seq_lens_this_time;  // [B] int32, in place: 1 for decoding slots
  const int32_t* base_model_seq_lens_encoder;  // [B] int32
  const int32_t* base_model_seq_lens_decoder;  // [B] int32
  const bool* base_model_stop_flags;           // [B] bool
  const int64_t* base_model_max_dec_len;       // [B] int64
  int64_t batch;                               // B (0: no-op)
};

enum class DraftSlot : int { kIdle = 0, kPrefill = 1, kDecoding = 2 };

FDSPEC_HD DraftSlot draft_slot_kind(bool stopped, int32_t enc, int32_t dec) {
  if (stopped) return DraftSlot::kIdle;
  if (enc > 0) return DraftSlot::kPrefill;
  return dec > 0 ? DraftSlot::kDecoding : DraftSlot::kIdle;
}

// step_idx with the unverified MTP drafts dropped: s0 = clamp(step_idx, 0, D - 1),
// s0 - clamp(mtp_draft_num, 0, s0).
FDSPEC_HD int64_t draft_verified_step(int64_t step_idx, int32_t mtp_draft_num, int64_t D) {
  const int64_t s0 = clamp_to<int64_t>(step_idx, 0, D - 1);
  return s0 - clamp_to<int64_t>(mtp_draft_num, 0, s0);
}

// What the preprocess of a slot reads, pre_ids aside, in one place: the GPU issues these loads
// together (one round trip to memory), then at most one read of pre_ids.
struct DraftPreprocessSlot {
  DraftSlot kind = DraftSlot::kIdle;
  int64_t s = 0;            // the new step_idx: the verified step, 0 for a prefill slot
  int32_t dec = 0;          // the new draft-side seq_lens_decoder
  int64_t max_dec_len = 0;  // the target's
};

FDSPEC_HD DraftPreprocessSlot draft_preprocess_load(const DraftModelGreedyPreprocessParams& p,
                                                    int64_t b) {
  const bool stopped = p.base_model_stop_flags[b];
  const int32_t enc = p.base_model_seq_lens_encoder[b], base_dec = p.base_model_seq_lens_decoder[b];
  const int64_t step = p.step_idx[b];
  const int32_t drafts = p.mtp_draft_num[b];
  DraftPreprocessSlot q;
  q.kind = draft_slot_kind(stopped, enc, base_dec);
  q.s = q.kind == DraftSlot::kPrefill ? 0 : draft_verified_step(step, drafts, p.pre_ids_stride);
  q.dec = q.kind == DraftSlot::kDecoding ? base_dec : 0;
  q.max_dec_len = p.base_model_max_dec_len[b];
  return q;
}

// Whether the draft model's input is pre_ids[b, s] (a decoding slot with a generated token).
FDSPEC_HD bool draft_preprocess_reads_newest(const DraftPreprocessSlot& q) {
  return q.kind == DraftSlot::kDecoding && q.s >= 1;
}

// The writes of a slot, the row clear of a prefill slot aside; `newest` is pre_ids[b, s] when
// draft_preprocess_reads_newest, read before any write of slot b.
FDSPEC_HD void draft_preprocess_store(const DraftModelGreedyPreprocessParams& p, int64_t b,
                                      const DraftPreprocessSlot& q, int64_t newest) {
  if (q.kind == DraftSlot::kDecoding) p.base_model_seq_lens_this_time[b] = 1;
  p.step_idx[b] = q.s;
  p.mtp_draft_num[b] = 0;
  p.input_ids[b] = draft_preprocess_reads_newest(q) && newest >= 0 ? newest : kDraftSafeTokenId;
  p.seq_lens_decoder[b] = q.dec;
  p.max_dec_len[b] = q.max_dec_len;
}

// Sequential reference on the host. O(B + D * prefill slots).
void draft_model_greedy_preprocess_cpu(const DraftModelGreedyPreprocessParams& p);

// ---- draft_model_greedy_update
// -----------------------------------------------------------------------------

struct DraftModelGreedyUpdateParams {
  const void* logits;  // [>= B, V] float32 / float16 / bfloat16
  LogitsDType logits_dtype;
  int64_t vocab_size;                      // V (1 .. 2^31 - 1): columns of logits
  int64_t* input_ids;                      // [B] int64, in place: the chosen token
  int32_t* seq_lens_decoder;               // [B] int32, in place: draft side, +1 per draft
  int64_t* step_idx;                       // [B] int64, in place: +1 per draft
  int64_t* pre_ids;                        // [>= B, D] int64, in place: the draft at step_idx
  int64_t pre_ids_stride;                  // D (>= 1)
  int32_t* mtp_draft_num;                  // [B] int32, in place: substep -> substep + 1
  int64_t* base_model_draft_tokens;        // [>= B, K + 1] int64, in place: column substep + 1
  int64_t draft_stride;                    // K + 1 (>= substep + 2)
  int32_t* base_model_seq_lens_this_time;  // [B] int32, in place: substep + 2
  int64_t substep;                         // 0-based index of this draft-model step
  int64_t batch;                           // B (0: no-op)
};

// The draft-side scalars the update of a slot reads, loaded together.
struct DraftUpdateSlot {
  int64_t step = 0;    // step_idx
  int32_t dec = 0;     // seq_lens_decoder (draft side)
  int32_t drafts = 0;  // mtp_draft_num
};

FDSPEC_HD DraftUpdateSlot draft_update_load(const DraftModelGreedyUpdateParams& p, int64_t b) {
  DraftUpdateSlot u;
  u.step = p.step_idx[b];
  u.dec = p.seq_lens_decoder[b];
  u.drafts = p.mtp_draft_num[b];
  return u;
}

// A slot drafts at `substep` when it decodes (draft-side seq_lens_decoder > 0, set by the
// preprocess), drafted at every earlier substep, and its pre_ids row has room.
FDSPEC_HD bool draft_update_takes(const DraftModelGreedyUpdateParams& p, const DraftUpdateSlot& u) {
  return u.dec > 0 && u.drafts == p.substep &&
         clamp_to<int64_t>(u.step, 0, p.pre_ids_stride - 1) + 1 < p.pre_ids_stride;
}

// Greedy choice as one 64-bit key, so that "the largest logit, ties to the lowest id" is the plain
// maximum of the keys (associative: any reduction order gives the CPU's answer). High half: the
// logit's bits mapped to an unsigned order (NaN counts as -inf, -0 as +0, so the order is total and
// agrees with float comparison); low half: ~id.
FDSPEC_HD uint32_t draft_logit_order(float x) {
  constexpr uint32_t kNegInfOrder = 0x007FFFFFu;  // the order of -inf (bits 0xFF800000)
  if (x != x) return kNegInfOrder;
  if (x == 0.0f) x = 0.0f;
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

FDSPEC_HD uint64_t draft_argmax_key(float x, int64_t id) {
  return (static_cast<uint64_t>(draft_logit_order(x)) << 32) |
         (0xFFFFFFFFu - static_cast<uint32_t>(id));
}

FDSPEC_HD int64_t draft_argmax_id(uint64_t key) {
  return static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
}

// The writes of a slot that drafts `token`.
FDSPEC_HD void draft_update_write(const DraftModelGreedyUpdateParams& p, int64_t b,
                                  const DraftUpdateSlot& u, int64_t token) {
  const int64_t s = clamp_to<int64_t>(u.step, 0, p.pre_ids_stride - 1) + 1;
  p.step_idx[b] = s;
  p.pre_ids[b * p.pre_ids_stride + s] = token;
  p.base_model_draft_tokens[b * p.draft_stride + p.substep + 1] = token;
  p.mtp_draft_num[b] = static_cast<int32_t>(p.substep + 1);
  p.base_model_seq_lens_this_time[b] = static_cast<int32_t>(p.substep + 2);
  p.seq_lens_decoder[b] = u.dec < INT32_MAX ? u.dec + 1 : u.dec;
  p.input_ids[b] = token;
}

// Sequential reference on the host. O(V * drafting slots).
void draft_model_greedy_update_cpu(const DraftModelGreedyUpdateParams& p);

// ---- draft_model_accept
// -----------------------------------------------------------------------------

struct DraftModelAcceptParams {
  const int64_t* accept_tokens;  // [>= B, K + 1] int64: the verified tokens
  const int32_t* accept_num;     // [B] int32: n, clamped
  int64_t width;                 // K + 1 (>= 1)
  int64_t* step_idx;             // [B] int64, in place: s + n
  int64_t* pre_ids;              // [>= B, D] int64, in place: s + 1 .. s + n
  int64_t pre_ids_stride;        // D (>= 1)
  int32_t* mtp_draft_num;        // [B] int32, in place: -> 0
  int64_t batch;                 // B (0: no-op)
};

struct DraftAcceptSlot {
  int64_t s = 0;  // step_idx with the drafts dropped
  int64_t n = 0;  // tokens appended
};

FDSPEC_HD DraftAcceptSlot draft_accept_slot(const DraftModelAcceptParams& p, int64_t b) {
  DraftAcceptSlot a;
  a.s = draft_verified_step(p.step_idx[b], p.mtp_draft_num[b], p.pre_ids_stride);
  a.n = clamp_to<int64_t>(p.accept_num[b], 0, min_of<int64_t>(p.width, p.pre_ids_stride - 1 - a.s));
  return a;
}

// Sequential reference on the host. O(B * (K + 1)).
void draft_model_accept_cpu(const DraftModelAcceptParams& p);

// ---- draft_model_accept_preprocess (ours)
// -----------------------------------------------------------

// draft_model_accept then draft_model_greedy_preprocess, for a proposer that keeps a step's
// verified tokens until the next step starts (as upstream's draft_model_preprocess takes them): the
// two ops' rules on one set of tensors, the draft side's shared.
struct DraftModelAcceptPreprocessParams {
  int64_t* input_ids;                          // [B] int64, in place
  int32_t* seq_lens_decoder;                   // [B] int32, in place
  int64_t* step_idx;                           // [B] int64, in place
  int64_t* pre_ids;                            // [>= B, D] int64, in place
  int64_t pre_ids_stride;                      // D (>= 1)
  int32_t* mtp_draft_num;                      // [B] int32, in place
  int64_t* max_dec_len;                        // [B] int64, in place
  const int64_t* accept_tokens;                // [>= B, K + 1] int64
  const int32_t* accept_num;                   // [B] int32
  int64_t width;                               // K + 1 (>= 1)
  int32_t* base_model_seq_lens_this_time;      // [B] int32, in place
  const int32_t* base_model_seq_lens_encoder;  // [B] int32
  const int32_t* base_model_seq_lens_decoder;  // [B] int32
  const bool* base_model_stop_flags;           // [B] bool
  const int64_t* base_model_max_dec_len;       // [B] int64
  int64_t batch;                               // B (0: no-op)

  // The two ops' params, initialised in their field order from the fields of the same names.
  FDSPEC_HD DraftModelAcceptParams accept() const {
    return {accept_tokens, accept_num,     width,         step_idx,
            pre_ids,       pre_ids_stride, mtp_draft_num, batch};
  }
  FDSPEC_HD DraftModelGreedyPreprocessParams preprocess() const {
    return {input_ids,
            seq_lens_decoder,
            step_idx,
            pre_ids,
            pre_ids_stride,
            mtp_draft_num,
            max_dec_len,
            base_model_seq_lens_this_time,
            base_model_seq_lens_encoder,
            base_model_seq_lens_decoder,
            base_model_stop_flags,
            base_model_max_dec_len,
            batch};
  }
};

// Sequential reference on the host: draft_model_accept_cpu, then draft_model_greedy_preprocess_cpu.
void draft_model_accept_preprocess_cpu(const DraftModelAcceptPreprocessParams& p);

#ifdef FDSPEC_WITH_CUDA
// The kernels are short chains of dependent memory accesses, so each reads what it needs at once
// (one round trip for a slot's scalars) and is launched as a programmatic dependent of the work
// before it (common/cuda_utils.cuh), which hides its launch behind its predecessor.
// Preprocess: one warp per slot (the lanes clear a prefill slot's row). One kernel,
// graph-capturable.
cudaError_t draft_model_greedy_preprocess_gpu(const DraftModelGreedyPreprocessParams& p,
                                              cudaStream_t stream);
// Update: small batches (B <= SMs / 4, sm_90+) split each logits row over a thread-block cluster of
// up to 8 blocks, larger ones give a row one block (512 threads up to B = SMs, 256 beyond; the
// shapes and their timings are in draft_model.cu). A block issues the loads of the slot's scalars
// and of its first round of logits together, exits if the slot does not draft (those loads go
// unused), else reads the rest of its slice once in 16-byte loads, reduces the keys (warp
// reductions), and the leader writes. One kernel, graph-capturable.
cudaError_t draft_model_greedy_update_gpu(const DraftModelGreedyUpdateParams& p,
                                          cudaStream_t stream);
// Accept: one warp per slot: the lanes load the verified tokens with the slot's scalars and copy
// them, lane 0 writes the scalars. One kernel, graph-capturable.
cudaError_t draft_model_accept_gpu(const DraftModelAcceptParams& p, cudaStream_t stream);
// Accept + preprocess: one warp per slot, both ops' reads in one round trip (the accepted tokens
// with the scalars; a decoding slot's newest token is then the last accepted one, or pre_ids[b, s]
// when none was), one kernel instead of two. Graph-capturable.
cudaError_t draft_model_accept_preprocess_gpu(const DraftModelAcceptPreprocessParams& p,
                                              cudaStream_t stream);
#endif

}  // namespace fdspec
