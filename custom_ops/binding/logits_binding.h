// Binding helpers for ops that take logits in float32, float16 or bfloat16: the dtype check and
// untyped data pointers for the kernel layers (which see the dtype as a LogitsDType).
#pragma once

#include "binding/binding_utils.h"
#include "common/half_bits.h"

namespace fdspec {
namespace binding {

inline bool is_logits_dtype(paddle::DataType d) {
  return d == paddle::DataType::FLOAT32 || d == paddle::DataType::FLOAT16 ||
         d == paddle::DataType::BFLOAT16;
}

inline void check_logits_dtype(const OpChecks& c, const paddle::Tensor& t, const char* name) {
  c.that(is_logits_dtype(t.dtype()),
         std::string(name) + " must be float32, float16 or bfloat16, got " + dtype_str(t.dtype()));
}

inline LogitsDType logits_dtype(const paddle::Tensor& t) {
  switch (t.dtype()) {
    case paddle::DataType::FLOAT16:
      return LogitsDType::kFloat16;
    case paddle::DataType::BFLOAT16:
      return LogitsDType::kBFloat16;
    default:
      return LogitsDType::kFloat32;
  }
}

// Typed accessors underneath: Paddle checks the element type of data<T>() against the tensor's.
inline void* logits_data(paddle::Tensor& t) {
  switch (t.dtype()) {
    case paddle::DataType::FLOAT16:
      return t.data<phi::dtype::float16>();
    case paddle::DataType::BFLOAT16:
      return t.data<phi::dtype::bfloat16>();
    default:
      return t.data<float>();
  }
}

inline const void* logits_data(const paddle::Tensor& t) {
  switch (t.dtype()) {
    case paddle::DataType::FLOAT16:
      return t.data<phi::dtype::float16>();
    case paddle::DataType::BFLOAT16:
      return t.data<phi::dtype::bfloat16>();
    default:
      return t.data<float>();
  }
}

}  // namespace binding
}  // namespace fdspec
