// speculate_compute_cu_batch_offset: Paddle binding (docs/contract/logprobs.md), the offset step of
// the gather alone.
#include "binding/binding_utils.h"
#include "speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits.h"

namespace {
constexpr const char* kOp = "speculate_compute_cu_batch_offset";
}  // namespace

void SpeculateComputeCuBatchOffset(paddle::Tensor& cu_batch_token_offset,
                                   const paddle::Tensor& accept_num, int real_bsz,
                                   int max_accept_num) {
  using paddle::DataType;
  namespace fb = fdspec::binding;
  const fb::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, cu_batch_token_offset, accept_num);
  c.dtype(cu_batch_token_offset, "cu_batch_token_offset", DataType::INT32)
      .dtype(accept_num, "accept_num", DataType::INT32)
      .vector(cu_batch_token_offset, "cu_batch_token_offset")
      .vector(accept_num, "accept_num")
      .same_place(cu_batch_token_offset, "cu_batch_token_offset", accept_num, "accept_num")
      .that(real_bsz >= 0, "real_bsz must be >= 0, got " + std::to_string(real_bsz))
      .that(accept_num.numel() >= real_bsz,
            "accept_num must have at least real_bsz = " + std::to_string(real_bsz) +
                " elements, got shape " + fb::shape_str(accept_num))
      .that(cu_batch_token_offset.numel() >= int64_t{real_bsz} + 1,
            "cu_batch_token_offset must have at least real_bsz + 1 = " +
                std::to_string(real_bsz + 1) + " elements, got shape " +
                fb::shape_str(cu_batch_token_offset));
  const fdspec::CuBatchOffsetParams p{cu_batch_token_offset.data<int32_t>(),
                                      accept_num.data<int32_t>(), real_bsz, max_accept_num};
  FDSPEC_RUN_ON_PLACE(kOp, cu_batch_token_offset, p, fdspec::compute_cu_batch_offset_cpu,
                      fdspec::compute_cu_batch_offset_gpu);
}

PD_BUILD_OP(speculate_compute_cu_batch_offset)
    .Inputs({"cu_batch_token_offset", "accept_num"})
    .Attrs({"real_bsz: int", "max_accept_num: int"})
    .Outputs({"cu_batch_token_offset_out"})
    .SetInplaceMap({{"cu_batch_token_offset", "cu_batch_token_offset_out"}})
    .SetKernelFn(PD_KERNEL(SpeculateComputeCuBatchOffset));
