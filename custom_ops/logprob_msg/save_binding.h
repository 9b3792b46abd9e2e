// Paddle binding shared by the two sender ops (speculate_save_output_topk and
// mtp_save_first_token_with_topk, docs/contract/transport.md): named checks, host copies of GPU
// inputs, pack, send.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "binding/binding_utils.h"
#include "logprob_msg/logprob_msg.h"
#include "logprob_msg/msg_queue.h"

namespace fdspec {
namespace logprob_binding {

// Host pointers to the inputs of a sender op. Each input may sit on the CPU (read in place) or on
// the GPU: then it is copied with cudaMemcpyAsync on its own stream into a per-thread staging
// buffer, and wait() synchronises those streams. The sync is the point of the op, not a cost to
// avoid: the message must carry the values the step computed and msgsnd reads host memory. These
// ops are host ops by nature (upstream copies with a blocking copy_to), called after the step's
// kernels and outside any captured CUDA graph; the wait covers only the inputs' streams.
class HostInputs {
 public:
  explicit HostInputs(const char* op) : op_(op) {}

  template <typename T>
  const T* host(const paddle::Tensor& t) {
    if (t.is_cpu()) return t.data<T>();
#ifdef FDSPEC_WITH_CUDA
    PD_CHECK(used_ < staging().size(), op_, ": internal error: too many GPU inputs");
    std::vector<uint8_t>& buf = staging()[used_++];
    const size_t bytes = static_cast<size_t>(t.numel()) * sizeof(T);
    buf.resize(bytes);
    const cudaStream_t s = binding::stream_of(t);
    binding::check_cuda(cudaMemcpyAsync(buf.data(), t.data<T>(), bytes, cudaMemcpyDeviceToHost, s),
                        op_);
    bool known = false;
    for (size_t i = 0; i < num_streams_; ++i) known = known || streams_[i] == s;
    if (!known) streams_[num_streams_++] = s;
    return reinterpret_cast<const T*>(buf.data());
#else
    binding::no_gpu_kernels(op_);
#endif
  }

  void wait() {
#ifdef FDSPEC_WITH_CUDA
    for (size_t i = 0; i < num_streams_; ++i)
      binding::check_cuda(cudaStreamSynchronize(streams_[i]), op_);
#endif
  }

