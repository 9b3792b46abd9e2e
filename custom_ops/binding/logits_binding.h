// Binding helpers for ops that take logits in float32, float16 or bfloat16: the dtype check and
// untyped data pointers for the kernel layers (which see the dtype as a LogitsDType).
#pragma once

#include <type_traits>

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

// The data pointer of a logits tensor: void* for a paddle::Tensor, const void* for a const one.
// Typed accessors underneath: Paddle checks the element type of data<T>() against the tensor's.
template <class TensorT>
auto logits_data(TensorT& t) {
  using Ptr = std::conditional_t<std::is_const_v<TensorT>, const void*, void*>;
  switch (t.dtype()) {
    case paddle::DataType::FLOAT16:
      return static_cast<Ptr>(t.template data<phi::dtype::float16>());
    case paddle::DataType::BFLOAT16:
      return static_cast<Ptr>(t.template data<phi::dtype::bfloat16>());
    default:
      return static_cast<Ptr>(t.template data<float>());
  }
}

// The logits fields of a kernel's params from a [N, V] logits tensor: its data, dtype, N and V.
template <class Params>
void set_logits(Params& p, const paddle::Tensor& logits) {
  p.logits = logits_data(logits);
  p.dtype = logits_dtype(logits);
  p.rows = logits.shape()[0];
  p.vocab = logits.shape()[1];
}

}  // namespace binding
}  // namespace fdspec
