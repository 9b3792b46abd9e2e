// speculate_draft_length_policy: Paddle binding (docs/contract/policy.md). Checks the tensors by
// name and the attributes' ranges, and dispatches on the place of seq_lens_this_time.
#include "binding/tensor_rules.h"
#include "speculate_draft_length_policy/speculate_draft_length_policy.h"

constexpr const char* kOp = "speculate_draft_length_policy";

void SpeculateDraftLengthPolicy(const paddle::Tensor& accept_num,
                                const paddle::Tensor& draft_tokens, paddle::Tensor& draft_len,
                                paddle::Tensor& draft_probe, paddle::Tensor& accept_ewma,
                                const paddle::Tensor& draft_opt_out,
                                paddle::Tensor& seq_lens_this_time,
                                const paddle::Tensor& seq_lens_encoder,
                                const paddle::Tensor& seq_lens_decoder,
                                const paddle::Tensor& stop_flags, const paddle::Tensor& cost_table,
                                int alpha, int prior, int64_t seq_cost_ns, int64_t step_cost_ns) {
  const fdspec::binding::OpChecks c(kOp);
  fdspec::SpeculateDraftLengthPolicyParams p;
  p.batch =
      c.tensors({FDSPEC_TENSORS(p, accept_num, draft_tokens, draft_len, draft_probe, accept_ewma),
                 fdspec::binding::rule::draft_opt_out(draft_opt_out, &p.opt_out),
                 FDSPEC_TENSORS(p, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder,
                                stop_flags, cost_table)},
                "seq_lens_this_time");
  p.max_drafts = accept_ewma.shape()[1];
  p.table_len = cost_table.numel();
  c.that(draft_tokens.shape()[1] == p.max_drafts + 1,
         "draft_tokens must have K + 1 = " + std::to_string(p.max_drafts + 1) +
             " columns (K: the columns of accept_ewma), got " +
             std::to_string(draft_tokens.shape()[1]));
  const std::string one = std::to_string(fdspec::kPolicyOne);
  c.that(p.max_drafts <= fdspec::kPolicyMaxDrafts,
         "accept_ewma has " + std::to_string(p.max_drafts) + " columns (K); at most " +
             std::to_string(fdspec::kPolicyMaxDrafts) + " are supported")
      .that(p.batch * (p.max_drafts + 1) <= fdspec::kPolicyMaxCandidates,
            "B * (K + 1) must be at most 2^29, got " + std::to_string(p.batch * (p.max_drafts + 1)))
      .that(p.table_len >= 1, "cost_table must have at least one entry (the step time of 1 token)")
      .that(alpha >= 0 && alpha <= fdspec::kPolicyOne,
            "alpha must be in [0, " + one + "] (Q16), got " + std::to_string(alpha))
      .that(prior >= 0 && prior <= fdspec::kPolicyOne,
            "prior must be in [0, " + one + "] (Q16), got " + std::to_string(prior))
      .that(seq_cost_ns >= 0 && seq_cost_ns <= fdspec::kPolicyMaxNs,
            "seq_cost_ns must be in [0, 2^32 - 1], got " + std::to_string(seq_cost_ns))
      .that(step_cost_ns >= 0 && step_cost_ns <= fdspec::kPolicyMaxNs,
            "step_cost_ns must be in [0, 2^32 - 1], got " + std::to_string(step_cost_ns));
  p.alpha = alpha;
  p.prior = prior;
  p.seq_cost_ns = seq_cost_ns;
  p.step_cost_ns = step_cost_ns;
  FDSPEC_RUN_ON_PLACE(kOp, seq_lens_this_time, p, fdspec::speculate_draft_length_policy_cpu,
                      fdspec::speculate_draft_length_policy_gpu);
}

PD_BUILD_OP(speculate_draft_length_policy)
    .Inputs({"accept_num", "draft_tokens", "draft_len", "draft_probe", "accept_ewma",
             "draft_opt_out", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder",
             "stop_flags", "cost_table"})
    .Attrs({"alpha: int", "prior: int", "seq_cost_ns: int64_t", "step_cost_ns: int64_t"})
        FDSPEC_INPLACE_OUTPUTS("draft_len", "draft_probe", "accept_ewma", "seq_lens_this_time")
    .SetKernelFn(PD_KERNEL(SpeculateDraftLengthPolicy));
