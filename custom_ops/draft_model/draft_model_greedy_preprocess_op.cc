// draft_model_greedy_preprocess: Paddle binding. Checks the tensors by name and dispatches on the
// place of input_ids. Rule: draft_model.h; contract: docs/contract/draft_model.md.
#include "binding/tensor_rules.h"
#include "draft_model/draft_model.h"

constexpr const char* kOp = "draft_model_greedy_preprocess";

void DraftModelGreedyPreprocess(paddle::Tensor& input_ids, paddle::Tensor& seq_lens_decoder,
                                paddle::Tensor& step_idx, paddle::Tensor& pre_ids,
                                paddle::Tensor& mtp_draft_num, paddle::Tensor& max_dec_len,
                                paddle::Tensor& base_model_seq_lens_this_time,
                                const paddle::Tensor& base_model_seq_lens_encoder,
                                const paddle::Tensor& base_model_seq_lens_decoder,
                                const paddle::Tensor& base_model_stop_flags,
                                const paddle::Tensor& base_model_max_dec_len) {
  const fdspec::binding::OpChecks c(kOp);
  fdspec::DraftModelGreedyPreprocessParams p;
  p.batch = c.tensors(
      {FDSPEC_TENSORS(p, input_ids, seq_lens_decoder, step_idx, pre_ids, mtp_draft_num, max_dec_len,
                      base_model_seq_lens_this_time, base_model_seq_lens_encoder,
                      base_model_seq_lens_decoder, base_model_stop_flags, base_model_max_dec_len)},
      "base_model_seq_lens_this_time");
  p.pre_ids_stride = pre_ids.shape()[1];
  c.that(p.pre_ids_stride >= 1,
         "pre_ids must have at least one column, got shape " + fdspec::binding::shape_str(pre_ids));

  FDSPEC_RUN_ON_PLACE(kOp, input_ids, p, fdspec::draft_model_greedy_preprocess_cpu,
                      fdspec::draft_model_greedy_preprocess_gpu);
}

PD_BUILD_OP(draft_model_greedy_preprocess)
    .Inputs({"input_ids", "seq_lens_decoder", "step_idx", "pre_ids", "mtp_draft_num", "max_dec_len",
             "base_model_seq_lens_this_time", "base_model_seq_lens_encoder",
             "base_model_seq_lens_decoder", "base_model_stop_flags", "base_model_max_dec_len"})
        FDSPEC_INPLACE_OUTPUTS("input_ids", "seq_lens_decoder", "step_idx", "pre_ids",
                               "mtp_draft_num", "max_dec_len", "base_model_seq_lens_this_time")
    .SetKernelFn(PD_KERNEL(DraftModelGreedyPreprocess));
