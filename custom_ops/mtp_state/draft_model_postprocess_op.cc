// draft_model_postprocess (FastDeploy's contract): Paddle binding. Checks the tensors by name and
// dispatches on the place of base_model_seq_lens_this_time. Rule: mtp_state.h; contract:
// docs/contract/mtp_state.md.
#include "mtp_state/mtp_state.h"
#include "mtp_state/mtp_state_binding.h"

constexpr const char* kOp = "draft_model_postprocess";

// base_model_draft_tokens and base_model_stop_flags are in place as upstream declares them; neither
// is written.
void DraftModelPostprocess(paddle::Tensor& base_model_draft_tokens,
                           paddle::Tensor& base_model_seq_lens_this_time,
                           const paddle::Tensor& base_model_seq_lens_encoder,
                           paddle::Tensor& base_model_stop_flags) {
  namespace fb = fdspec::binding;
  const fb::OpChecks c(kOp);
  fdspec::MtpPostprocessParams p;
  p.batch = c.tensors({FDSPEC_TENSORS(p, base_model_draft_tokens, base_model_seq_lens_this_time,
                                      base_model_seq_lens_encoder, base_model_stop_flags)},
                      "base_model_seq_lens_this_time");
  p.base_draft_stride = base_model_draft_tokens.shape()[1];

  FDSPEC_RUN_ON_PLACE(kOp, base_model_seq_lens_this_time, p, fdspec::mtp_postprocess_cpu,
                      fdspec::mtp_postprocess_gpu);
}

PD_BUILD_OP(draft_model_postprocess)
    .Inputs({"base_model_draft_tokens", "base_model_seq_lens_this_time",
             "base_model_seq_lens_encoder", "base_model_stop_flags"})
        FDSPEC_INPLACE_OUTPUTS("base_model_draft_tokens", "base_model_seq_lens_this_time",
                               "base_model_stop_flags")
    .SetKernelFn(PD_KERNEL(DraftModelPostprocess));
