// speculate_get_accept_tokens_and_logits: Paddle binding (docs/contract/logprobs.md). Checks the
// tensors by name and dispatches on the place of token_ids.
#include <limits>

#include "binding/logits_binding.h"
#include "speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits.h"

namespace {

constexpr const char* kOp = "speculate_get_accept_tokens_and_logits";

fdspec::AcceptTokensLogitsParams make_params(
    paddle::Tensor& token_ids, paddle::Tensor& target_logits, const paddle::Tensor& logits,
    paddle::Tensor& cu_batch_token_offset, const paddle::Tensor& cu_seqlens_q_output,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& accept_num, const paddle::Tensor& accept_tokens) {
  namespace fb = fdspec::binding;
  const fb::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, token_ids, target_logits, logits, cu_batch_token_offset,
                       cu_seqlens_q_output, seq_lens_this_time, seq_lens_encoder, accept_num,
                       accept_tokens);
  const int64_t B = c.batch(seq_lens_this_time, "seq_lens_this_time");
  FDSPEC_CHECK_DTYPE(c, INT64, token_ids, accept_tokens);
  FDSPEC_CHECK_DTYPE(c, INT32, cu_batch_token_offset, cu_seqlens_q_output, seq_lens_this_time,
                     seq_lens_encoder, accept_num);
  fb::check_logits_dtype(c, logits, "logits");
  c.that(target_logits.dtype() == logits.dtype(),
         std::string("target_logits must have the dtype of logits (") +
             fb::dtype_str(logits.dtype()) + "), got " + fb::dtype_str(target_logits.dtype()));
  c.rank(token_ids, "token_ids", 1)
      .rank(logits, "logits", 2)
      .rank(target_logits, "target_logits", 2);
  const int64_t N = token_ids.shape()[0];
  const int64_t V = logits.shape()[1];
  c.that(target_logits.shape()[0] == N && target_logits.shape()[1] == V,
         "target_logits must have shape [N, V] = [" + std::to_string(N) + ", " + std::to_string(V) +
             "] (N from token_ids, V from logits), got " + fb::shape_str(target_logits))
      .that(V >= 1 && V <= fdspec::kMaxVocab,
            "logits must have 1 .. 2^24 columns (the vocabulary), got shape " +
                fb::shape_str(logits));
  c.per_slot(seq_lens_this_time, "seq_lens_this_time", B)
      .per_slot(seq_lens_encoder, "seq_lens_encoder", B)
      .per_slot(accept_num, "accept_num", B)
      .rows_at_least(accept_tokens, "accept_tokens", B)
      .vector(cu_batch_token_offset, "cu_batch_token_offset")
      .vector(cu_seqlens_q_output, "cu_seqlens_q_output")
      .that(cu_batch_token_offset.numel() >= B + 1,
            "cu_batch_token_offset must have at least B + 1 = " + std::to_string(B + 1) +
                " elements, got shape " + fb::shape_str(cu_batch_token_offset))
      .that(cu_seqlens_q_output.numel() >= B,
            "cu_seqlens_q_output must have at least B = " + std::to_string(B) +
                " elements, got shape " + fb::shape_str(cu_seqlens_q_output));
  const int64_t stride = accept_tokens.shape()[1];
  c.that(stride >= 1, "accept_tokens must have at least one column (K + 1)")
      .that(B * stride <= std::numeric_limits<int32_t>::max(),
            "B * (K + 1) must fit in int32, got shape " + fb::shape_str(accept_tokens));
  c.same_place_as(token_ids, "token_ids",
                  {{"target_logits", target_logits},
                   {"logits", logits},
                   {"cu_batch_token_offset", cu_batch_token_offset},
                   {"cu_seqlens_q_output", cu_seqlens_q_output},
                   {"seq_lens_this_time", seq_lens_this_time},
                   {"seq_lens_encoder", seq_lens_encoder},
                   {"accept_num", accept_num},
                   {"accept_tokens", accept_tokens}});

  fdspec::AcceptTokensLogitsParams p;
  p.token_ids = token_ids.data<int64_t>();
  p.target_logits = static_cast<unsigned char*>(fb::logits_data(target_logits));
  p.logits = static_cast<const unsigned char*>(fb::logits_data(logits));
  p.row_bytes = V * fdspec::logits_dtype_size(fb::logits_dtype(logits));
  p.out_rows = N;
  p.in_rows = logits.shape()[0];
  p.cu_batch_token_offset = cu_batch_token_offset.data<int32_t>();
  p.cu_seqlens_q_output = cu_seqlens_q_output.data<int32_t>();
  p.seq_lens_encoder = seq_lens_encoder.data<int32_t>();
  p.accept_num = accept_num.data<int32_t>();
  p.accept_tokens = accept_tokens.data<int64_t>();
  p.accept_stride = stride;
  p.batch = B;
  return p;
}

}  // namespace

void SpeculateGetAcceptTokensAndLogits(
    paddle::Tensor& token_ids, paddle::Tensor& target_logits, const paddle::Tensor& logits,
    paddle::Tensor& cu_batch_token_offset, const paddle::Tensor& cu_seqlens_q_output,
    const paddle::Tensor& seq_lens_this_time, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& accept_num, const paddle::Tensor& accept_tokens) {
  const fdspec::AcceptTokensLogitsParams p =
      make_params(token_ids, target_logits, logits, cu_batch_token_offset, cu_seqlens_q_output,
                  seq_lens_this_time, seq_lens_encoder, accept_num, accept_tokens);
  FDSPEC_RUN_ON_PLACE(kOp, token_ids, p, fdspec::get_accept_tokens_and_logits_cpu,
                      fdspec::get_accept_tokens_and_logits_gpu);
}

PD_BUILD_OP(speculate_get_accept_tokens_and_logits)
    .Inputs({"token_ids", "target_logits", "logits", "cu_batch_token_offset", "cu_seqlens_q_output",
             "seq_lens_this_time", "seq_lens_encoder", "accept_num", "accept_tokens"})
    .Outputs({"token_ids_out", "target_logits_out", "cu_batch_token_offset_out"})
    .SetInplaceMap({{"token_ids", "token_ids_out"},
                    {"target_logits", "target_logits_out"},
                    {"cu_batch_token_offset", "cu_batch_token_offset_out"}})
    .SetKernelFn(PD_KERNEL(SpeculateGetAcceptTokensAndLogits));
