// speculate_save_output_topk: Paddle binding (docs/contract/transport.md). Sends the accepted tokens of a
// step with their top-k logprobs to the token processor; see save_binding.h.
#include "logprob_msg/save_binding.h"

void SpeculateSaveOutputTopK(const paddle::Tensor& sampled_token_ids,
                             const paddle::Tensor& logprob_token_ids,
                             const paddle::Tensor& logprob_scores,
                             const paddle::Tensor& logprob_ranks,
                             const paddle::Tensor& token_num_per_batch,
                             const paddle::Tensor& cu_batch_token_offset,
                             const paddle::Tensor& not_need_stop,
                             const paddle::Tensor& seq_lens_decoder,
                             const paddle::Tensor& prompt_lens,
                             const paddle::Tensor& last_preempted_idx, int message_flag,
                             int64_t rank_id, bool save_each_rank, int64_t queue_id) {
  const fdspec::logprob_binding::SaveInputs in{
      sampled_token_ids,     logprob_token_ids, logprob_scores,   logprob_ranks,
      token_num_per_batch,   cu_batch_token_offset, not_need_stop, seq_lens_decoder,
      prompt_lens,           last_preempted_idx, "last_preempted_idx"};
  fdspec::logprob_binding::save_logprob_message("speculate_save_output_topk",
                                                fdspec::logprob_msg::SaveMode::kAcceptedTokens, in,
                                                message_flag, rank_id, save_each_rank, queue_id);
}

PD_BUILD_OP(speculate_save_output_topk)
    .Inputs({"sampled_token_ids", "logprob_token_ids", "logprob_scores", "logprob_ranks",
             "token_num_per_batch", "cu_batch_token_offset", "not_need_stop", "seq_lens_decoder",
             "prompt_lens", "last_preempted_idx"})
    .Attrs({"message_flag: int", "rank_id: int64_t", "save_each_rank: bool", "queue_id: int64_t"})
    .SetKernelFn(PD_KERNEL(SpeculateSaveOutputTopK));
