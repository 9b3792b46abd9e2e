// draft_model_accept: Paddle binding. Checks the tensors by name and dispatches on the place of
// accept_tokens. Rule: draft_model.h; contract: docs/contract/draft_model.md.
#include "binding/tensor_rules.h"
#include "draft_model/draft_model.h"

namespace {

constexpr const char* kOp = "draft_model_accept";

}  // namespace

void DraftModelAccept(const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
                      paddle::Tensor& step_idx, paddle::Tensor& pre_ids,
                      paddle::Tensor& mtp_draft_num) {
  const fdspec::binding::OpChecks c(kOp);
  fdspec::DraftModelAcceptParams p;
  p.batch = c.tensors({FDSPEC_TENSORS(p, accept_tokens, accept_num, step_idx, pre_ids,
                                      mtp_draft_num)},
                      "accept_num");
  p.width = accept_tokens.shape()[1];
  p.pre_ids_stride = pre_ids.shape()[1];
  c.that(p.width >= 1, "accept_tokens must have at least one column (K + 1), got shape " +
                           fdspec::binding::shape_str(accept_tokens))
      .that(p.pre_ids_stride >= 1,
            "pre_ids must have at least one column, got shape " + fdspec::binding::shape_str(pre_ids));

  FDSPEC_RUN_ON_PLACE(kOp, accept_tokens, p, fdspec::draft_model_accept_cpu,
                      fdspec::draft_model_accept_gpu);
}

PD_BUILD_OP(draft_model_accept)
    .Inputs({"accept_tokens", "accept_num", "step_idx", "pre_ids", "mtp_draft_num"})
    FDSPEC_INPLACE_OUTPUTS("step_idx", "pre_ids", "mtp_draft_num")
    .SetKernelFn(PD_KERNEL(DraftModelAccept));
