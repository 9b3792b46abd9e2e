// draft_model_preprocess (FastDeploy's contract): Paddle binding. Checks the tensors by name and
// dispatches on the place of seq_lens_this_time. Rule: mtp_state.h; contract:
// docs/contract/mtp_state.md.
#include "mtp_state/mtp_state.h"
#include "mtp_state/mtp_state_binding.h"

constexpr const char* kOp = "draft_model_preprocess";

void DraftModelPreprocess(
    paddle::Tensor& draft_tokens, paddle::Tensor& input_ids, paddle::Tensor& stop_flags,
    paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
    paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx, paddle::Tensor& not_need_stop,
    paddle::Tensor& pre_ids, const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
    const paddle::Tensor& target_model_seq_lens_encoder,
    const paddle::Tensor& target_model_seq_lens_decoder,
    const paddle::Tensor& target_model_step_idx, const paddle::Tensor& target_model_stop_flags,
    const paddle::Tensor& max_dec_len, paddle::Tensor& target_model_draft_tokens,
    int num_model_step, bool is_splitwise_prefill) {
  namespace fb = fdspec::binding;
  using Rule = fb::OpChecks::Rule;
  const fb::OpChecks c(kOp);
  fdspec::MtpPreprocessParams p;
  p.batch = c.tensors(
      {FDSPEC_TENSOR(p, draft_tokens),
       // input_ids here is the draft model's token rows [B, max_model_len], not one id per slot.
       Rule{"input_ids", input_ids, paddle::DataType::INT64, fb::OpChecks::Dim::kRows, &p.input_ids,
            &input_ids},
       FDSPEC_TENSORS(p, stop_flags, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder,
                      step_idx, not_need_stop, pre_ids, accept_tokens, accept_num),
       FDSPEC_TENSORS(p, target_model_seq_lens_encoder, target_model_seq_lens_decoder,
                      target_model_step_idx, target_model_stop_flags, max_dec_len,
                      target_model_draft_tokens)},
      "seq_lens_this_time");
  fb::check_not_need_stop(c, not_need_stop);
  p.draft_tokens_stride = fb::columns_at_least(c, draft_tokens, "draft_tokens", 1);
  p.input_ids_stride = fb::columns_at_least(c, input_ids, "input_ids", 1);
  p.pre_ids_stride = fb::columns_at_least(c, pre_ids, "pre_ids", 1);
  p.accept_stride = fb::columns_at_least(c, accept_tokens, "accept_tokens", 1);
  p.target_draft_stride =
      fb::columns_at_least(c, target_model_draft_tokens, "target_model_draft_tokens", 1);
  p.num_model_step = num_model_step;
  p.is_splitwise_prefill = is_splitwise_prefill;
  c.that(num_model_step >= 0, "num_model_step must be >= 0, got " + std::to_string(num_model_step));

  FDSPEC_RUN_ON_PLACE(kOp, seq_lens_this_time, p, fdspec::mtp_preprocess_cpu,
                      fdspec::mtp_preprocess_gpu);
}

PD_BUILD_OP(draft_model_preprocess)
    .Inputs({"draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time", "seq_lens_encoder",
             "seq_lens_decoder", "step_idx", "not_need_stop", "pre_ids", "accept_tokens",
             "accept_num", "target_model_seq_lens_encoder", "target_model_seq_lens_decoder",
             "target_model_step_idx", "target_model_stop_flags", "max_dec_len",
             "target_model_draft_tokens"})
        FDSPEC_INPLACE_OUTPUTS("draft_tokens", "input_ids", "stop_flags", "seq_lens_this_time",
                               "seq_lens_encoder", "seq_lens_decoder", "step_idx", "not_need_stop",
                               "pre_ids")
    .Attrs({"num_model_step: int", "is_splitwise_prefill: bool"})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocess));
