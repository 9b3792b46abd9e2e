// draft_model_update: Paddle binding. Checks the tensors by name and dispatches on the place of
// logits. Rule: draft_model.h; contract: docs/contract/draft_model.md.
#include <climits>

#include "binding/logits_binding.h"
#include "binding/tensor_rules.h"
#include "draft_model/draft_model.h"

namespace {

constexpr const char* kOp = "draft_model_update";

}  // namespace

void DraftModelUpdate(const paddle::Tensor& logits, paddle::Tensor& input_ids,
                      paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx,
                      paddle::Tensor& pre_ids, paddle::Tensor& mtp_draft_num,
                      paddle::Tensor& base_model_draft_tokens,
                      paddle::Tensor& base_model_seq_lens_this_time, int substep) {
  namespace fb = fdspec::binding;
  const fb::OpChecks c(kOp);
  namespace rule = fdspec::binding::rule;
  const int64_t B = c.tensors(
      {rule::logits(logits), rule::input_ids(input_ids), rule::seq_lens_decoder(seq_lens_decoder),
       rule::step_idx(step_idx), rule::pre_ids(pre_ids), rule::mtp_draft_num(mtp_draft_num),
       rule::base_model_draft_tokens(base_model_draft_tokens),
       rule::base_model_seq_lens_this_time(base_model_seq_lens_this_time)},
      "base_model_seq_lens_this_time");
  fb::check_logits_dtype(c, logits, "logits");
  const int64_t V = logits.shape()[1];
  const int64_t width = base_model_draft_tokens.shape()[1];
  c.that(V >= 1 && V <= INT32_MAX, "logits must have 1 .. 2^31 - 1 columns (the vocabulary), got shape " +
                                       fb::shape_str(logits))
      .that(pre_ids.shape()[1] >= 1,
            "pre_ids must have at least one column, got shape " + fb::shape_str(pre_ids))
      .that(substep >= 0 && int64_t{substep} + 2 <= width,
            "substep must be in [0, K - 1] (base_model_draft_tokens has K + 1 = " +
                std::to_string(width) + " columns), got " + std::to_string(substep));

  fdspec::DraftModelUpdateParams p;
  p.logits = fb::logits_data(logits);
  p.logits_dtype = fb::logits_dtype(logits);
  p.vocab_size = V;
  p.input_ids = input_ids.data<int64_t>();
  p.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  p.step_idx = step_idx.data<int64_t>();
  p.pre_ids = pre_ids.data<int64_t>();
  p.pre_ids_stride = pre_ids.shape()[1];
  p.mtp_draft_num = mtp_draft_num.data<int32_t>();
  p.base_model_draft_tokens = base_model_draft_tokens.data<int64_t>();
  p.draft_stride = width;
  p.base_model_seq_lens_this_time = base_model_seq_lens_this_time.data<int32_t>();
  p.substep = substep;
  p.batch = B;

  FDSPEC_RUN_ON_PLACE(kOp, logits, p, fdspec::draft_model_update_cpu, fdspec::draft_model_update_gpu);
}

PD_BUILD_OP(draft_model_update)
    .Inputs({"logits", "input_ids", "seq_lens_decoder", "step_idx", "pre_ids", "mtp_draft_num",
             "base_model_draft_tokens", "base_model_seq_lens_this_time"})
    .Attrs({"substep: int"})
    .Outputs({"input_ids_out", "seq_lens_decoder_out", "step_idx_out", "pre_ids_out",
              "mtp_draft_num_out", "base_model_draft_tokens_out", "base_model_seq_lens_this_time_out"})
    .SetInplaceMap({{"input_ids", "input_ids_out"},
                    {"seq_lens_decoder", "seq_lens_decoder_out"},
                    {"step_idx", "step_idx_out"},
                    {"pre_ids", "pre_ids_out"},
                    {"mtp_draft_num", "mtp_draft_num_out"},
                    {"base_model_draft_tokens", "base_model_draft_tokens_out"},
                    {"base_model_seq_lens_this_time", "base_model_seq_lens_this_time_out"}})
    .SetKernelFn(PD_KERNEL(DraftModelUpdate));
