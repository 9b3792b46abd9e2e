// speculate_step_update: Paddle binding. Checks the tensors by name and dispatches on the place of
// accept_tokens.
#include "binding/tensor_rules.h"
#include "speculate_step_update/speculate_step_update.h"

namespace {

constexpr const char* kOp = "speculate_step_update";

}  // namespace

void SpeculateStepUpdate(const paddle::Tensor& accept_tokens, const paddle::Tensor& accept_num,
                         paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
                         paddle::Tensor& step_idx, const paddle::Tensor& max_dec_len,
                         const paddle::Tensor& end_tokens, paddle::Tensor& stop_flags,
                         paddle::Tensor& seq_lens_this_time, paddle::Tensor& seq_lens_encoder,
                         paddle::Tensor& seq_lens_decoder, paddle::Tensor& draft_tokens) {
  const fdspec::binding::OpChecks c(kOp);
  namespace rule = fdspec::binding::rule;
  const int64_t B = c.tensors(
      {rule::accept_tokens(accept_tokens), rule::accept_num(accept_num),
       rule::token_ids_all(token_ids_all), rule::prompt_lens(prompt_lens), rule::step_idx(step_idx),
       rule::max_dec_len(max_dec_len), rule::end_tokens(end_tokens), rule::stop_flags(stop_flags),
       rule::seq_lens_this_time(seq_lens_this_time), rule::seq_lens_encoder(seq_lens_encoder),
       rule::seq_lens_decoder(seq_lens_decoder), rule::draft_tokens(draft_tokens)},
      "seq_lens_this_time");
  const int64_t width = accept_tokens.shape()[1];
  c.that(width >= 1, "accept_tokens must have at least one column (K + 1)")
      .that(draft_tokens.shape()[1] == width,
            "draft_tokens must have as many columns as accept_tokens (K + 1 = " +
                std::to_string(width) + "), got shape " + fdspec::binding::shape_str(draft_tokens));

  fdspec::SpeculateStepUpdateParams p;
  p.accept_tokens = accept_tokens.data<int64_t>();
  p.accept_num = accept_num.data<int32_t>();
  p.width = width;
  p.token_ids_all = token_ids_all.data<int64_t>();
  p.token_ids_stride = token_ids_all.shape()[1];
  p.prompt_lens = prompt_lens.data<int64_t>();
  p.step_idx = step_idx.data<int64_t>();
  p.max_dec_len = max_dec_len.data<int64_t>();
  p.end_tokens = end_tokens.data<int64_t>();
  p.num_end_tokens = end_tokens.numel();
  p.stop_flags = stop_flags.data<bool>();
  p.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  p.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  p.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  p.draft_tokens = draft_tokens.data<int64_t>();
  p.batch = B;

  FDSPEC_RUN_ON_PLACE(kOp, accept_tokens, p, fdspec::speculate_step_update_cpu,
                      fdspec::speculate_step_update_gpu);
}

PD_BUILD_OP(speculate_step_update)
    .Inputs({"accept_tokens", "accept_num", "token_ids_all", "prompt_lens", "step_idx",
             "max_dec_len", "end_tokens", "stop_flags", "seq_lens_this_time", "seq_lens_encoder",
             "seq_lens_decoder", "draft_tokens"})
    .Outputs({"token_ids_all_out", "step_idx_out", "stop_flags_out", "seq_lens_this_time_out",
              "seq_lens_encoder_out", "seq_lens_decoder_out", "draft_tokens_out"})
    .SetInplaceMap({{"token_ids_all", "token_ids_all_out"},
                    {"step_idx", "step_idx_out"},
                    {"stop_flags", "stop_flags_out"},
                    {"seq_lens_this_time", "seq_lens_this_time_out"},
                    {"seq_lens_encoder", "seq_lens_encoder_out"},
                    {"seq_lens_decoder", "seq_lens_decoder_out"},
                    {"draft_tokens", "draft_tokens_out"}})
    .SetKernelFn(PD_KERNEL(SpeculateStepUpdate));
