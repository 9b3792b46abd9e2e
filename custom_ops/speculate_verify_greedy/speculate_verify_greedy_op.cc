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
  namespace rule = fdspec::binding::rule;
  const int64_t B = c.tensors(
      {rule::target_tokens(target_tokens), rule::accept_tokens(accept_tokens),
       rule::accept_num(accept_num), rule::step_idx(step_idx), rule::stop_flags(stop_flags),
       rule::seq_lens_encoder(seq_lens_encoder), rule::seq_lens_decoder(seq_lens_decoder),
       rule::draft_tokens(draft_tokens), rule::seq_lens_this_time(seq_lens_this_time),
       rule::max_dec_len(max_dec_len), rule::end_tokens(end_tokens)},
      "seq_lens_this_time");
  const int64_t width = draft_tokens.shape()[1];
  c.that(width >= 1, "draft_tokens must have at least one column (K + 1)")
      .that(target_tokens.shape()[1] == width,
            "target_tokens must have as many columns as draft_tokens (K + 1 = " +
                std::to_string(width) + "), got shape " + fdspec::binding::shape_str(target_tokens))
      .that(accept_tokens.shape()[1] == width,
            "accept_tokens must have as many columns as draft_tokens (K + 1 = " +
                std::to_string(width) + "), got shape " + fdspec::binding::shape_str(accept_tokens));

  fdspec::SpeculateVerifyGreedyParams p;
  p.target_tokens = target_tokens.data<int64_t>();
  p.draft_tokens = draft_tokens.data<int64_t>();
  p.accept_tokens = accept_tokens.data<int64_t>();
  p.accept_num = accept_num.data<int32_t>();
  p.width = width;
  p.step_idx = step_idx.data<int64_t>();
  p.stop_flags = stop_flags.data<bool>();
  p.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  p.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  p.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  p.max_dec_len = max_dec_len.data<int64_t>();
  p.end_tokens = end_tokens.data<int64_t>();
  p.num_end_tokens = end_tokens.numel();
  p.batch = B;

  FDSPEC_RUN_ON_PLACE(kOp, target_tokens, p, fdspec::speculate_verify_greedy_cpu,
                      fdspec::speculate_verify_greedy_gpu);
}

PD_BUILD_OP(speculate_verify_greedy)
    .Inputs({"target_tokens", "accept_tokens", "accept_num", "step_idx", "stop_flags",
             "seq_lens_encoder", "seq_lens_decoder", "draft_tokens", "seq_lens_this_time",
             "max_dec_len", "end_tokens"})
    .Outputs({"accept_tokens_out", "accept_num_out"})
    .SetInplaceMap({{"accept_tokens", "accept_tokens_out"}, {"accept_num", "accept_num_out"}})
    .SetKernelFn(PD_KERNEL(SpeculateVerifyGreedy));
