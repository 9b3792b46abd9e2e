// suffix_match: Paddle binding (docs/contract/suffix.md). Checks the tensors and attributes by
// name, resolves the threshold on the host, and dispatches on the place of token_ids_all.
#include <cmath>

#include "suffix_match/suffix_match_binding.h"

namespace {

constexpr const char* kOp = "suffix_match";
// The budget of ngram_match (docs/contract/ngram.md): the same variable and default.
constexpr const char* kThresholdEnv = "INFER_WITH_REFERENCE_TOKENUM_THRESHOLD";

}  // namespace

fdspec::SuffixMatchParams fdspec::binding::suffix_match_params(
    const char* op, const DraftInputs& in, paddle::Tensor& suffix_tokens,
    paddle::Tensor& suffix_probs, paddle::Tensor& suffix_meta, int max_tree_depth,
    float max_spec_factor, float max_spec_offset, float min_token_prob, int max_draft_tokens,
    bool pad_to_max, int64_t threshold) {
  const fdspec::binding::OpChecks c(op);
  fdspec::SuffixMatchParams p;
  fdspec::binding::check_draft_inputs(
      c, in, {FDSPEC_TENSORS(p, suffix_tokens, suffix_probs, suffix_meta)}, p);
  const int64_t K = in.draft_tokens.shape()[1] - 1;
  const std::string k_str = std::to_string(K);
  c.that(K >= 0 && K <= fdspec::kMaxSuffixSpecTokens,
         "draft_tokens must have 1 to " + std::to_string(fdspec::kMaxSuffixSpecTokens + 1) +
             " columns (K + 1), got " + fdspec::binding::shape_str(in.draft_tokens))
      .that(suffix_tokens.shape()[1] == K, "suffix_tokens must have K = " + k_str +
                                               " columns (draft_tokens has K + 1), got " +
                                               fdspec::binding::shape_str(suffix_tokens))
      .that(suffix_probs.shape()[1] == K, "suffix_probs must have K = " + k_str +
                                              " columns (draft_tokens has K + 1), got " +
                                              fdspec::binding::shape_str(suffix_probs))
      .that(suffix_meta.shape()[1] == 2,
            "suffix_meta must have 2 columns (draft length, match length), got " +
                fdspec::binding::shape_str(suffix_meta))
      .that(in.token_ids_all.shape()[1] < fdspec::kMaxSuffixHistory,
            "token_ids_all is wider than the supported maximum of 2^30 tokens")
      .that(max_tree_depth >= 1 && max_tree_depth <= fdspec::kMaxSuffixTreeDepth,
            "max_tree_depth must be in [1, " + std::to_string(fdspec::kMaxSuffixTreeDepth) +
                "], got " + std::to_string(max_tree_depth))
      .that(std::isfinite(max_spec_factor),
            "max_spec_factor must be finite, got " + std::to_string(max_spec_factor))
      .that(std::isfinite(max_spec_offset),
            "max_spec_offset must be finite, got " + std::to_string(max_spec_offset))
      .that(std::isfinite(min_token_prob),
            "min_token_prob must be finite, got " + std::to_string(min_token_prob))
      .that(max_draft_tokens >= 0 && max_draft_tokens <= K,
            "max_draft_tokens must be in [0, K = " + k_str + "], got " +
                std::to_string(max_draft_tokens));
  p.max_tree_depth = max_tree_depth;
  p.max_spec_factor = max_spec_factor;
  p.max_spec_offset = max_spec_offset;
  p.min_token_prob = min_token_prob;
  fdspec::binding::set_budget(c, p, max_draft_tokens, pad_to_max, threshold, kThresholdEnv,
                              fdspec::kNgramThresholdDefault);
  return p;
}

void SuffixMatch(const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
                 const paddle::Tensor& step_idx, const paddle::Tensor& draft_token_num,
                 paddle::Tensor& draft_tokens, paddle::Tensor& seq_lens_this_time,
                 const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
                 const paddle::Tensor& max_dec_len, paddle::Tensor& suffix_tokens,
                 paddle::Tensor& suffix_probs, paddle::Tensor& suffix_meta, int max_tree_depth,
                 float max_spec_factor, float max_spec_offset, float min_token_prob,
                 int max_draft_tokens, bool pad_to_max, int64_t threshold) {
  const fdspec::SuffixMatchParams p = fdspec::binding::suffix_match_params(
      kOp,
      {token_ids_all, prompt_lens, step_idx, draft_token_num, draft_tokens, seq_lens_this_time,
       seq_lens_encoder, seq_lens_decoder, max_dec_len},
      suffix_tokens, suffix_probs, suffix_meta, max_tree_depth, max_spec_factor, max_spec_offset,
      min_token_prob, max_draft_tokens, pad_to_max, threshold);
  FDSPEC_RUN_ON_PLACE(kOp, token_ids_all, p, fdspec::suffix_match_cpu, fdspec::suffix_match_gpu);
}

PD_BUILD_OP(suffix_match)
    .Inputs({"token_ids_all", "prompt_lens", "step_idx", "draft_token_num", "draft_tokens",
             "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "max_dec_len",
             "suffix_tokens", "suffix_probs", "suffix_meta"})
    .Attrs({"max_tree_depth: int", "max_spec_factor: float", "max_spec_offset: float",
            "min_token_prob: float", "max_draft_tokens: int", "pad_to_max: bool",
            "threshold: int64_t"})
        FDSPEC_INPLACE_OUTPUTS("draft_tokens", "seq_lens_this_time", "suffix_tokens",
                               "suffix_probs", "suffix_meta")
    .SetKernelFn(PD_KERNEL(SuffixMatch));
