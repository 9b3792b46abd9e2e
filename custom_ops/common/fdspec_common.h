// Definitions shared by every kernel layer (CPU and CUDA) of fastdeploy_spec.
// This header must stay free of Paddle and CUDA includes: it is compiled by g++ in a CPU-only build.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FDSPEC_HD __host__ __device__ __forceinline__
#else
#define FDSPEC_HD inline
#endif

namespace fdspec {

// Default token budgets of the threshold walks (docs/contract/ngram.md). The Python wrappers and the bindings
// read the environment; these are the values used when it says nothing.
constexpr int64_t kNgramThresholdDefault = 128;    // INFER_WITH_REFERENCE_TOKENUM_THRESHOLD
constexpr int64_t kHybridThresholdDefault = 1024;  // SPEC_TOKENUM_THRESHOLD

// Largest top-k of the logprob path (docs/contract/logprobs.md and transport.md): FastDeploy's max_logprobs
// default. The fused logprob kernel keeps a warp's top-k one entry per lane, so it must fit in a warp.
constexpr int kMaxLogprobTopK = 20;
static_assert(kMaxLogprobTopK <= 32, "the logprob top-k is held one entry per lane of a warp");

// Clamp v to [lo, hi]; hi < lo yields lo (a zero-width tensor clamps every length to 0).
template <typename T>
FDSPEC_HD T clamp_to(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? (hi < lo ? lo : hi) : v);
}

template <typename T>
FDSPEC_HD T min_of(T a, T b) { return a < b ? a : b; }

template <typename T>
FDSPEC_HD T max_of(T a, T b) { return a > b ? a : b; }

// a - b saturated to the int64 range. Limits such as max_dec_len reach the kernels unchecked; the
// difference of two extreme values must not wrap around (a wrapped budget turns "no room" into room).
FDSPEC_HD int64_t sub_sat(int64_t a, int64_t b) {
  if (b > 0 && a < INT64_MIN + b) return INT64_MIN;
  if (b < 0 && a > INT64_MAX + b) return INT64_MAX;
  return a - b;
}

}  // namespace fdspec
