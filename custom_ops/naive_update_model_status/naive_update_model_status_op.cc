// naive_update_model_status: Paddle binding. Checks the tensors by name and dispatches on the place
// of accept_tokens. FastDeploy's five tensors, in its order.
#include "binding/tensor_rules.h"
#include "naive_update_model_status/naive_update_model_status.h"

constexpr const char* kOp = "naive_update_model_status";

void NaiveUpdateModelStatus(paddle::Tensor& accept_tokens, paddle::Tensor& accept_num,
                            paddle::Tensor& seq_lens_this_time, const paddle::Tensor& next_tokens,
                            const paddle::Tensor& cu_seqlens_q_output) {
  const fdspec::binding::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, accept_tokens, accept_num, seq_lens_this_time, next_tokens,
                       cu_seqlens_q_output);
  fdspec::NaiveUpdateModelStatusParams p{};
  c.dtype(seq_lens_this_time, "seq_lens_this_time", paddle::DataType::INT32)
      .vector(seq_lens_this_time, "seq_lens_this_time");
  p.batch = c.batch(seq_lens_this_time, "seq_lens_this_time");
  c.dtype(accept_tokens, "accept_tokens", paddle::DataType::INT64)
      .rows_at_least(accept_tokens, "accept_tokens", p.batch)
      .dtype(accept_num, "accept_num", paddle::DataType::INT32)
      .vector(accept_num, "accept_num")
      .that(accept_num.numel() >= p.batch,
            "accept_num must have at least one entry per slot of seq_lens_this_time (" +
                std::to_string(p.batch) + "), got shape " + fdspec::binding::shape_str(accept_num))
      .dtype(next_tokens, "next_tokens", paddle::DataType::INT64)
      .vector(next_tokens, "next_tokens")
      .dtype(cu_seqlens_q_output, "cu_seqlens_q_output", paddle::DataType::INT32)
      .vector(cu_seqlens_q_output, "cu_seqlens_q_output")
      .that(cu_seqlens_q_output.numel() >= p.batch + 1,
            "cu_seqlens_q_output must have B + 1 = " + std::to_string(p.batch + 1) +
                " entries (B from seq_lens_this_time), got shape " +
                fdspec::binding::shape_str(cu_seqlens_q_output))
      .same_place_as(accept_tokens, "accept_tokens",
                     {{"accept_num", accept_num},
                      {"seq_lens_this_time", seq_lens_this_time},
                      {"next_tokens", next_tokens},
                      {"cu_seqlens_q_output", cu_seqlens_q_output}});
  p.width = accept_tokens.shape()[1];
  c.that(p.width >= 1, "accept_tokens must have at least one column");
  p.num_tokens = next_tokens.numel();
  p.accept_tokens = accept_tokens.data<int64_t>();
  p.accept_num = accept_num.data<int32_t>();
  p.seq_lens_this_time = seq_lens_this_time.data<int32_t>();
  p.next_tokens = next_tokens.data<int64_t>();
  p.cu_seqlens_q_output = cu_seqlens_q_output.data<int32_t>();

  FDSPEC_RUN_ON_PLACE(kOp, accept_tokens, p, fdspec::naive_update_model_status_cpu,
                      fdspec::naive_update_model_status_gpu);
}

PD_BUILD_OP(naive_update_model_status)
    .Inputs({"accept_tokens", "accept_num", "seq_lens_this_time", "next_tokens",
             "cu_seqlens_q_output"})
        FDSPEC_INPLACE_OUTPUTS("accept_tokens", "accept_num", "seq_lens_this_time")
    .SetKernelFn(PD_KERNEL(NaiveUpdateModelStatus));
