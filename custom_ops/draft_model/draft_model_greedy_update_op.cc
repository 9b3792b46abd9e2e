// draft_model_greedy_update: Paddle binding. Checks the tensors by name and dispatches on the place
// of logits. Rule: draft_model.h; contract: docs/contract/draft_model.md.
#include <climits>

#include "binding/logits_binding.h"
#include "binding/tensor_rules.h"
#include "draft_model/draft_model.h"

constexpr const char* kOp = "draft_model_greedy_update";

void DraftModelGreedyUpdate(const paddle::Tensor& logits, paddle::Tensor& input_ids,
                            paddle::Tensor& seq_lens_decoder, paddle::Tensor& step_idx,
                            paddle::Tensor& pre_ids, paddle::Tensor& mtp_draft_num,
                            paddle::Tensor& base_model_draft_tokens,
                            paddle::Tensor& base_model_seq_lens_this_time, int substep) {
  namespace fb = fdspec::binding;
  const fb::OpChecks c(kOp);
  fdspec::DraftModelGreedyUpdateParams p;
  p.batch =
      c.tensors({fb::rule::logits(logits),
                 FDSPEC_TENSORS(p, input_ids, seq_lens_decoder, step_idx, pre_ids, mtp_draft_num,
                                base_model_draft_tokens, base_model_seq_lens_this_time)},
                "base_model_seq_lens_this_time");
  fb::check_logits_dtype(c, logits, "logits");
  p.logits = fb::logits_data(logits);
  p.logits_dtype = fb::logits_dtype(logits);
  p.vocab_size = logits.shape()[1];
  p.pre_ids_stride = pre_ids.shape()[1];
  p.draft_stride = base_model_draft_tokens.shape()[1];
  p.substep = substep;
  c.that(p.vocab_size >= 1 && p.vocab_size <= INT32_MAX,
         "logits must have 1 .. 2^31 - 1 columns (the vocabulary), got shape " +
             fb::shape_str(logits))
      .that(p.pre_ids_stride >= 1,
            "pre_ids must have at least one column, got shape " + fb::shape_str(pre_ids))
      .that(substep >= 0 && int64_t{substep} + 2 <= p.draft_stride,
            "substep must be in [0, K - 1] (base_model_draft_tokens has K + 1 = " +
                std::to_string(p.draft_stride) + " columns), got " + std::to_string(substep));

  FDSPEC_RUN_ON_PLACE(kOp, logits, p, fdspec::draft_model_greedy_update_cpu,
                      fdspec::draft_model_greedy_update_gpu);
}

PD_BUILD_OP(draft_model_greedy_update)
    .Inputs({"logits", "input_ids", "seq_lens_decoder", "step_idx", "pre_ids", "mtp_draft_num",
             "base_model_draft_tokens", "base_model_seq_lens_this_time"})
    .Attrs({"substep: int"})
        FDSPEC_INPLACE_OUTPUTS("input_ids", "seq_lens_decoder", "step_idx", "pre_ids",
                               "mtp_draft_num", "base_model_draft_tokens",
                               "base_model_seq_lens_this_time")
    .SetKernelFn(PD_KERNEL(DraftModelGreedyUpdate));
