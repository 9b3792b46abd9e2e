// draft_model_preprocess: Paddle binding. Checks the tensors by name and dispatches on the place of
// input_ids. Rule: draft_model.h; contract: docs/contract/draft_model.md.
#include "binding/tensor_rules.h"
#include "draft_model/draft_model.h"

namespace {

constexpr const char* kOp = "draft_model_preprocess";

}  // namespace

void DraftModelPreprocess(paddle::Tensor& input_ids, paddle::Tensor& seq_lens_decoder,
                          paddle::Tensor& step_idx, paddle::Tensor& pre_ids,
                          paddle::Tensor& mtp_draft_num, paddle::Tensor& max_dec_len,
                          paddle::Tensor& base_model_seq_lens_this_time,
                          const paddle::Tensor& base_model_seq_lens_encoder,
                          const paddle::Tensor& base_model_seq_lens_decoder,
                          const paddle::Tensor& base_model_stop_flags,
                          const paddle::Tensor& base_model_max_dec_len) {
  const fdspec::binding::OpChecks c(kOp);
  namespace rule = fdspec::binding::rule;
  const int64_t B = c.tensors(
      {rule::input_ids(input_ids), rule::seq_lens_decoder(seq_lens_decoder),
       rule::step_idx(step_idx), rule::pre_ids(pre_ids), rule::mtp_draft_num(mtp_draft_num),
       rule::max_dec_len(max_dec_len),
       rule::base_model_seq_lens_this_time(base_model_seq_lens_this_time),
       rule::base_model_seq_lens_encoder(base_model_seq_lens_encoder),
       rule::base_model_seq_lens_decoder(base_model_seq_lens_decoder),
       rule::base_model_stop_flags(base_model_stop_flags),
       rule::base_model_max_dec_len(base_model_max_dec_len)},
      "base_model_seq_lens_this_time");
  c.that(pre_ids.shape()[1] >= 1, "pre_ids must have at least one column, got shape " +
                                      fdspec::binding::shape_str(pre_ids));

  fdspec::DraftModelPreprocessParams p;
  p.input_ids = input_ids.data<int64_t>();
  p.seq_lens_decoder = seq_lens_decoder.data<int32_t>();
  p.step_idx = step_idx.data<int64_t>();
  p.pre_ids = pre_ids.data<int64_t>();
  p.pre_ids_stride = pre_ids.shape()[1];
  p.mtp_draft_num = mtp_draft_num.data<int32_t>();
  p.max_dec_len = max_dec_len.data<int64_t>();
  p.base_model_seq_lens_this_time = base_model_seq_lens_this_time.data<int32_t>();
  p.base_model_seq_lens_encoder = base_model_seq_lens_encoder.data<int32_t>();
  p.base_model_seq_lens_decoder = base_model_seq_lens_decoder.data<int32_t>();
  p.base_model_stop_flags = base_model_stop_flags.data<bool>();
  p.base_model_max_dec_len = base_model_max_dec_len.data<int64_t>();
  p.batch = B;

  FDSPEC_RUN_ON_PLACE(kOp, input_ids, p, fdspec::draft_model_preprocess_cpu,
                      fdspec::draft_model_preprocess_gpu);
}

PD_BUILD_OP(draft_model_preprocess)
    .Inputs({"input_ids", "seq_lens_decoder", "step_idx", "pre_ids", "mtp_draft_num", "max_dec_len",
             "base_model_seq_lens_this_time", "base_model_seq_lens_encoder",
             "base_model_seq_lens_decoder", "base_model_stop_flags", "base_model_max_dec_len"})
    .Outputs({"input_ids_out", "seq_lens_decoder_out", "step_idx_out", "pre_ids_out",
              "mtp_draft_num_out", "max_dec_len_out", "base_model_seq_lens_this_time_out"})
    .SetInplaceMap({{"input_ids", "input_ids_out"},
                    {"seq_lens_decoder", "seq_lens_decoder_out"},
                    {"step_idx", "step_idx_out"},
                    {"pre_ids", "pre_ids_out"},
                    {"mtp_draft_num", "mtp_draft_num_out"},
                    {"max_dec_len", "max_dec_len_out"},
                    {"base_model_seq_lens_this_time", "base_model_seq_lens_this_time_out"}})
    .SetKernelFn(PD_KERNEL(DraftModelPreprocess));
