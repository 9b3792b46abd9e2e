// Exact widening of 16-bit floats (stored as their raw bits) to float, for the CPU kernels. Every
// float16 and bfloat16 value is representable in float, so these conversions are exact and agree
// bit for bit with the CUDA intrinsics the GPU kernels use (__half2float, the bfloat16 shift). No
// Paddle or CUDA include.
#pragma once

#include <cstdint>

#include "common/float_rn.h"

namespace fdspec {

// Element types of a logits tensor, as the kernel layers see them.
enum class LogitsDType { kFloat32, kFloat16, kBFloat16 };

inline int logits_dtype_size(LogitsDType d) { return d == LogitsDType::kFloat32 ? 4 : 2; }

inline float bfloat16_bits_to_float(uint16_t h) {
  return bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline float float16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0x1Fu) return bit_cast<float>(sign | 0x7F800000u | (man << 13));  // inf, nan
  if (exp == 0) {
    if (man == 0) return bit_cast<float>(sign);  // signed zero
    // Subnormal: shift the mantissa up until its leading 1 becomes the implicit bit.
    exp = 1;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    man &= 0x3FFu;
  }
  return bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));  // rebias 15 -> 127
}

// Element i of a logits array of dtype d, widened to float: the CPU kernels' read of a logit.
inline float logit_as_float(const void* logits, LogitsDType d, int64_t i) {
  switch (d) {
    case LogitsDType::kFloat16:
      return float16_bits_to_float(static_cast<const uint16_t*>(logits)[i]);
    case LogitsDType::kBFloat16:
      return bfloat16_bits_to_float(static_cast<const uint16_t*>(logits)[i]);
    default:
      return static_cast<const float*>(logits)[i];
  }
}

}  // namespace fdspec
