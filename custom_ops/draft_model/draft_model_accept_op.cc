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
  namespace rule = fdspec::binding::rule;
  const int64_t B = c.tensors(
      {rule::accept_tokens(accept_tokens), rule::accept_num(accept_num), rule::step_idx(step_idx),
       rule::pre_ids(pre_ids), rule::mtp_draft_num(mtp_draft_num)},
      "accept_num");
  c.that(accept_tokens.shape()[1] >= 1, "accept_tokens must have at least one column (K + 1), got shape " +
                                            fdspec::binding::shape_str(accept_tokens))
      .that(pre_ids.shape()[1] >= 1,
            "pre_ids must have at least one column, got shape " + fdspec::binding::shape_str(pre_ids));

  fdspec::DraftModelAcceptParams p;
  p.accept_tokens = accept_tokens.data<int64_t>();
  p.accept_num = accept_num.data<int32_t>();
  p.width = accept_tokens.shape()[1];
  p.step_idx = step_idx.data<int64_t>();
  p.pre_ids = pre_ids.data<int64_t>();
  p.pre_ids_stride = pre_ids.shape()[1];
  p.mtp_draft_num = mtp_draft_num.data<int32_t>();
  p.batch = B;

  FDSPEC_RUN_ON_PLACE(kOp, accept_tokens, p, fdspec::draft_model_accept_cpu,
                      fdspec::draft_model_accept_gpu);
}

PD_BUILD_OP(draft_model_accept)
    .Inputs({"accept_tokens", "accept_num", "step_idx", "pre_ids", "mtp_draft_num"})
    .Outputs({"step_idx_out", "pre_ids_out", "mtp_draft_num_out"})
    .SetInplaceMap({{"step_idx", "step_idx_out"},
                    {"pre_ids", "pre_ids_out"},
                    {"mtp_draft_num", "mtp_draft_num_out"}})
    .SetKernelFn(PD_KERNEL(DraftModelAccept));
