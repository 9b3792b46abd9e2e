// unified_update_model_status: Paddle binding. Checks the tensors by name and dispatches on the
// place of seq_lens_encoder. FastDeploy's 14 tensors, in its order.
#include "binding/tensor_rules.h"
#include "unified_update_model_status/unified_update_model_status.h"

constexpr const char* kOp = "unified_update_model_status";

void UnifiedUpdateModelStatus(paddle::Tensor& seq_lens_encoder, paddle::Tensor& seq_lens_decoder,
                              paddle::Tensor& has_running_seqs, paddle::Tensor& step_input_ids,
                              paddle::Tensor& step_output_ids, paddle::Tensor& step_output_len,
                              paddle::Tensor& stop_flags, paddle::Tensor& seq_lens_this_time,
                              const paddle::Tensor& is_paused, paddle::Tensor& token_ids_all,
                              const paddle::Tensor& prompt_lens, paddle::Tensor& step_idx,
                              const paddle::Tensor& end_tokens, const paddle::Tensor& max_dec_len) {
  const fdspec::binding::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, has_running_seqs, seq_lens_this_time, end_tokens);
  fdspec::UnifiedUpdateModelStatusParams p{};
  p.rows = c.tensors({FDSPEC_TENSORS(p, seq_lens_encoder, seq_lens_decoder, step_input_ids,
                                     step_output_ids, step_output_len, stop_flags, is_paused,
                                     token_ids_all, prompt_lens, step_idx, max_dec_len)},
                     "stop_flags");
  p.width = step_input_ids.shape()[1];
  p.token_ids_stride = token_ids_all.shape()[1];
  c.that(p.width >= 1, "step_input_ids must have at least one column")
      .k1_columns(step_output_ids, "step_output_ids", "step_input_ids", p.width);
  c.dtype(has_running_seqs, "has_running_seqs", paddle::DataType::BOOL)
      .that(has_running_seqs.numel() == 1, "has_running_seqs must hold one element, got shape " +
                                               fdspec::binding::shape_str(has_running_seqs))
      .same_place(seq_lens_encoder, "seq_lens_encoder", has_running_seqs, "has_running_seqs");
  p.has_running_seqs = has_running_seqs.data<bool>();
  p.batch = fdspec::binding::seq_lens_batch(c, seq_lens_this_time, seq_lens_encoder,
                                            "seq_lens_encoder", p.rows, "of stop_flags");
  p.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  p.num_end_tokens = c.vector_on(end_tokens, "end_tokens", paddle::DataType::INT64,
                                 seq_lens_encoder, "seq_lens_encoder");
  p.end_tokens = end_tokens.data<int64_t>();

  FDSPEC_RUN_ON_PLACE(kOp, seq_lens_encoder, p, fdspec::unified_update_model_status_cpu,
                      fdspec::unified_update_model_status_gpu);
}

PD_BUILD_OP(unified_update_model_status)
    .Inputs({"seq_lens_encoder", "seq_lens_decoder", "has_running_seqs", "step_input_ids",
             "step_output_ids", "step_output_len", "stop_flags", "seq_lens_this_time", "is_paused",
             "token_ids_all", "prompt_lens", "step_idx", "end_tokens", "max_dec_len"})
        FDSPEC_INPLACE_OUTPUTS("seq_lens_encoder", "seq_lens_decoder", "has_running_seqs",
                               "step_input_ids", "step_output_ids", "step_output_len", "stop_flags",
                               "seq_lens_this_time", "token_ids_all", "step_idx")
    .SetKernelFn(PD_KERNEL(UnifiedUpdateModelStatus));
