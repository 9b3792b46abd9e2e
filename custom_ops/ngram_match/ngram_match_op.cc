// ngram_match: Paddle binding (docs/contract/ngram.md#ngram_match). Checks the tensors by name,
// resolves the threshold on the host, and dispatches on the place of token_ids_all.
#include "binding/draft_inputs.h"
#include "ngram_common/ngram_search.h"
#include "ngram_match/ngram_match.h"

namespace {

constexpr const char* kOp = "ngram_match";
constexpr const char* kThresholdEnv = "INFER_WITH_REFERENCE_TOKENUM_THRESHOLD";

fdspec::NgramMatchParams make_params(
    const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
    const paddle::Tensor& step_idx, const paddle::Tensor& draft_token_num,
    paddle::Tensor& draft_tokens, paddle::Tensor& seq_lens_this_time,
    const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
    const paddle::Tensor& max_dec_len, int max_ngram_size, int max_draft_tokens, bool pad_to_max,
    int64_t threshold) {
  const fdspec::binding::OpChecks c(kOp);
  fdspec::NgramMatchParams p;
  fdspec::binding::check_draft_inputs(
      c,
      {token_ids_all, prompt_lens, step_idx, draft_token_num, draft_tokens, seq_lens_this_time,
       seq_lens_encoder, seq_lens_decoder, max_dec_len},
      {}, p);
  c.that(draft_tokens.shape()[1] >= 1, "draft_tokens must have at least one column (K + 1)")
      .that(token_ids_all.shape()[1] < fdspec::kMaxHaystackLen,
            "token_ids_all is wider than the supported maximum of 2^30 tokens")
      .that(max_ngram_size >= 1 && max_ngram_size <= fdspec::kMaxNgramSize,
            "max_ngram_size must be in [1, " + std::to_string(fdspec::kMaxNgramSize) + "], got " +
                std::to_string(max_ngram_size));
  p.max_ngram_size = max_ngram_size;
  fdspec::binding::set_budget(c, p, max_draft_tokens, pad_to_max, threshold, kThresholdEnv,
                              fdspec::kNgramThresholdDefault);
  return p;
}

}  // namespace

void NgramMatch(const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
                const paddle::Tensor& step_idx, const paddle::Tensor& draft_token_num,
                paddle::Tensor& draft_tokens, paddle::Tensor& seq_lens_this_time,
                const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
                const paddle::Tensor& max_dec_len, int max_ngram_size, int max_draft_tokens,
                bool pad_to_max, int64_t threshold) {
  // max_draft_tokens only sets graph mode's pad length: the draft cap is per slot
  // (draft_token_num).
  const fdspec::NgramMatchParams p =
      make_params(token_ids_all, prompt_lens, step_idx, draft_token_num, draft_tokens,
                  seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, max_dec_len,
                  max_ngram_size, max_draft_tokens, pad_to_max, threshold);
  FDSPEC_RUN_ON_PLACE(kOp, token_ids_all, p, fdspec::ngram_match_cpu, fdspec::ngram_match_gpu);
}

PD_BUILD_OP(ngram_match)
    .Inputs({"token_ids_all", "prompt_lens", "step_idx", "draft_token_num", "draft_tokens",
             "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "max_dec_len"})
    .Attrs({"max_ngram_size: int", "max_draft_tokens: int", "pad_to_max: bool",
            "threshold: int64_t"})
    .Outputs({"draft_tokens_out", "seq_lens_this_time_out"})
    .SetInplaceMap({{"draft_tokens", "draft_tokens_out"},
                    {"seq_lens_this_time", "seq_lens_this_time_out"}})
    .SetKernelFn(PD_KERNEL(NgramMatch));
