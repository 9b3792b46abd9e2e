// speculate_sample_tokens: Paddle binding (docs/contract/sampling.md). The output is preallocated
// by the caller and written in place (a runner captures the op in a CUDA graph); dispatch on
// logits' place.
#include "binding/logits_binding.h"
#include "speculate_sample_tokens/speculate_sample_tokens.h"

namespace {

constexpr const char* kOp = "speculate_sample_tokens";

fdspec::SampleTokensParams make_params(const paddle::Tensor& logits,
                                       const paddle::Tensor& cu_seqlens_q_output,
                                       const paddle::Tensor& step_idx, const paddle::Tensor& seed,
                                       const paddle::Tensor& temperature,
                                       const paddle::Tensor& top_p, const paddle::Tensor& top_k,
                                       paddle::Tensor& sampled_tokens,
                                       const paddle::optional<paddle::Tensor>& min_p) {
  namespace fb = fdspec::binding;
  const fb::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, logits, cu_seqlens_q_output, step_idx, seed, temperature, top_p, top_k,
                       sampled_tokens);
  if (min_p) c.defined("min_p", {*min_p});
  fb::check_logits_dtype(c, logits, "logits");
  FDSPEC_CHECK_DTYPE(c, INT32, cu_seqlens_q_output);
  FDSPEC_CHECK_DTYPE(c, INT64, step_idx, seed, top_k, sampled_tokens);
  FDSPEC_CHECK_DTYPE(c, FLOAT32, temperature, top_p);
  c.rank(logits, "logits", 2).vector(cu_seqlens_q_output, "cu_seqlens_q_output");
  const int64_t N = logits.shape()[0];
  const int64_t V = logits.shape()[1];
  const int64_t B = cu_seqlens_q_output.numel() - 1;
  c.note_batch(B, "cu_seqlens_q_output minus one");
  c.that(V >= 1 && V <= fdspec::kMaxSampleVocab,
         "logits must have 1 .. 2^22 columns (the vocabulary), got shape " + fb::shape_str(logits))
      .that(B >= 0, "cu_seqlens_q_output must have B + 1 >= 1 elements, got shape " +
                        fb::shape_str(cu_seqlens_q_output))
      .per_slot(step_idx, "step_idx", B)
      .per_slot(seed, "seed", B)
      .per_slot(temperature, "temperature", B)
      .per_slot(top_p, "top_p", B)
      .per_slot(top_k, "top_k", B)
      .per_slot(sampled_tokens, "sampled_tokens", N);
  c.same_place_as(logits, "logits",
                  {{"cu_seqlens_q_output", cu_seqlens_q_output},
                   {"step_idx", step_idx},
                   {"seed", seed},
                   {"temperature", temperature},
                   {"top_p", top_p},
                   {"top_k", top_k},
                   {"sampled_tokens", sampled_tokens}});

  fdspec::SampleTokensParams p;
  p.min_p = c.optional_per_slot<float>(min_p, "min_p", B, logits, "logits");
  fb::set_logits(p, logits);
  p.cu_seqlens_q_output = cu_seqlens_q_output.data<int32_t>();
  p.batch = B;
  p.step_idx = step_idx.data<int64_t>();
  p.seed = seed.data<int64_t>();
  p.temperature = temperature.data<float>();
  p.top_p = top_p.data<float>();
  p.top_k = top_k.data<int64_t>();
  p.sampled_tokens = sampled_tokens.data<int64_t>();
  return p;
}

}  // namespace

void SpeculateSampleTokens(const paddle::Tensor& logits, const paddle::Tensor& cu_seqlens_q_output,
                           const paddle::Tensor& step_idx, const paddle::Tensor& seed,
                           const paddle::Tensor& temperature, const paddle::Tensor& top_p,
                           const paddle::Tensor& top_k, paddle::Tensor& sampled_tokens,
                           const paddle::optional<paddle::Tensor>& min_p) {
  const fdspec::SampleTokensParams p =
      make_params(logits, cu_seqlens_q_output, step_idx, seed, temperature, top_p, top_k,
                  sampled_tokens, min_p);
  FDSPEC_RUN_ON_PLACE(kOp, logits, p, fdspec::sample_tokens_cpu, fdspec::sample_tokens_gpu);
}

PD_BUILD_OP(speculate_sample_tokens)
    .Inputs({"logits", "cu_seqlens_q_output", "step_idx", "seed", "temperature", "top_p", "top_k",
             "sampled_tokens", paddle::Optional("min_p")})
    .Outputs({"sampled_tokens_out"})
    .SetInplaceMap({{"sampled_tokens", "sampled_tokens_out"}})
    .SetKernelFn(PD_KERNEL(SpeculateSampleTokens));
