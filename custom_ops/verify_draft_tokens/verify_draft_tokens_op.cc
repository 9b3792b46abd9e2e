// verify_draft_tokens: Paddle binding. Checks the tensors by name and dispatches on the place of
// step_output_ids. FastDeploy's 17 tensors and five attributes, in its order; max_dec_len and
// step_idx may be None (its earlier 15-tensor form, passed so by the Python wrapper), and a
// trailing optional `seeds` gives the slots' Philox keys (docs/design/randomness.md).
#include "binding/tensor_rules.h"
#include "verify_draft_tokens/verify_draft_tokens.h"

namespace {

constexpr const char* kOp = "verify_draft_tokens";

using fdspec::binding::OpChecks;

}  // namespace

// FastDeploy's 17 tensors and five attributes in its order: the parameters of both registrations
// (clang-format would lay the list out as an expression).
// clang-format off
#define FDSPEC_VERIFY_DRAFT_TOKENS_TENSOR_PARAMS                                                 \
  paddle::Tensor& step_output_ids, paddle::Tensor& step_output_len,                              \
  const paddle::Tensor& step_input_ids, const paddle::optional<paddle::Tensor>& target_tokens,   \
  const paddle::optional<paddle::Tensor>& candidate_ids,                                         \
  const paddle::optional<paddle::Tensor>& candidate_scores,                                      \
  const paddle::optional<paddle::Tensor>& candidate_lens, const paddle::Tensor& topp,            \
  const paddle::Tensor& stop_flags, const paddle::Tensor& seq_lens_encoder,                      \
  const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& end_tokens,                    \
  const paddle::Tensor& is_block_step, const paddle::Tensor& cu_seqlens_q_output,                \
  const paddle::Tensor& reasoning_status, const paddle::optional<paddle::Tensor>& max_dec_len,   \
  const paddle::optional<paddle::Tensor>& step_idx
// clang-format on
#define FDSPEC_VERIFY_DRAFT_TOKENS_ATTR_PARAMS \
  int max_seq_len, int verify_window, int verify_strategy, bool reject_all, bool accept_all

void VerifyDraftTokens(FDSPEC_VERIFY_DRAFT_TOKENS_TENSOR_PARAMS,
                       const paddle::optional<paddle::Tensor>& seeds,
                       FDSPEC_VERIFY_DRAFT_TOKENS_ATTR_PARAMS) {
  namespace rule = fdspec::binding::rule;
  const OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, seq_lens_this_time, end_tokens, cu_seqlens_q_output);
  fdspec::VerifyDraftTokensParams p{};
  std::vector<OpChecks::Rule> table{
      FDSPEC_TENSORS(p, step_output_ids, step_output_len, step_input_ids, topp, stop_flags,
                     seq_lens_encoder, is_block_step, reasoning_status)};
  c.that(
      max_dec_len.is_initialized() == step_idx.is_initialized(),
      "max_dec_len and step_idx are given together (17-tensor form) or both None (15-tensor form)");
  if (max_dec_len) table.push_back(rule::max_dec_len(*max_dec_len, &p.max_dec_len));
  if (step_idx) table.push_back(rule::step_idx(*step_idx, &p.step_idx));
  if (seeds) table.push_back(rule::seeds(*seeds, &p.seeds));
  p.rows = c.tensors(table, "step_output_len");
  p.width = step_input_ids.shape()[1];
  c.that(p.width >= 1, "step_input_ids must have at least one column")
      .k1_columns(step_output_ids, "step_output_ids", "step_input_ids", p.width);

  // A packed per-token tensor: [T] or [T, 1] of `dtype`, on the place of step_output_ids; returns
  // T.
  const auto packed_vector = [&](const paddle::Tensor& t, const char* name,
                                 paddle::DataType dtype) {
    return c.vector_on(t, name, dtype, step_output_ids, "step_output_ids");
  };
  p.batch = fdspec::binding::seq_lens_batch(c, seq_lens_this_time, step_output_ids,
                                            "step_output_ids", p.rows, "rows of step_output_len");
  c.that(
      packed_vector(cu_seqlens_q_output, "cu_seqlens_q_output", paddle::DataType::INT32) >= p.batch,
      "cu_seqlens_q_output must have at least one entry per slot of seq_lens_this_time (" +
          std::to_string(p.batch) + "), got " + std::to_string(cu_seqlens_q_output.numel()));
  p.num_end_tokens = packed_vector(end_tokens, "end_tokens", paddle::DataType::INT64);
  p.end_tokens = end_tokens.data<int64_t>();
  p.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  p.cu_seqlens_q_output = cu_seqlens_q_output.data<int32_t>();

  c.that(verify_strategy >= 0 && verify_strategy <= 2,
         "verify_strategy must be 0 (TOPP), 1 (GREEDY) or 2 (TARGET_MATCH), got " +
             std::to_string(verify_strategy));
  p.strategy = static_cast<fdspec::VerifyStrategy>(verify_strategy);
  p.reject_all = reject_all;
  p.accept_all = accept_all;
  (void)max_seq_len;    // upstream passes it; no rule of the newest kernel reads it
  (void)verify_window;  // the TOPP window fallback is gone from upstream's newest GPU kernel
  // Every tensor given is checked, whichever strategy reads it. A strategy's tensors that are
  // missing leave T = 0 (every row emits nothing): Paddle hands an empty optional tensor over as
  // absent, and an empty batch may come so (upstream's empty_input_forward). The Python wrapper
  // refuses a None where the strategy needs a tensor.
  int64_t target_rows = 0, candidate_rows = 0;
  if (target_tokens) {
    target_rows = packed_vector(*target_tokens, "target_tokens", paddle::DataType::INT64);
  }
  if (candidate_ids || candidate_scores || candidate_lens) {
    c.that(candidate_ids && candidate_scores && candidate_lens,
           "candidate_ids, candidate_scores and candidate_lens are given together");
    c.dtype(*candidate_ids, "candidate_ids", paddle::DataType::INT64)
        .rank(*candidate_ids, "candidate_ids", 2)
        .same_place(step_output_ids, "step_output_ids", *candidate_ids, "candidate_ids")
        .dtype(*candidate_scores, "candidate_scores", paddle::DataType::FLOAT32)
        .same_place(step_output_ids, "step_output_ids", *candidate_scores, "candidate_scores");
    candidate_rows = candidate_ids->shape()[0];
    c.that(candidate_ids->shape()[1] >= 1, "candidate_ids must have at least one column")
        .that(candidate_scores->shape() == candidate_ids->shape(),
              "candidate_scores must have the shape of candidate_ids " +
                  fdspec::binding::shape_str(*candidate_ids) + ", got " +
                  fdspec::binding::shape_str(*candidate_scores))
        .that(packed_vector(*candidate_lens, "candidate_lens", paddle::DataType::INT32) ==
                  candidate_rows,
              "candidate_lens must have one entry per row of candidate_ids (" +
                  std::to_string(candidate_rows) + "), got " +
                  fdspec::binding::shape_str(*candidate_lens));
  }
  p.num_candidates = 1;
  if (p.strategy == fdspec::VerifyStrategy::kTopp) {
    c.that(
        p.rows == 0 || step_idx.is_initialized(),
        "verify_strategy TOPP (0) needs step_idx (its draw is counted by output position): use the "
        "17-tensor form");
    if (candidate_ids) {
      p.token_rows = candidate_rows;
      p.num_candidates = candidate_ids->shape()[1];
      p.candidate_ids = candidate_ids->data<int64_t>();
      p.candidate_scores = candidate_scores->data<float>();
      p.candidate_lens = candidate_lens->data<int32_t>();
    }
  } else if (target_tokens) {
    p.token_rows = target_rows;
    p.target_tokens = target_tokens->data<int64_t>();
  }
  if (p.rows == 0) return;

  FDSPEC_RUN_ON_PLACE(kOp, step_output_ids, p, fdspec::verify_draft_tokens_cpu,
                      fdspec::verify_draft_tokens_gpu);
}

