// speculate_sample_tokens: the CUDA launcher against the CPU implementation, bit for bit, without
// Paddle. Every dtype, cluster shape (parts 1, 2, 3, 8 and the automatic choice), shared-memory and
// global slices, vocabularies from 1 to 152064 (odd sizes take the narrow vector paths), rows
// built to reach every path of the kernel: peaked rows (the candidate list), flat and tied rows
// (huge buckets: the radix refinement and the id-order draw over the slices), special values
// (NaN, +-inf: greedy fallbacks), rows at the weight cut-off (the weighing queue), and per-slot
// parameters over their corners. Some cases run
// through a captured graph. Modes: see harness.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <limits>

#include "harness.cuh"
#include "common/cuda_utils.cuh"
#include "speculate_sample_tokens/speculate_sample_tokens.h"

using namespace harness;
using fdspec::LogitsDType;

namespace {

struct Case {
  LogitsDType dtype;
  int64_t vocab;
  int parts;
  bool force_global;
  int kind;  // row generator
  bool graph;
  bool with_min_p;
};

uint16_t to_bits(float x, LogitsDType d) {
  if (d == LogitsDType::kFloat16) {
    const __half h = __float2half(x);
    return *reinterpret_cast<const uint16_t*>(&h);
  }
  const __nv_bfloat16 b = __float2bfloat16(x);
  return *reinterpret_cast<const uint16_t*>(&b);
}

float gen(Rng& rng, int kind, int64_t v, int64_t row) {
  const float inf = std::numeric_limits<float>::infinity();
  switch (kind) {
    case 0: {  // a language model's row: a broad body and a few heavy entries
      std::normal_distribution<float> n(0.0f, 2.0f);
      float x = n(rng.g);
      if (rng.chance(0.002)) x += 14.0f + 6.0f * static_cast<float>(rng.real());
      return x;
    }
    case 1:
      return 0.0f;  // flat: one bucket
    case 2:
      return static_cast<float>(rng.uni(-2, 2));  // ties
    case 3: {                                     // broad: large top-p sets
      std::normal_distribution<float> n(0.0f, 1.0f);
      return n(rng.g);
    }
    case 4: {  // special values
      const double u = rng.real();
      if (u < 0.05) return std::numeric_limits<float>::quiet_NaN();
      if (u < 0.15) return -inf;
      if (u < 0.151 && row % 3 == 0) return inf;
      return static_cast<float>(rng.uni(-50, 50)) * 0.25f;
    }
    case 6: {  // the weight cut-off: the maximum 0, most entries within 2^-6 of where t = -40 at
               // T = 0.8 or T = 1 (half weighed, scattered: the weighing queue's every fill level)
      if (v == row % 7 || rng.chance(0.001)) return 0.0f;
      const float cut = rng.chance(0.5) ? -22.180709f : -27.725887f;
      return cut + static_cast<float>(rng.uni(-64, 64)) * (1.0f / 4096.0f);
    }
    default: {  // large magnitudes and a row of -inf now and then
      if (row % 5 == 4) return -inf;
      std::normal_distribution<float> n(0.0f, 3000.0f);
      return n(rng.g);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Mode mode = parse_mode(argc, argv);
  return run_harness("sample_tokens_vs_cpu", mode, [&](Tally& tally) {
    Stream stream;
    Rng rng(51);
    std::vector<Case> cases;
    const std::vector<int64_t> vocabs =
        mode.quick ? std::vector<int64_t>{1, 7, 1000, 4099}
                   : std::vector<int64_t>{1, 3, 7, 64, 1000, 4099, 32000, 152064};
    for (LogitsDType d : {LogitsDType::kFloat32, LogitsDType::kFloat16, LogitsDType::kBFloat16}) {
      for (int64_t V : vocabs) {
        for (int parts : {0, 1, 2, 3, 8}) {
          for (bool global : {false, true}) {
            for (int kind = 0; kind < 7; ++kind) {
              if (mode.quick && (parts == 3 || kind == 5)) continue;
              if (V >= 32000 && (kind == 5 || kind == 2 || parts == 3 || parts == 2)) continue;
              if (V >= 100000 && parts == 1 && !global) continue;
              cases.push_back({d, V, parts, global, kind, rng.chance(0.2), rng.chance(0.5)});
            }
          }
        }
      }
    }
    for (const Case& c : cases) {
      const int64_t B = c.vocab >= 32000 ? rng.uni(1, 3) : rng.uni(0, 9);
      std::vector<int32_t> cu(B + 1, 0);
      for (int64_t b = 0; b < B; ++b) cu[b + 1] = cu[b] + static_cast<int32_t>(rng.uni(0, 6));
      const int64_t N = cu[B] + rng.uni(0, 2);
      std::vector<int64_t> step(B), seed(B), top_k(B);
      std::vector<float> temp(B), top_p(B), min_p(B);
      const float inf = std::numeric_limits<float>::infinity(),
                  nan = std::numeric_limits<float>::quiet_NaN();
      for (int64_t b = 0; b < B; ++b) {
        step[b] = rng.uni(0, 1 << 20);
        seed[b] = static_cast<int64_t>(rng.g());
        temp[b] = rng.pick<float>({0.0f, 1e-6f, 0.3f, 0.8f, 0.8f, 1.0f, 1.5f, inf, nan});
        top_p[b] = rng.pick<float>({1.0f, 0.9f, 0.9f, 0.5f, 0.0f, 0.999f, nan});
        top_k[b] = rng.pick<int64_t>({0, 0, 1, 2, 20, 50, 1000, c.vocab, -3});
        min_p[b] = rng.pick<float>({0.0f, 0.0f, 0.05f, 0.5f, 1.0f});
      }
      const int64_t esize = fdspec::logits_dtype_size(c.dtype);
      std::vector<unsigned char> logits(static_cast<size_t>(N * c.vocab * esize));
      for (int64_t r = 0; r < N; ++r) {
        for (int64_t v = 0; v < c.vocab; ++v) {
          const float x = gen(rng, c.kind, v, r);
          const size_t i = static_cast<size_t>(r * c.vocab + v);
          if (c.dtype == LogitsDType::kFloat32) {
            std::memcpy(&logits[i * 4], &x, 4);
          } else {
            const uint16_t h = to_bits(x, c.dtype);
            std::memcpy(&logits[i * 2], &h, 2);
          }
        }
      }
      DevVec<unsigned char> d_logits(logits);
      DevVec<int32_t> d_cu(cu);
      DevVec<int64_t> d_step(step), d_seed(seed), d_topk(top_k);
      DevVec<float> d_temp(temp), d_topp(top_p), d_minp(min_p);
      DevVec<int64_t> d_out(std::vector<int64_t>(N, 12345));
      // The parameters over device buffers or host ones (the CPU's).
      auto params = [&](const void* l, const int32_t* cu_p, const int64_t* step_p,
                        const int64_t* seed_p, const float* temp_p, const float* top_p_p,
                        const int64_t* top_k_p, const float* min_p_p, int64_t* out) {
        return fdspec::SampleTokensParams{
            l,      c.dtype, N,      c.vocab, cu_p,    B,
            step_p, seed_p,  temp_p, top_p_p, top_k_p, c.with_min_p ? min_p_p : nullptr,
            out};
      };
      const auto p = params(d_logits.ptr(), d_cu.ptr(), d_step.ptr(), d_seed.ptr(), d_temp.ptr(),
                            d_topp.ptr(), d_topk.ptr(), d_minp.ptr(), d_out.ptr());
      std::vector<int64_t> want(N, 12345);
      fdspec::sample_tokens_cpu(params(logits.data(), cu.data(), step.data(), seed.data(),
                                       temp.data(), top_p.data(), top_k.data(), min_p.data(),
                                       want.data()));
      tally.count(c.force_global ? "global" : "smem");
      tally.count("rows", N);
      run_case(
          tally, stream,
          [&](cudaStream_t s) {
            launch_once(s, c.graph, [&](cudaStream_t st) {
              return launch_or_emulate(
                  p, st,
                  [&](const fdspec::SampleTokensParams& pp, cudaStream_t ss) {
                    const cudaError_t err =
                        fdspec::sample_tokens_gpu(pp, ss, c.parts, c.force_global);
                    if (err != cudaSuccess) {  // name the form the launcher refused
                      const char* why = fdspec::launch_refusal();
                      std::fprintf(stderr,
                                   "sample_tokens_gpu refused: dtype %d V %lld parts %d global %d "
                                   "rows %lld: %s (%s)\n",
                                   static_cast<int>(c.dtype), static_cast<long long>(c.vocab),
                                   c.parts, static_cast<int>(c.force_global),
                                   static_cast<long long>(pp.rows), cudaGetErrorString(err),
                                   why != nullptr ? why : "no reason named");
                    }
                    return err;
                  },
                  fdspec::sample_tokens_cpu,
                  [&](const fdspec::SampleTokensParams& pp) {
                    if (pp.rows == 0) return false;
                    pp.sampled_tokens[0] += 1;
                    return true;
                  });
            });
          },
          [&]() -> std::string {
            const std::vector<int64_t> got = d_out.download();
            const int64_t i = first_diff(got, want);
            if (i < 0) return "";
            return "dtype " + std::to_string(static_cast<int>(c.dtype)) + " V " +
                   std::to_string(c.vocab) + " parts " + std::to_string(c.parts) + " global " +
                   std::to_string(c.force_global) + " kind " + std::to_string(c.kind) + " row " +
                   std::to_string(i) + ": gpu " + std::to_string(got[i]) + " cpu " +
                   std::to_string(want[i]);
          });
    }
  });
}
