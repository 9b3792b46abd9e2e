// draft_model_accept: Paddle binding. Checks the tensors by name and dispatches on the place of
// accept_tokens. Rule: draft_model.h; contract: docs/contract/draft_model.md.
#include "binding/tensor_rules.h"
#include "draft_model/draft_model.h"
#include "draft_model/draft_model_binding.h"

constexpr const char* kOp = "draft_model_accept";

void DraftModelAccept(const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
                      paddle::Tensor& step_idx, paddle::Tensor& pre_ids,
                      paddle::Tensor& mtp_draft_num) {
  const fdspec::binding::OpChecks c(kOp);
  fdspec::DraftModelAcceptParams p;
  p.batch =
      c.tensors({FDSPEC_TENSORS(p, accept_tokens, accept_num, step_idx, pre_ids, mtp_draft_num)},
                "accept_num");
  fdspec::binding::check_accept_widths(c, accept_tokens, pre_ids, &p.width, &p.pre_ids_stride);

  FDSPEC_RUN_ON_PLACE(kOp, accept_tokens, p, fdspec::draft_model_accept_cpu,
                      fdspec::draft_model_accept_gpu);
}

PD_BUILD_OP(draft_model_accept)
    .Inputs({"accept_tokens", "accept_num", "step_idx", "pre_ids", "mtp_draft_num"})
        FDSPEC_INPLACE_OUTPUTS("step_idx", "pre_ids", "mtp_draft_num")
    .SetKernelFn(PD_KERNEL(DraftModelAccept));
