// eagle_get_hidden_states and eagle_get_self_hidden_states (FastDeploy's contracts): Paddle
// bindings. Check the tensors by name, allocate the two outputs on the place of `input` (as
// upstream does) and dispatch. Rule: mtp_state.h; contract: docs/contract/mtp_state.md.
#include <vector>

#include "mtp_state/mtp_state.h"
#include "mtp_state/mtp_state_binding.h"

namespace {

namespace fb = fdspec::binding;

// input: [N, H] float16, bfloat16 or float32 (copied bit for bit, so any of them).
void check_hidden_input(const fb::OpChecks& c, const paddle::Tensor& input) {
  c.rank(input, "input", 2);
  const auto d = input.dtype();
  c.that(d == paddle::DataType::FLOAT16 || d == paddle::DataType::BFLOAT16 ||
             d == paddle::DataType::FLOAT32,
         std::string("input must be float16, bfloat16 or float32, got ") + fb::dtype_str(d));
}

std::vector<paddle::Tensor> run_gather(const char* op, const paddle::Tensor& input,
                                       fdspec::HiddenGatherParams& p) {
  const int64_t rows = input.shape()[0], cols = input.shape()[1];
  paddle::Tensor out = fb::new_output({rows, cols}, input.dtype(), input.place());
  paddle::Tensor count = fb::new_output({1}, paddle::DataType::INT32, input.place());
  p.input = input.data();
  p.out = out.data();
  p.output_token_num = count.data<int32_t>();
  p.rows = rows;
  p.row_bytes =
      cols *
      (input.dtype() == paddle::DataType::FLOAT32 ? 4 : 2);  // checked: float32 or a 2-byte float
  FDSPEC_RUN_ON_PLACE(op, input, p, fdspec::hidden_gather_cpu, fdspec::hidden_gather_gpu);
  return {out, count};
}

}  // namespace

std::vector<paddle::Tensor> EagleGetHiddenStates(
    const paddle::Tensor& input, const paddle::Tensor& seq_lens_this_time,
    const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
    const paddle::Tensor& stop_flags, const paddle::Tensor& accept_nums,
    const paddle::Tensor& base_model_seq_lens_this_time,
    const paddle::Tensor& base_model_seq_lens_encoder, int actual_draft_token_num) {
  constexpr const char* kOp = "eagle_get_hidden_states";
  const fb::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, input);
  fdspec::HiddenGatherParams p{};
  p.kind = fdspec::HiddenGather::kTarget;
  // seq_lens_decoder, stop_flags and base_model_seq_lens_encoder: upstream's inputs, read by
  // neither kernel; their shapes are checked, any dtype is accepted (upstream's own test passes
  // int32 flags).
  const auto unused = [](const char* name, const paddle::Tensor& t) {
    return fb::OpChecks::Rule{name, t, paddle::DataType::UNDEFINED, fb::OpChecks::Dim::kPerSlot};
  };
  p.batch =
      c.tensors({FDSPEC_TENSORS(p, seq_lens_this_time, seq_lens_encoder),
                 unused("seq_lens_decoder", seq_lens_decoder), unused("stop_flags", stop_flags),
                 FDSPEC_TENSORS(p, accept_nums, base_model_seq_lens_this_time),
                 unused("base_model_seq_lens_encoder", base_model_seq_lens_encoder)},
                "seq_lens_this_time");
  check_hidden_input(c, input);
  c.same_place(seq_lens_this_time, "seq_lens_this_time", input, "input");
  (void)actual_draft_token_num;  // upstream's attribute, unused by its kernel as by ours
  return run_gather(kOp, input, p);
}

std::vector<paddle::Tensor> EagleGetSelfHiddenStates(const paddle::Tensor& input,
                                                     const paddle::Tensor& last_seq_lens_this_time,
                                                     const paddle::Tensor& seq_lens_this_time,
                                                     const paddle::Tensor& seq_lens_encoder) {
  constexpr const char* kOp = "eagle_get_self_hidden_states";
  const fb::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, input);
  fdspec::HiddenGatherParams p{};
  p.kind = fdspec::HiddenGather::kSelf;
  p.batch =
      c.tensors({FDSPEC_TENSORS(p, last_seq_lens_this_time, seq_lens_this_time, seq_lens_encoder)},
                "seq_lens_this_time");
  check_hidden_input(c, input);
  c.same_place(seq_lens_this_time, "seq_lens_this_time", input, "input");
  return run_gather(kOp, input, p);
}

PD_BUILD_OP(eagle_get_hidden_states)
    .Inputs({"input", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "stop_flags",
             "accept_nums", "base_model_seq_lens_this_time", "base_model_seq_lens_encoder"})
    .Attrs({"actual_draft_token_num: int"})
    .Outputs({"out", "output_token_num"})
    .SetKernelFn(PD_KERNEL(EagleGetHiddenStates));

PD_BUILD_OP(eagle_get_self_hidden_states)
    .Inputs({"input", "last_seq_lens_this_time", "seq_lens_this_time", "seq_lens_encoder"})
    .Outputs({"out", "output_token_num"})
    .SetKernelFn(PD_KERNEL(EagleGetSelfHiddenStates));
