// top_p_candidates: Paddle binding. Checks the tensors by name, allocates the three outputs (the
// only allocation: Paddle's caching allocator gives a functional op its results) and dispatches on
// the place of probs. FastDeploy's signature: probs, top_p, batch_id_per_token_output;
// candidates_len, max_seq_len.
#include "binding/logits_binding.h"
#include "top_p_candidates/top_p_candidates.h"

constexpr const char* kOp = "top_p_candidates";

std::vector<paddle::Tensor> TopPCandidates(const paddle::Tensor& probs, const paddle::Tensor& top_p,
                                           const paddle::Tensor& batch_id_per_token_output,
                                           int candidates_len, int max_seq_len) {
  namespace bd = fdspec::binding;
  const bd::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, probs, top_p, batch_id_per_token_output);
  bd::check_logits_dtype(c, probs, "probs");
  c.rank(probs, "probs", 2);
  c.that(top_p.dtype() == paddle::DataType::FLOAT32 || top_p.dtype() == probs.dtype(),
         std::string("top_p must be float32 or the dtype of probs (") +
             bd::dtype_str(probs.dtype()) + "), got " + bd::dtype_str(top_p.dtype()))
      .vector(top_p, "top_p")
      .dtype(batch_id_per_token_output, "batch_id_per_token_output", paddle::DataType::INT32)
      .vector(batch_id_per_token_output, "batch_id_per_token_output")
      .that(batch_id_per_token_output.numel() == probs.shape()[0],
            "batch_id_per_token_output must have one entry per row of probs (" +
                std::to_string(probs.shape()[0]) + "), got shape " +
                bd::shape_str(batch_id_per_token_output))
      .that(candidates_len >= 1,
            "candidates_len must be >= 1, got " + std::to_string(candidates_len))
      .same_place_as(probs, "probs",
                     {{"top_p", top_p}, {"batch_id_per_token_output", batch_id_per_token_output}});
  (void)max_seq_len;  // upstream's former row-to-slot mapping; batch ids replaced it (#6358)
  const int64_t T = probs.shape()[0];
  auto scores = bd::new_output({T, candidates_len}, probs.dtype(), probs.place());
  auto ids = bd::new_output({T, candidates_len}, paddle::DataType::INT64, probs.place());
  auto lens = bd::new_output({T}, paddle::DataType::INT32, probs.place());

  fdspec::TopPCandidatesParams p{};
  p.probs = bd::logits_data(probs);
  p.dtype = bd::logits_dtype(probs);
  p.token_rows = T;
  p.vocab = probs.shape()[1];
  p.top_p = bd::logits_data(top_p);
  p.top_p_dtype = bd::logits_dtype(top_p);
  p.num_slots = top_p.numel();
  p.batch_ids = batch_id_per_token_output.data<int32_t>();
  p.scores = bd::logits_data(scores);
  p.ids = ids.data<int64_t>();
  p.lens = lens.data<int32_t>();
  p.num_candidates = candidates_len;
  FDSPEC_RUN_ON_PLACE(kOp, probs, p, fdspec::top_p_candidates_cpu, fdspec::top_p_candidates_gpu);
  return {scores, ids, lens};
}

std::vector<std::vector<int64_t>> TopPCandidatesInferShape(const std::vector<int64_t>& probs_shape,
                                                           const std::vector<int64_t>&,
                                                           const std::vector<int64_t>&,
                                                           int candidates_len, int) {
  return {{probs_shape[0], candidates_len}, {probs_shape[0], candidates_len}, {probs_shape[0]}};
}

std::vector<paddle::DataType> TopPCandidatesInferDtype(const paddle::DataType& probs_dtype,
                                                       const paddle::DataType&,
                                                       const paddle::DataType&) {
  return {probs_dtype, paddle::DataType::INT64, paddle::DataType::INT32};
}

PD_BUILD_OP(top_p_candidates)
    .Inputs({"probs", "top_p", "batch_id_per_token_output"})
    .Outputs({"verify_scores", "verify_tokens", "actual_candidate_lens"})
    .Attrs({"candidates_len: int", "max_seq_len: int"})
    .SetKernelFn(PD_KERNEL(TopPCandidates))
    .SetInferShapeFn(PD_INFER_SHAPE(TopPCandidatesInferShape))
    .SetInferDtypeFn(PD_INFER_DTYPE(TopPCandidatesInferDtype));
