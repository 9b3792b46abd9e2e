// hybrid_mtp_ngram: Paddle binding (docs/contract/ngram.md#hybrid_mtp_ngram). Checks the tensors by
// name, resolves the threshold on the host, and dispatches on the place of input_ids. Its first two
// inputs are named as upstream registers them (input_ids: the token rows that start with the
// prompt, input_ids_len: the prompt lengths); the kernel layer calls them token_ids_all and
// prompt_lens.
#include "binding/tensor_rules.h"
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"
#include "ngram_common/ngram_search.h"

namespace {

constexpr const char* kOp = "hybrid_mtp_ngram";
constexpr const char* kThresholdEnv = "SPEC_TOKENUM_THRESHOLD";

}  // namespace

void HybridMtpNgram(const paddle::Tensor& input_ids, const paddle::Tensor& input_ids_len,
                    const paddle::Tensor& pre_ids, const paddle::Tensor& step_idx,
                    const paddle::Tensor& draft_token_num, paddle::Tensor& draft_tokens,
                    paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_decoder,
                    const paddle::Tensor& max_dec_len, int max_ngram_size, int min_ngram_size,
                    int max_draft_tokens, bool pad_to_max, int64_t threshold) {
  namespace fb = fdspec::binding;
  using Rule = fb::OpChecks::Rule;
  const fb::OpChecks c(kOp);
  fdspec::HybridMtpNgramParams p;
  p.batch = c.tensors(
      {Rule{"input_ids", input_ids, paddle::DataType::INT64, fb::OpChecks::Dim::kRows,
            &p.token_ids_all},
       Rule{"input_ids_len", input_ids_len, paddle::DataType::INT64, fb::OpChecks::Dim::kPerSlot,
            &p.prompt_lens},
       FDSPEC_TENSORS(p, pre_ids, step_idx),
       fdspec::binding::rule::draft_token_num(draft_token_num),
       FDSPEC_TENSORS(p, draft_tokens, seq_lens_this_time, seq_lens_decoder, max_dec_len)},
      "seq_lens_this_time");
  const int64_t W = p.token_ids_stride = input_ids.shape()[1];
  const int64_t D = p.pre_ids_stride = pre_ids.shape()[1];
  p.draft_stride = draft_tokens.shape()[1];
  c.that(p.draft_stride >= 1, "draft_tokens must have at least one column (K + 1)")
      .that(W < fdspec::kMaxHaystackLen,
            "input_ids is wider than the supported maximum of 2^30 tokens")
      .that(D >= 1 && D < fdspec::kMaxHaystackLen,
            "pre_ids must have 1 to 2^30 - 1 columns, got shape " +
                fdspec::binding::shape_str(pre_ids))
      .that(max_ngram_size >= 1 && max_ngram_size <= fdspec::kMaxNgramSize,
            "max_ngram_size must be in [1, " + std::to_string(fdspec::kMaxNgramSize) + "], got " +
                std::to_string(max_ngram_size))
      .that(min_ngram_size >= 1 && min_ngram_size <= max_ngram_size,
            "min_ngram_size must be in [1, max_ngram_size = " + std::to_string(max_ngram_size) +
                "], got " + std::to_string(min_ngram_size));
  p.max_ngram_size = max_ngram_size;
  p.min_ngram_size = min_ngram_size;
  fdspec::binding::set_budget(c, p, max_draft_tokens, pad_to_max, threshold, kThresholdEnv,
                              fdspec::kHybridThresholdDefault);
  c.that(fdspec::hybrid_packing_fits(fdspec::hybrid_max_ori(p), W, D),
         "min(max_draft_tokens, K) * (input_ids width + pre_ids width) must be below 2^31 "
         "(the GPU path packs each slot's state into one int32)");
  FDSPEC_RUN_ON_PLACE(kOp, input_ids, p, fdspec::hybrid_mtp_ngram_cpu,
                      fdspec::hybrid_mtp_ngram_gpu);
}

PD_BUILD_OP(hybrid_mtp_ngram)
    .Inputs({"input_ids", "input_ids_len", "pre_ids", "step_idx", "draft_token_num", "draft_tokens",
             "seq_lens_this_time", "seq_lens_decoder", "max_dec_len"})
    .Attrs({"max_ngram_size: int", "min_ngram_size: int", "max_draft_tokens: int",
            "pad_to_max: bool", "threshold: int64_t"})
        FDSPEC_INPLACE_OUTPUTS("draft_tokens", "seq_lens_this_time")
    .SetKernelFn(PD_KERNEL(HybridMtpNgram));
