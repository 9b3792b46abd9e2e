// draft_model_update (FastDeploy's contract): Paddle binding. Checks the tensors by name and
// dispatches on the place of seq_lens_this_time. Rule: mtp_state.h; contract:
// docs/contract/mtp_state.md.
#include "mtp_state/mtp_state.h"
#include "mtp_state/mtp_state_binding.h"

constexpr const char* kOp = "draft_model_update";

void DraftModelUpdate(const paddle::Tensor& inter_next_tokens, paddle::Tensor& draft_tokens,
                      paddle::Tensor& pre_ids, paddle::Tensor& seq_lens_this_time,
                      paddle::Tensor& seq_lens_encoder, paddle::Tensor& seq_lens_decoder,
                      paddle::Tensor& step_idx, const paddle::Tensor& cu_seqlens_q_output,
                      const paddle::Tensor& stop_flags, paddle::Tensor& not_need_stop,
                      const paddle::Tensor& max_dec_len, const paddle::Tensor& end_ids,
                      paddle::Tensor& base_model_draft_tokens, int max_seq_len, int substep) {
  namespace fb = fdspec::binding;
  const fb::OpChecks c(kOp);
  fdspec::MtpUpdateParams p;
  // cu_seqlens_q_output and end_ids are upstream's inputs that its kernel does not read either.
  p.batch =
      c.tensors({FDSPEC_TENSORS(p, inter_next_tokens, draft_tokens, pre_ids, seq_lens_this_time,
                                seq_lens_encoder, seq_lens_decoder, step_idx),
                 fb::rule::cu_seqlens_q_output(cu_seqlens_q_output),
                 FDSPEC_TENSORS(p, stop_flags, not_need_stop, max_dec_len),
                 fb::rule::end_ids(end_ids), FDSPEC_TENSOR(p, base_model_draft_tokens)},
                "seq_lens_this_time");
  fb::check_not_need_stop(c, not_need_stop);
  p.next_tokens_len = inter_next_tokens.numel();
  p.draft_tokens_stride = fb::columns_at_least(c, draft_tokens, "draft_tokens", 1);
  p.pre_ids_stride = fb::columns_at_least(c, pre_ids, "pre_ids", 1);
  p.base_draft_stride = base_model_draft_tokens.shape()[1];
  p.substep = substep;
  c.that(substep >= 0 && int64_t{substep} + 2 <= p.base_draft_stride,
         "substep must be in [0, K - 1] (base_model_draft_tokens has K + 1 = " +
             std::to_string(p.base_draft_stride) + " columns), got " + std::to_string(substep));
  (void)max_seq_len;  // upstream's attribute, unused by its kernel as by ours

  FDSPEC_RUN_ON_PLACE(kOp, seq_lens_this_time, p, fdspec::mtp_update_cpu, fdspec::mtp_update_gpu);
}

PD_BUILD_OP(draft_model_update)
    .Inputs({"inter_next_tokens", "draft_tokens", "pre_ids", "seq_lens_this_time",
             "seq_lens_encoder", "seq_lens_decoder", "step_idx", "cu_seqlens_q_output",
             "stop_flags", "not_need_stop", "max_dec_len", "end_ids", "base_model_draft_tokens"})
    .Attrs({"max_seq_len: int", "substep: int"})
        FDSPEC_INPLACE_OUTPUTS("draft_tokens", "pre_ids", "seq_lens_this_time", "seq_lens_encoder",
                               "seq_lens_decoder", "step_idx", "stop_flags", "not_need_stop",
                               "base_model_draft_tokens")
    .SetKernelFn(PD_KERNEL(DraftModelUpdate));
