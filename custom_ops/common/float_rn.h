// Float steps that the CPU and GPU kernels must round identically, and the bits of a float. On
// the device the _rn intrinsics, which nvcc never contracts into an FMA (a fused a * b + c rounds
// once instead of twice and differs in the last bit); on the host the plain operators (g++ without
// -mfma does not contract). No Paddle or CUDA include.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/fdspec_common.h"

namespace fdspec {

// The bits of `from` as a To of the same size (C++20's std::bit_cast), on the host.
template <class To, class From>
inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast takes types of one size");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float fmul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float fadd_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float fsub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float fdiv_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ uint32_t float_as_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ float bits_as_float(uint32_t b) { return __uint_as_float(b); }
#else
inline float fmul_rn(float a, float b) { return a * b; }
inline float fadd_rn(float a, float b) { return a + b; }
inline float fsub_rn(float a, float b) { return a - b; }
inline float fdiv_rn(float a, float b) { return a / b; }
inline float fma_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }  // rounded once
inline uint32_t float_as_bits(float x) { return bit_cast<uint32_t>(x); }
inline float bits_as_float(uint32_t b) { return bit_cast<float>(b); }
#endif

}  // namespace fdspec
