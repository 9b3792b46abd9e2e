// speculate_verify_greedy: Paddle binding. Checks the tensors by name and dispatches on the place of
// target_tokens.
#include "binding/binding_utils.h"
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
  using paddle::DataType;
  const fdspec::binding::OpChecks c(kOp);
  using Dim = fdspec::binding::OpChecks::Dim;
  const int64_t B = c.tensors(
      {{"target_tokens", target_tokens, DataType::INT64, Dim::kRows},
       {"accept_tokens", accept_tokens, DataType::INT64, Dim::kRows},
       {"accept_num", accept_num, DataType::INT32, Dim::kPerSlot},
       {"step_idx", step_idx, DataType::INT64, Dim::kPerSlot},
       {"stop_flags", stop_flags, DataType::BOOL, Dim::kPerSlot},
       {"seq_lens_encoder", seq_lens_encoder, DataType::INT32, Dim::kPerSlot},
       {"seq_lens_decoder", seq_lens_decoder, DataType::INT32, Dim::kPerSlot},
       {"draft_tokens", draft_tokens, DataType::INT64, Dim::kRows},
       {"seq_lens_this_time", seq_lens_this_time, DataType::INT32, Dim::kPerSlot},
       {"max_dec_len", max_dec_len, DataType::INT64, Dim::kPerSlot},
       {"end_tokens", end_tokens, DataType::INT64, Dim::kRank1}},
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