// FastDeploy's registration: its 17 inputs, the Philox key of slot b is b.
void VerifyDraftTokensUnseeded(FDSPEC_VERIFY_DRAFT_TOKENS_TENSOR_PARAMS,
                               FDSPEC_VERIFY_DRAFT_TOKENS_ATTR_PARAMS) {
  VerifyDraftTokens(step_output_ids, step_output_len, step_input_ids, target_tokens, candidate_ids,
                    candidate_scores, candidate_lens, topp, stop_flags, seq_lens_encoder,
                    seq_lens_this_time, end_tokens, is_block_step, cu_seqlens_q_output,
                    reasoning_status, max_dec_len, step_idx, paddle::none, max_seq_len,
                    verify_window, verify_strategy, reject_all, accept_all);
}

#define FDSPEC_VERIFY_DRAFT_TOKENS_INPUTS                                                    \
  "step_output_ids", "step_output_len", "step_input_ids", paddle::Optional("target_tokens"), \
      paddle::Optional("candidate_ids"), paddle::Optional("candidate_scores"),               \
      paddle::Optional("candidate_lens"), "topp", "stop_flags", "seq_lens_encoder",          \
      "seq_lens_this_time", "end_tokens", "is_block_step", "cu_seqlens_q_output",            \
      "reasoning_status", paddle::Optional("max_dec_len"), paddle::Optional("step_idx")
#define FDSPEC_VERIFY_DRAFT_TOKENS_ATTRS                                                \
  "max_seq_len: int", "verify_window: int", "verify_strategy: int", "reject_all: bool", \
      "accept_all: bool"

PD_BUILD_OP(verify_draft_tokens)
    .Inputs({FDSPEC_VERIFY_DRAFT_TOKENS_INPUTS})
        FDSPEC_INPLACE_OUTPUTS("step_output_ids", "step_output_len")
    .Attrs({FDSPEC_VERIFY_DRAFT_TOKENS_ATTRS})
    .SetKernelFn(PD_KERNEL(VerifyDraftTokensUnseeded));

// Ours: the same op with each slot's Philox key (its request's seed) as an 18th input. A name of
// its own, so that the FastDeploy name keeps FastDeploy's signature (docs/contract/names.md).
PD_BUILD_OP(verify_draft_tokens_seeded)
    .Inputs({FDSPEC_VERIFY_DRAFT_TOKENS_INPUTS, paddle::Optional("seeds")})
        FDSPEC_INPLACE_OUTPUTS("step_output_ids", "step_output_len")
    .Attrs({FDSPEC_VERIFY_DRAFT_TOKENS_ATTRS})
    .SetKernelFn(PD_KERNEL(VerifyDraftTokens));
