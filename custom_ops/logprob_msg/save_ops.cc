// The two save ops: Paddle bindings (docs/contract/transport.md), one definition for both.
// speculate_save_output_topk sends the accepted tokens of a step with their top-k logprobs to the
// token processor; mtp_save_first_token_with_topk sends, per slot, the first token with its top-k
// logprobs followed by the draft tokens (ids only). They take the same tensors and attributes and
// differ only in the message mode (see save_binding.h); both name their last tensor as upstream
// does.
#include "logprob_msg/save_binding.h"

#define FDSPEC_SAVE_OP(op, fn, mode, preempted)                                                   \
  void fn(const paddle::Tensor& sampled_token_ids, const paddle::Tensor& logprob_token_ids,       \
          const paddle::Tensor& logprob_scores, const paddle::Tensor& logprob_ranks,              \
          const paddle::Tensor& token_num_per_batch, const paddle::Tensor& cu_batch_token_offset, \
          const paddle::Tensor& not_need_stop, const paddle::Tensor& seq_lens_decoder,            \
          const paddle::Tensor& prompt_lens, const paddle::Tensor& preempted, int message_flag,   \
          int64_t rank_id, bool save_each_rank, int64_t queue_id) {                               \
    const fdspec::logprob_binding::SaveInputs in{                                                 \
        sampled_token_ids, logprob_token_ids,   logprob_scores,                                   \
        logprob_ranks,     token_num_per_batch, cu_batch_token_offset,                            \
        not_need_stop,     seq_lens_decoder,    prompt_lens,                                      \
        preempted,         #preempted};                                                           \
    fdspec::logprob_binding::save_logprob_message(#op, fdspec::logprob_msg::SaveMode::mode, in,   \
                                                  message_flag, rank_id, save_each_rank,          \
                                                  queue_id);                                      \
  }                                                                                               \
  PD_BUILD_OP(op)                                                                                 \
      .Inputs({"sampled_token_ids", "logprob_token_ids", "logprob_scores", "logprob_ranks",       \
               "token_num_per_batch", "cu_batch_token_offset", "not_need_stop",                   \
               "seq_lens_decoder", "prompt_lens", #preempted})                                    \
      .Attrs(                                                                                     \
          {"message_flag: int", "rank_id: int64_t", "save_each_rank: bool", "queue_id: int64_t"}) \
      .SetKernelFn(PD_KERNEL(fn))

FDSPEC_SAVE_OP(speculate_save_output_topk, SpeculateSaveOutputTopK, kAcceptedTokens, preempted_idx);
FDSPEC_SAVE_OP(mtp_save_first_token_with_topk, MtpSaveFirstTokenWithTopK, kFirstTokenWithDrafts,
               preempted_idx);
