// Device-side reading of a logits tensor of any LogitsDType (common/half_bits.h): the storage type
// of one element and its exact widening to float, for the kernels that stream logits rows.
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

#include "common/half_bits.h"

namespace fdspec {

template <LogitsDType D>
struct Logit;
template <>
struct Logit<LogitsDType::kFloat32> {
  using Storage = float;
  static __device__ __forceinline__ float to_float(float v) { return v; }
};
template <>
struct Logit<LogitsDType::kFloat16> {
  using Storage = uint16_t;
  static __device__ __forceinline__ float to_float(uint16_t b) {
    return __half2float(__ushort_as_half(b));
  }
};
template <>
struct Logit<LogitsDType::kBFloat16> {
  using Storage = uint16_t;
  static __device__ __forceinline__ float to_float(uint16_t b) {
    return __uint_as_float(uint32_t{b} << 16);
  }
};

}  // namespace fdspec
