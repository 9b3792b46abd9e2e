// speculate_verify_greedy: Paddle binding. Checks the tensors by name and dispatches on the place of
// target_tokens.
#include "binding/tensor_rules.h"
#include "speculate_verify_greedy/speculate_verify_greedy.h"

namespace {

constexpr const char* kOp = "speculate_verify_greedy";

}  // namespace

void SpeculateVerifyGreedy(const paddle::Tensor& target_tokens, paddle::Tensor& accept_tokens,
                           paddle::Tensor& accept_num, const paddle::Tensor& step_idx,
                           const paddle::Tensor& stop_flags, const paddle::Tensor& seq_lens_encoder,
                           const paddle::Tensor& seq_lens_decoder,
                           const paddle::Tensor& draft_tokens,
                           const paddle::Tensor& seq_lens_this_time,
                           const paddle::Tensor& max_dec_len, const paddle::Tensor& end_tokens) {
  const fdspec::binding::OpChecks c(kOp);
  fdspec::SpeculateVerifyGreedyParams p;
  p.batch = c.tensors(
      {FDSPEC_TENSORS(p, target_tokens, accept_tokens, accept_num, step_idx, stop_flags,
                      seq_lens_encoder, seq_lens_decoder, draft_tokens, seq_lens_this_time,
                      max_dec_len, end_tokens)},
      "seq_lens_this_time");
  p.width = draft_tokens.shape()[1];
  p.num_end_tokens = end_tokens.numel();
  c.that(p.width >= 1, "draft_tokens must have at least one column (K + 1)")
      .k1_columns(target_tokens, "target_tokens", "draft_tokens", p.width)
      .k1_columns(accept_tokens, "accept_tokens", "draft_tokens", p.width);

  FDSPEC_RUN_ON_PLACE(kOp, target_tokens, p, fdspec::speculate_verify_greedy_cpu,
                      fdspec::speculate_verify_greedy_gpu);
}

PD_BUILD_OP(speculate_verify_greedy)
    .Inputs({"target_tokens", "accept_tokens", "accept_num", "step_idx", "stop_flags",
             "seq_lens_encoder", "seq_lens_decoder", "draft_tokens", "seq_lens_this_time",
             "max_dec_len", "end_tokens"})
    FDSPEC_INPLACE_OUTPUTS("accept_tokens", "accept_num")
    .SetKernelFn(PD_KERNEL(SpeculateVerifyGreedy));
