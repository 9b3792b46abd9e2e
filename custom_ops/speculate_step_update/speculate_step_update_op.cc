// speculate_step_update: Paddle binding. Checks the tensors by name and dispatches on the place of
// accept_tokens.
#include "binding/tensor_rules.h"
#include "speculate_step_update/speculate_step_update.h"

namespace {

constexpr const char* kOp = "speculate_step_update";

}  // namespace

void SpeculateStepUpdate(const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
                         paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
                         paddle::Tensor& step_idx, const paddle::Tensor& max_dec_len,
                         const paddle::Tensor& end_tokens, paddle::Tensor& stop_flags,
                         paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
                         paddle::Tensor& seq_lens_decoder, paddle::Tensor& draft_tokens) {
  const fdspec::binding::OpChecks c(kOp);
  fdspec::SpeculateStepUpdateParams p;
  p.batch = c.tensors(
      {FDSPEC_TENSORS(p, accept_tokens, accept_num, token_ids_all, prompt_lens, step_idx,
                      max_dec_len, end_tokens, stop_flags, seq_lens_this_time, seq_lens_encoder,
                      seq_lens_decoder, draft_tokens)},
      "seq_lens_this_time");
  p.width = accept_tokens.shape()[1];
  p.token_ids_stride = token_ids_all.shape()[1];
  p.num_end_tokens = end_tokens.numel();
  c.that(p.width >= 1, "accept_tokens must have at least one column (K + 1)")
      .k1_columns(draft_tokens, "draft_tokens", "accept_tokens", p.width);

  FDSPEC_RUN_ON_PLACE(kOp, accept_tokens, p, fdspec::speculate_step_update_cpu,
                      fdspec::speculate_step_update_gpu);
}

PD_BUILD_OP(speculate_step_update)
    .Inputs({"accept_tokens", "accept_num", "token_ids_all", "prompt_lens", "step_idx",
             "max_dec_len", "end_tokens", "stop_flags", "seq_lens_this_time", "seq_lens_encoder",
             "seq_lens_decoder", "draft_tokens"})
    FDSPEC_INPLACE_OUTPUTS("token_ids_all", "step_idx", "stop_flags", "seq_lens_this_time",
                           "seq_lens_encoder", "seq_lens_decoder", "draft_tokens")
    .SetKernelFn(PD_KERNEL(SpeculateStepUpdate));