 private:
  static constexpr size_t kMaxInputs = 10;
#ifdef FDSPEC_WITH_CUDA
  static std::array<std::vector<uint8_t>, kMaxInputs>& staging() {
    thread_local std::array<std::vector<uint8_t>, kMaxInputs> buffers;
    return buffers;
  }
  std::array<cudaStream_t, kMaxInputs> streams_{};
  size_t num_streams_ = 0;
  size_t used_ = 0;
#endif
  const char* op_;
};

struct SaveInputs {
  const paddle::Tensor& sampled_token_ids;
  const paddle::Tensor& logprob_token_ids;
  const paddle::Tensor& logprob_scores;
  const paddle::Tensor& logprob_ranks;
  const paddle::Tensor& token_num_per_batch;
  const paddle::Tensor& cu_batch_token_offset;
  const paddle::Tensor& not_need_stop;
  const paddle::Tensor& seq_lens_decoder;
  const paddle::Tensor& prompt_lens;
  const paddle::Tensor& preempted_idx;  // int32 [B], 1 marks a preempted slot
  const char* preempted_name;           // its name in the op's signature
};

inline void save_logprob_message(const char* op, logprob_msg::SaveMode mode, const SaveInputs& in,
                                 int message_flag, int64_t rank_id, bool save_each_rank,
                                 int64_t queue_id_attr) {
  using paddle::DataType;
  namespace lm = logprob_msg;
  const binding::OpChecks c(op);
  const bool first_token = mode == lm::SaveMode::kFirstTokenWithDrafts;
  c.defined(
      "sampled_token_ids, logprob_token_ids, logprob_scores, logprob_ranks, token_num_per_batch, "
      "cu_batch_token_offset, not_need_stop, seq_lens_decoder, prompt_lens",
      {in.sampled_token_ids, in.logprob_token_ids, in.logprob_scores, in.logprob_ranks,
       in.token_num_per_batch, in.cu_batch_token_offset, in.not_need_stop, in.seq_lens_decoder,
       in.prompt_lens});
  c.defined(in.preempted_name, {in.preempted_idx});
  // The batch is token_num_per_batch's: its own shape is checked first, so a malformed one is
  // blamed on it rather than on the first tensor compared with it.
  c.dtype(in.token_num_per_batch, "token_num_per_batch", DataType::INT32)
      .that(in.token_num_per_batch.shape().size() == 1 ||
                (in.token_num_per_batch.shape().size() == 2 &&
                 in.token_num_per_batch.shape()[1] == 1),
            "token_num_per_batch must have shape [B] or [B, 1] (it defines the batch), got " +
                binding::shape_str(in.token_num_per_batch));
  const int64_t B = c.batch(in.token_num_per_batch, "token_num_per_batch");
  c.dtype(in.sampled_token_ids, "sampled_token_ids", DataType::INT64)
      .dtype(in.logprob_token_ids, "logprob_token_ids", DataType::INT64)
      .dtype(in.logprob_scores, "logprob_scores", DataType::FLOAT32)
      .dtype(in.logprob_ranks, "logprob_ranks", DataType::INT64)
      .dtype(in.token_num_per_batch, "token_num_per_batch", DataType::INT32)
      .dtype(in.cu_batch_token_offset, "cu_batch_token_offset", DataType::INT32)
      .dtype(in.not_need_stop, "not_need_stop", DataType::BOOL)
      .dtype(in.seq_lens_decoder, "seq_lens_decoder", DataType::INT32)
      .dtype(in.prompt_lens, "prompt_lens", DataType::INT64);
  c.that(B <= lm::kMaxBsz,
         "batch (token_num_per_batch) has " + std::to_string(B) +
             " slots; a message holds at most MAX_BSZ = " + std::to_string(lm::kMaxBsz))
      .rank(in.logprob_token_ids, "logprob_token_ids", 2);
  const int64_t R = in.logprob_token_ids.shape()[0];
  const int64_t M = in.logprob_token_ids.shape()[1];
  c.that(M >= 1 && M <= lm::kColumns, "logprob_token_ids has " + std::to_string(M) +
                                          " columns (top-k + 1); 1 .. " +
                                          std::to_string(lm::kColumns) +
                                          " are supported (K = " + std::to_string(lm::kTopK) + ")")
      .that(in.logprob_scores.shape() == in.logprob_token_ids.shape(),
            "logprob_scores must have the shape of logprob_token_ids " +
                binding::shape_str(in.logprob_token_ids) + ", got " +
                binding::shape_str(in.logprob_scores))
      .per_slot(in.logprob_ranks, "logprob_ranks", R)
      .that(in.cu_batch_token_offset.numel() >= B,
            "cu_batch_token_offset must hold at least B = " + std::to_string(B) + " offsets, got " +
                binding::shape_str(in.cu_batch_token_offset))
      .vector(in.cu_batch_token_offset, "cu_batch_token_offset")
      .that(in.not_need_stop.numel() == 1, "not_need_stop must hold one value (shape [1]), got " +
                                               binding::shape_str(in.not_need_stop))
      .per_slot(in.seq_lens_decoder, "seq_lens_decoder", B)
      .per_slot(in.prompt_lens, "prompt_lens", B)
      .dtype(in.preempted_idx, in.preempted_name, DataType::INT32)
      .per_slot(in.preempted_idx, in.preempted_name, B)
      .that(
          message_flag >= 0 && message_flag <= lm::kFlagMask,
          "message_flag " + std::to_string(message_flag) + " must be in [0, 255] (8 bits of [1])");
  if (first_token)
    c.rows_at_least(in.sampled_token_ids, "sampled_token_ids", B);
  else
    c.vector(in.sampled_token_ids, "sampled_token_ids");
  if ((!save_each_rank && rank_id > 0) || B == 0) return;

  int64_t queue_id = 0;
  int32_t msg_id = 0;
  std::string err = msgq::resolve_queue_id(queue_id_attr, &queue_id);
  c.that(err.empty(), err);
  err = msgq::msg_id_from_env(&msg_id);
  c.that(err.empty(), err);

  HostInputs h(op);
  lm::SaveParams p;
  p.mode = mode;
  p.sampled_token_ids = h.host<int64_t>(in.sampled_token_ids);
  p.sampled_numel = in.sampled_token_ids.numel();
  p.sampled_stride = first_token ? in.sampled_token_ids.shape()[1] : 1;
  p.logprob_token_ids = h.host<int64_t>(in.logprob_token_ids);
  p.logprob_scores = h.host<float>(in.logprob_scores);
  p.logprob_ranks = h.host<int64_t>(in.logprob_ranks);
  p.logprob_rows = R;
  p.columns = M;
  p.token_num_per_batch = h.host<int32_t>(in.token_num_per_batch);
  p.cu_batch_token_offset = h.host<int32_t>(in.cu_batch_token_offset);
  p.seq_lens_decoder = h.host<int32_t>(in.seq_lens_decoder);
  p.prompt_lens = h.host<int64_t>(in.prompt_lens);
  p.preempted_idx = h.host<int32_t>(in.preempted_idx);
  const bool* not_need_stop = h.host<bool>(in.not_need_stop);
  p.batch = B;
  p.message_flag = message_flag;
  h.wait();
  p.stop_flag = not_need_stop[0] ? msg_id : -msg_id;

  // One buffer per thread, sized for the largest message: kFramePrefix of headroom for the
  // transport.
  thread_local std::vector<uint8_t> buf(msgq::kFramePrefix + lm::kMaxWireBytes);
  size_t bytes = 0;
  err = lm::pack_message(p, buf.data() + msgq::kFramePrefix, lm::kMaxWireBytes, &bytes);
  c.that(err.empty(), err);
  err = msgq::send_message(queue_id, buf.data(), bytes, nullptr);
  c.that(err.empty(), "sending the message failed: " + err);
}

}  // namespace logprob_binding
}  // namespace fdspec
