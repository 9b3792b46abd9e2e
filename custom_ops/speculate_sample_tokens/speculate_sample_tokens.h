// speculate_sample_tokens: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
// Contract: docs/contract/sampling.md. Design: docs/design/sampling.md.
//
// One token per logits row: row r of slot b (rows cu[b] .. cu[b+1]-1) draws the request's output
// token j = step_idx[b] + (r - cu[b]) from its slot's temperature / top-k / top-p / min-p
// distribution, with the Philox draw (seed[b], j, kSample). Every quantity that decides the token
// is an integer or a float32 operation written out the same way on both sides (this header), so the
// CPU and the GPU give the same token bit for bit:
//
//   M = the row's largest logit; t(v) = (x[v] - M) * (log2(e) / T)            (two roundings)
//   W(v) = floor(2^(t + 40)) as an integer, by sample_weight (0 below t = -40)  (W(M) = 2^40)
//   order: logit descending, then token id ascending (ord(v) = key(x) << 32 | ~v)
//   A = the first top_k entries of that order among those with W >= max(1, min_p * 2^40)
//   S = the shortest prefix of A whose mass reaches ceil(top_p * mass(A))
//   u = floor(R * mass(S) / 2^128), R = the 128 bits of the draw; the token is the entry of S where
//       the running mass, in the order (bucket ascending, token id ascending), passes u.
//
// Sums are of integers, so no reduction order can change them. Greedy rows (T below
// kSampleMinTemperature, T not finite, or a row whose maximum is not finite) take the first entry
// of the order: the largest logit, the lowest id among equals.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "common/fdspec_common.h"
#include "common/float_rn.h"
#include "common/half_bits.h"
#include "common/philox.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

// Temperatures below this (0, negative, NaN, tiny) and +inf sample greedily: the sampling epsilon
// under which vLLM and FastDeploy call a request greedy (the logprob op's kMinTemperature, too).
constexpr float kSampleMinTemperature = 1e-5f;
// Weights are integers in units of 2^-40 of the largest: what is dropped (entries below 2^-40 of
// the largest) is at most V * 2^-40 < 1e-5 of a row's mass, below float32 resolution of most sums.
constexpr int kSampleWeightBits = 40;
// V * 2^40 must stay below 2^63 (the masses are uint64 sums).
constexpr int64_t kMaxSampleVocab = int64_t{1} << 22;
// Buckets of the mass histogram: 16 per unit of t (a factor 2^(1/16) of weight), t in [-40, 0].
constexpr int kSampleBucketsPerUnit = 16;
constexpr int kSampleBuckets = kSampleWeightBits * kSampleBucketsPerUnit + 1;  // 641
constexpr int64_t kSamplePadToken = -1;                                        // rows past cu[B]

struct SampleTokensParams {
  const void* logits;  // [N, V] float32 / float16 / bfloat16 (dtype)
  LogitsDType dtype;
  int64_t rows;                        // N
  int64_t vocab;                       // V, 1 .. kMaxSampleVocab
  const int32_t* cu_seqlens_q_output;  // [B + 1] int32: rows cu[b] .. cu[b+1]-1 are slot b's
  int64_t batch;                       // B (0: every row is padding)
  const int64_t* step_idx;             // [B] int64: output tokens the slot's request already has
  const int64_t* seed;                 // [B] int64: the request's seed (the Philox key)
  const float* temperature;            // [B] float32
  const float* top_p;                  // [B] float32; >= 1 or NaN: no top-p
  const int64_t* top_k;                // [B] int64; <= 0 or >= V: no top-k
  const float* min_p;                  // [B] float32, or nullptr; <= 0 or NaN: no min-p
  int64_t* sampled_tokens;             // [N] int64, written: the token of each row (-1: padding)
};

// ---- per-row scalars
// ------------------------------------------------------------------------------

// Rows [0, valid) are sampled; the rest is padding.
FDSPEC_HD int64_t sample_valid_rows(const SampleTokensParams& p) {
  return packed_valid_rows(p.cu_seqlens_q_output, p.batch, p.rows);
}

// What a row samples with: resolved from its slot's parameters.
struct SampleRowParams {
  bool greedy;
  float c;              // log2(e) / T
  int64_t top_k;        // 0: none
  uint64_t p24;         // top_p * 2^24, 2^24: none
  uint64_t min_weight;  // W below this is out (>= 1)
  uint64_t seed;
  uint64_t position;  // j
};

FDSPEC_HD SampleRowParams sample_row_params(const SampleTokensParams& p, int64_t r) {
  const int64_t b = packed_slot_of_row(p.cu_seqlens_q_output, p.batch, r);
  SampleRowParams rp;
  const float T = p.temperature[b];
  rp.greedy = !(T >= kSampleMinTemperature && T <= FLT_MAX);
  rp.c = rp.greedy ? 0.0f : fdiv_rn(1.4426950408889634f, T);
  const int64_t k = p.top_k[b];
  rp.top_k = (k > 0 && k < p.vocab) ? k : 0;
  const float tp = p.top_p[b];
  // top_p * 2^24 is exact; the conversion truncates. <= 0 keeps the top entry only.
  rp.p24 = (tp >= 1.0f || tp != tp) ? (uint64_t{1} << 24)
                                    : (tp > 0.0f ? static_cast<uint64_t>(tp * 16777216.0f) : 0);
  const float mp = p.min_p != nullptr ? p.min_p[b] : 0.0f;
  const float mpc = mp > 1.0f ? 1.0f : mp;
  rp.min_weight = mpc > 0.0f ? static_cast<uint64_t>(mpc * 1099511627776.0f) : 0;  // * 2^40, exact
  if (rp.min_weight < 1) rp.min_weight = 1;
  rp.seed = static_cast<uint64_t>(p.seed[b]);
  rp.position = static_cast<uint64_t>(p.step_idx[b] + (r - p.cu_seqlens_q_output[b]));
  return rp;
}

