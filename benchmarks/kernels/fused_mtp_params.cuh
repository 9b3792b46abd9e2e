// Parameters of the fused greedy MTP ops (custom_ops/draft_model) over one set of pointers, host or
// device: the draft side that MTPProposer(ops="fused") keeps and the target's tensors it reads.
// Shared by the benchmarks that time the fused step (bench_mtp_kernels, bench_mtp_state).
#pragma once

#include <cstdint>

#include "draft_model/draft_model.h"

namespace bench {

struct FusedMtpPtrs {
  int64_t batch, width, pre_ids_stride, vocab;  // B, K + 1, D, V
  // draft side, in place
  int64_t *input_ids, *step_idx, *pre_ids, *max_dec_len;
  int32_t *seq_lens_decoder, *mtp_draft_num;
  // target side
  const int64_t* accept_tokens;
  const int32_t* accept_num;
  int32_t* seq_lens_this_time;  // in place
  const int32_t *seq_lens_encoder, *target_seq_lens_decoder;
  const bool* stop_flags;
  const int64_t* target_max_dec_len;
  int64_t* draft_tokens;  // in place

  // Also the greedy preprocess and the accept: its .preprocess() and .accept(). Initialisers in
  // the params structs' field order (custom_ops/draft_model/draft_model.h).
  fdspec::DraftModelAcceptPreprocessParams accept_preprocess() const {
    return {input_ids,
            seq_lens_decoder,
            step_idx,
            pre_ids,
            pre_ids_stride,
            mtp_draft_num,
            max_dec_len,
            accept_tokens,
            accept_num,
            width,
            seq_lens_this_time,
            seq_lens_encoder,
            target_seq_lens_decoder,
            stop_flags,
            target_max_dec_len,
            batch};
  }
  // Draft-model step `substep` with its float32 logits [B, V].
  fdspec::DraftModelGreedyUpdateParams update(const float* logits, int substep) const {
    return {logits,
            fdspec::LogitsDType::kFloat32,
            vocab,
            input_ids,
            seq_lens_decoder,
            step_idx,
            pre_ids,
            pre_ids_stride,
            mtp_draft_num,
            draft_tokens,
            width,
            seq_lens_this_time,
            substep,
            batch};
  }
};

}  // namespace bench
