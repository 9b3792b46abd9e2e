// speculate_logprobs_topk: Paddle binding (docs/contract/logprobs.md). The outputs are preallocated
// by the caller and written in place (so a runner can capture the op in a CUDA graph); dispatch on
// target_logits' place.
#include "binding/logits_binding.h"
#include "speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits.h"
#include "speculate_logprobs_topk/speculate_logprobs_topk.h"

namespace {

constexpr const char* kOp = "speculate_logprobs_topk";

fdspec::LogprobsTopkParams make_params(
    const paddle::Tensor& target_logits, const paddle::Tensor& token_ids,
    const paddle::Tensor& cu_batch_token_offset, paddle::Tensor& logprob_token_ids,
    paddle::Tensor& logprob_scores, paddle::Tensor& logprob_ranks,
    const paddle::optional<paddle::Tensor>& temperature, bool raw_logits) {
  namespace fb = fdspec::binding;
  const fb::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, target_logits, token_ids, cu_batch_token_offset, logprob_token_ids,
                       logprob_scores, logprob_ranks);
  if (temperature) c.defined("temperature", {*temperature});
  fb::check_logits_dtype(c, target_logits, "target_logits");
  FDSPEC_CHECK_DTYPE(c, INT64, token_ids, logprob_token_ids, logprob_ranks);
  FDSPEC_CHECK_DTYPE(c, INT32, cu_batch_token_offset);
  FDSPEC_CHECK_DTYPE(c, FLOAT32, logprob_scores);
  c.rank(target_logits, "target_logits", 2)
      .rank(cu_batch_token_offset, "cu_batch_token_offset", 1)
      .rank(logprob_token_ids, "logprob_token_ids", 2);
  const int64_t N = target_logits.shape()[0];
  const int64_t V = target_logits.shape()[1];
  const int64_t B = cu_batch_token_offset.shape()[0] - 1;
  c.note_batch(B, "cu_batch_token_offset minus one");
  const int64_t cols = logprob_token_ids.shape()[1];
  c.that(V >= 1 && V <= fdspec::kMaxVocab,
         "target_logits must have 1 .. 2^24 columns (the vocabulary), got shape " +
             fb::shape_str(target_logits))
      .that(B >= 0, "cu_batch_token_offset must have B + 1 >= 1 elements, got shape " +
                        fb::shape_str(cu_batch_token_offset))
      .per_slot(token_ids, "token_ids", N)
      .per_slot(logprob_ranks, "logprob_ranks", N)
      .that(logprob_token_ids.shape()[0] == N && cols >= 1 && cols <= fdspec::kMaxLogprobTopK + 1,
            "logprob_token_ids must have shape [N, k + 1] with N = " + std::to_string(N) +
                " (target_logits rows) and k <= " + std::to_string(fdspec::kMaxLogprobTopK) +
                ", got " + fb::shape_str(logprob_token_ids))
      .that(logprob_scores.shape() == logprob_token_ids.shape(),
            "logprob_scores must have the shape of logprob_token_ids " +
                fb::shape_str(logprob_token_ids) + ", got " + fb::shape_str(logprob_scores));
  c.same_place_as(target_logits, "target_logits",
                  {{"token_ids", token_ids},
                   {"cu_batch_token_offset", cu_batch_token_offset},
                   {"logprob_token_ids", logprob_token_ids},
                   {"logprob_scores", logprob_scores},
                   {"logprob_ranks", logprob_ranks}});

  fdspec::LogprobsTopkParams p;
  p.temperature =
      c.optional_per_slot<float>(temperature, "temperature", B, target_logits, "target_logits");
  fb::set_logits(p, target_logits);
  p.token_ids = token_ids.data<int64_t>();
  p.cu_batch_token_offset = cu_batch_token_offset.data<int32_t>();
  p.batch = B;
  p.logprob_token_ids = logprob_token_ids.data<int64_t>();
  p.logprob_scores = logprob_scores.data<float>();
  p.logprob_ranks = logprob_ranks.data<int64_t>();
  p.top_k = static_cast<int>(cols - 1);
  p.raw_logits = raw_logits;
  return p;
}

}  // namespace

void SpeculateLogprobsTopk(const paddle::Tensor& target_logits, const paddle::Tensor& token_ids,
                           const paddle::Tensor& cu_batch_token_offset,
                           paddle::Tensor& logprob_token_ids, paddle::Tensor& logprob_scores,
                           paddle::Tensor& logprob_ranks,
                           const paddle::optional<paddle::Tensor>& temperature, bool raw_logits) {
  const fdspec::LogprobsTopkParams p =
      make_params(target_logits, token_ids, cu_batch_token_offset, logprob_token_ids,
                  logprob_scores, logprob_ranks, temperature, raw_logits);
  FDSPEC_RUN_ON_PLACE(kOp, target_logits, p, fdspec::logprobs_topk_cpu, fdspec::logprobs_topk_gpu);
}

PD_BUILD_OP(speculate_logprobs_topk)
    .Inputs({"target_logits", "token_ids", "cu_batch_token_offset", "logprob_token_ids",
             "logprob_scores", "logprob_ranks", paddle::Optional("temperature")})
    .Attrs({"raw_logits: bool"})
    .Outputs({"logprob_token_ids_out", "logprob_scores_out", "logprob_ranks_out"})
    .SetInplaceMap({{"logprob_token_ids", "logprob_token_ids_out"},
                    {"logprob_scores", "logprob_scores_out"},
                    {"logprob_ranks", "logprob_ranks_out"}})
    .SetKernelFn(PD_KERNEL(SpeculateLogprobsTopk));