// ---- per-entry arithmetic
// ---------------------------------------------------------------------------

// Order-preserving key of a logit: larger logit, larger key; -0 is +0; NaN is below everything.
FDSPEC_HD uint32_t sample_key(float x) {
  if (x != x) return 0;
  uint32_t b = float_as_bits(x);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

FDSPEC_HD float sample_key_to_float(uint32_t key) {
  return bits_as_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

// The total order of entries: a larger ord comes first (larger key; then the lower id).
FDSPEC_HD uint64_t sample_ord(uint32_t key, uint32_t id) {
  return (static_cast<uint64_t>(key) << 32) | static_cast<uint64_t>(~id);
}
FDSPEC_HD uint32_t sample_ord_id(uint64_t ord) { return ~static_cast<uint32_t>(ord); }

// t = (x - M) * c, the entry's log2 weight relative to the maximum.
FDSPEC_HD float sample_t(float x, float M, float c) { return fmul_rn(fsub_rn(x, M), c); }

// 2^f on [0, 1) as 1 + f q(f): a degree-5 fit (relative error 1.5e-7) with positive coefficients,
// so each fma step is non-decreasing in f; p(0) = 1 exactly.
FDSPEC_HD float sample_exp2_frac(float f) {
  float q = 0x1.e978aep-10f;
  q = fma_rn(q, f, 0x1.277574p-7f);
  q = fma_rn(q, f, 0x1.c91e02p-5f);
  q = fma_rn(q, f, 0x1.ebdb30p-3f);
  q = fma_rn(q, f, 0x1.62e4bcp-1f);
  return fma_rn(q, f, 1.0f);
}

// W = floor(2^(t + 40)) for t in [-40, 0] (computed as floor(p(f) 2^(n + 40)), n = floor(t), f = t
// - n), 0 below -40 or for NaN. Non-decreasing in t; W(0) = 2^40; W >= 1 exactly when t >= -40.
FDSPEC_HD uint64_t sample_weight(float t) {
  if (!(t >= -40.0f)) return 0;
  const float n = floorf(t);
  const float f = t - n;  // exact
  float p = sample_exp2_frac(f);
  p = p < 0x1.fffffep0f ? p : 0x1.fffffep0f;  // keeps 2^(n+1) above every value of binade n
  const uint32_t mant = (float_as_bits(p) & 0x7FFFFFu) | 0x800000u;  // p * 2^23
  const int sh = static_cast<int>(n) + (kSampleWeightBits - 23);     // -23 .. 17
  return sh >= 0 ? (static_cast<uint64_t>(mant) << sh) : static_cast<uint64_t>(mant >> -sh);
}

// The mass-histogram bucket of an entry with t >= -40: round(-16 t), 0 (heaviest) .. 640. The
// rounding is the float addition of 1.5 * 2^23 (exact on both sides); it is non-decreasing in -t,
// so a bucket is a run of the order.
FDSPEC_HD int sample_bucket(float t) {
  const float s = fadd_rn(fmul_rn(t, -16.0f), 12582912.0f);
  return static_cast<int>(float_as_bits(s) & 0x3FFu);
}

// floor(R * m / 2^128) for R = (hi, lo): the draw scaled to [0, m).
FDSPEC_HD uint64_t sample_scale_draw(uint64_t hi, uint64_t lo, uint64_t m) {
  const uint64_t a_hi = mul_hi64(hi, m);
  const uint64_t a_lo = hi * m;
  const uint64_t b_hi = mul_hi64(lo, m);
  const uint64_t s = a_lo + b_hi;
  return a_hi + (s < a_lo ? 1 : 0);
}

FDSPEC_HD uint64_t sample_draw_in(const SampleRowParams& rp, uint64_t mass) {
  const Philox4x32 d = philox_draw(rp.seed, rp.position, RngStream::kSample, 0);
  const uint64_t hi = (static_cast<uint64_t>(d.v[0]) << 32) | d.v[1];
  const uint64_t lo = (static_cast<uint64_t>(d.v[2]) << 32) | d.v[3];
  return sample_scale_draw(hi, lo, mass);
}

// ceil(mass * p24 / 2^24), at least 1: the mass the top-p prefix must reach.
FDSPEC_HD uint64_t sample_topp_target(uint64_t mass, uint64_t p24) {
  const uint64_t hi = mass >> 24, lo = mass & 0xFFFFFFu;
  const uint64_t t = hi * p24 + ((lo * p24 + 0xFFFFFFu) >> 24);
  return t > 0 ? t : 1;
}

void sample_tokens_cpu(const SampleTokensParams& p);

#ifdef FDSPEC_WITH_CUDA
// Grid: N rows, each taken by a cluster of `parts` blocks (sm_90+; one block before), each holding
// its slice of the row in shared memory when it fits (else reading it from global memory at each
// pass). Rows past cu[B] (known only on the device) write -1. No allocation, no host
// synchronisation: CUDA-graph capturable. parts = 0 picks the split from V and the dtype; tests
// pass 1..8 (and force_global) to cover every shape.
cudaError_t sample_tokens_gpu(const SampleTokensParams& p, cudaStream_t stream, int parts = 0,
                              bool force_global = false);
#endif

}  // namespace fdspec
