// draft_model_set_value_by_flags (FastDeploy's contract): Paddle binding. Checks the tensors by
// name and dispatches on the place of seq_lens_this_time. Rule: mtp_state.h; contract:
// docs/contract/mtp_state.md.
#include "mtp_state/mtp_state.h"
#include "mtp_state/mtp_state_binding.h"

constexpr const char* kOp = "draft_model_set_value_by_flags";

// seq_lens_this_time is written (running slots -> 1) as upstream's kernel does, although upstream's
// registration (and so ours, which must equal it) declares only pre_ids_all in place.
void DraftModelSetValueByFlags(const paddle::Tensor& draft_tokens, paddle::Tensor& pre_ids_all,
                               const paddle::Tensor& stop_flags, paddle::Tensor& seq_lens_this_time,
                               const paddle::Tensor& seq_lens_encoder,
                               const paddle::Tensor& seq_lens_decoder,
                               const paddle::Tensor& step_idx) {
  namespace fb = fdspec::binding;
  const fb::OpChecks c(kOp);
  fdspec::MtpSetValueByFlagsParams p;
  p.batch = c.tensors({FDSPEC_TENSORS(p, draft_tokens, pre_ids_all, stop_flags, seq_lens_this_time),
                       fb::rule::seq_lens_encoder(seq_lens_encoder),
                       fb::rule::seq_lens_decoder(seq_lens_decoder), FDSPEC_TENSOR(p, step_idx)},
                      "seq_lens_this_time");
  p.draft_tokens_stride = fb::columns_at_least(c, draft_tokens, "draft_tokens", 1);
  p.pre_ids_stride = fb::columns_at_least(c, pre_ids_all, "pre_ids_all", 1);

  FDSPEC_RUN_ON_PLACE(kOp, seq_lens_this_time, p, fdspec::mtp_set_value_by_flags_cpu,
                      fdspec::mtp_set_value_by_flags_gpu);
}

PD_BUILD_OP(draft_model_set_value_by_flags)
    .Inputs({"draft_tokens", "pre_ids_all", "stop_flags", "seq_lens_this_time", "seq_lens_encoder",
             "seq_lens_decoder", "step_idx"}) FDSPEC_INPLACE_OUTPUTS("pre_ids_all")
    .SetKernelFn(PD_KERNEL(DraftModelSetValueByFlags));
