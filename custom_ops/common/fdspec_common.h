// Definitions shared by every kernel layer (CPU and CUDA) of fastdeploy_spec.
// This header must stay free of Paddle and CUDA includes: it is compiled by g++ in a CPU-only
// build.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FDSPEC_HD __host__ __device__ __forceinline__
#else
#define FDSPEC_HD inline
#endif

namespace fdspec {

// Default token budgets of the threshold walks (docs/contract/ngram.md). The Python wrappers and
// the bindings read the environment; these are the values used when it says nothing.
constexpr int64_t kNgramThresholdDefault = 128;    // INFER_WITH_REFERENCE_TOKENUM_THRESHOLD
constexpr int64_t kHybridThresholdDefault = 1024;  // SPEC_TOKENUM_THRESHOLD

// Largest top-k of the logprob path (docs/contract/logprobs.md and transport.md): FastDeploy's
// max_logprobs default. The fused logprob kernel keeps a warp's top-k one entry per lane, so it
// must fit in a warp.
constexpr int kMaxLogprobTopK = 20;
static_assert(kMaxLogprobTopK <= 32, "the logprob top-k is held one entry per lane of a warp");

// Clamp v to [lo, hi]; hi < lo yields lo (a zero-width tensor clamps every length to 0).
template <typename T>
FDSPEC_HD T clamp_to(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? (hi < lo ? lo : hi) : v);
}

// Lengths and steps reach the kernels unchecked: sums saturate rather than wrap (upstream's
// overflow).
FDSPEC_HD int64_t add_sat(int64_t a, int64_t b) {
  if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
  if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
  return a + b;
}

template <typename T>
FDSPEC_HD T min_of(T a, T b) {
  return a < b ? a : b;
}

template <typename T>
FDSPEC_HD T max_of(T a, T b) {
  return a > b ? a : b;
}

// Rows packed by slot (row r of slot b from cu[b] on, as cu_seqlens_q_output or
// cu_batch_token_offset lay them out): rows [0, cu[B]) belong to the slots, clamped to [0, rows];
// the rest is padding.
FDSPEC_HD int64_t packed_valid_rows(const int32_t* cu, int64_t batch, int64_t rows) {
  return batch > 0 ? clamp_to<int64_t>(cu[batch], 0, rows) : 0;
}

// Slot of packed row r: the last b in [0, B) with cu[b] <= r (0 if none). A binary search, so it
// terminates within [0, B) even on offsets that are not sorted.
FDSPEC_HD int64_t packed_slot_of_row(const int32_t* cu, int64_t batch, int64_t r) {
  int64_t lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (cu[mid] <= r) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// a - b saturated to the int64 range. Limits such as max_dec_len reach the kernels unchecked; the
// difference of two extreme values must not wrap around (a wrapped budget turns "no room" into
// room).
FDSPEC_HD int64_t sub_sat(int64_t a, int64_t b) {
  if (b > 0 && a < INT64_MIN + b) return INT64_MIN;
  if (b < 0 && a > INT64_MAX + b) return INT64_MAX;
  return a - b;
}

// n / d and n % d for a divisor fixed over a launch, by a multiplication: a kernel's 64-bit `/` or
// `%` by a runtime value is a routine of about 20 dependent instructions behind a branch (its fast
// path for 32-bit operands), and the branch kept the loads on either side of it from being issued
// together (the suffix cache's search issued a slot's four candidate loads one round trip apart).
// m = floor((2^64 - 1) / d), computed once on the
// host, is below 2^64 / d and at least (2^64 - d) / d, so for 0 <= n < 2^63 the high word of n m
// is floor(n / d) or one less, which one compare settles.
struct FastDivisor {
  int64_t d;   // 1 .. 2^62
  uint64_t m;  // floor((2^64 - 1) / d)
};
inline FastDivisor fast_divisor(int64_t d) {
  return FastDivisor{d, ~uint64_t{0} / static_cast<uint64_t>(d)};
}

FDSPEC_HD uint64_t mul_hi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// floor(n / f.d) for 0 <= n < 2^63, and n % f.d in *rem.
FDSPEC_HD int64_t fast_divmod(int64_t n, FastDivisor f, int64_t* rem) {
  const uint64_t u = static_cast<uint64_t>(n), d = static_cast<uint64_t>(f.d);
  uint64_t q = mul_hi64(u, f.m);
  uint64_t r = u - q * d;  // < 2 d
  if (r >= d) {
    q += 1;
    r -= d;
  }
  *rem = static_cast<int64_t>(r);
  return static_cast<int64_t>(q);
}

FDSPEC_HD int64_t fast_mod(int64_t n, FastDivisor f) {
  int64_t r = 0;
  fast_divmod(n, f, &r);
  return r;
}

}  // namespace fdspec
