// speculate_get_output_topk: Paddle binding (docs/contract/transport.md). Receives one logprob
// message (reassembling its fragments) and writes it into upstream's receive layout, in place.
#include "binding/binding_utils.h"
#include "logprob_msg/logprob_msg.h"
#include "logprob_msg/msg_queue.h"

namespace {

constexpr const char* kOp = "speculate_get_output_topk";

// The receive buffers belong to the token processor and live on the host: the op writes them with
// the CPU, whatever build this is.
void check_host_buffer(const fdspec::binding::OpChecks& c, const paddle::Tensor& t,
                       const char* name, paddle::DataType dtype, int64_t min_numel) {
  c.dtype(t, name, dtype)
      .vector(t, name)
      .that(t.is_cpu(),
            std::string(name) + " must be a CPU tensor (the receive buffers live on the host)")
      .that(t.numel() >= min_numel,
            std::string(name) + " must hold at least " + std::to_string(min_numel) +
                " values (upstream's receive layout), got " + fdspec::binding::shape_str(t));
}

}  // namespace

void SpeculateGetOutputTopK(paddle::Tensor& output_tokens, paddle::Tensor& output_scores,
                            paddle::Tensor& output_ranks, int real_k, int64_t rank_id,
                            bool wait_flag, int64_t queue_id_attr) {
  namespace lm = fdspec::logprob_msg;
  (void)
      rank_id;  // kept for upstream compatibility: the queue is named by queue_id / the environment
  const fdspec::binding::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, output_tokens, output_scores, output_ranks);
  check_host_buffer(c, output_tokens, "output_tokens", paddle::DataType::INT64,
                    lm::kOutputTokensLen);
  check_host_buffer(c, output_scores, "output_scores", paddle::DataType::FLOAT32,
                    lm::kOutputScoresLen);
  check_host_buffer(c, output_ranks, "output_ranks", paddle::DataType::INT64, lm::kOutputRanksLen);
  // The columns written are the message's own (from its flag word); real_k is only range-checked.
  c.that(real_k >= 0 && real_k <= lm::kTopK,
         "real_k " + std::to_string(real_k) + " must be in [0, K = " + std::to_string(lm::kTopK) +
             "]");
  int64_t queue_id = 0;
  std::string err = fdspec::msgq::resolve_queue_id(queue_id_attr, &queue_id);
  c.that(err.empty(), err);

  const lm::ReceiveBuffers out{output_tokens.data<int64_t>(), output_scores.data<float>(),
                               output_ranks.data<int64_t>()};
  bool got = false;
  err = fdspec::msgq::receive_message(
      queue_id, wait_flag, lm::kMaxWireBytes,
      [&out](const uint8_t* msg, size_t bytes) { return lm::unpack_message(msg, bytes, out); },
      &got);
  if (!got || !err.empty()) lm::mark_no_message(out);
  c.that(err.empty(), err);
}

PD_BUILD_OP(speculate_get_output_topk)
    .Inputs({"output_tokens", "output_scores", "output_ranks"})
    .Attrs({"real_k: int", "rank_id: int64_t", "wait_flag: bool", "queue_id: int64_t"})
    .Outputs({"output_tokens_out", "output_scores_out", "output_ranks_out"})
    .SetInplaceMap({{"output_tokens", "output_tokens_out"},
                    {"output_scores", "output_scores_out"},
                    {"output_ranks", "output_ranks_out"}})
    .SetKernelFn(PD_KERNEL(SpeculateGetOutputTopK));
