// Paddle-free probe of the speculate_logprobs_topk kernel: GPU time per call (CUDA events, median of
// back-to-back launches) for each row split `parts`, top_k and dtype on the bench_logprobs workload
// (N = 384 rows, about 200 valid), and whether every split gives the same ids and ranks as the CPU
// implementation (random logits and tie-heavy integer logits).
//
//   nvcc -std=c++17 -O3 -lineinfo -DFDSPEC_WITH_CUDA -Icustom_ops -I$CUDA_HOME/include/cccl -arch=sm_90 \
//        scripts/dev/logprobs_parts_bench.cu custom_ops/speculate_logprobs_topk/speculate_logprobs_topk{.cu,_cpu.cc} \
//        -o build/logprobs_parts_bench
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "speculate_logprobs_topk/speculate_logprobs_topk.h"

#define CHECK(x)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

namespace {

constexpr int kB = 64, kStride = 6, kN = kB * kStride, kK = 20;

uint16_t to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

struct Case {
  int64_t V;
  bool bf16;
  std::vector<float> f32;
  std::vector<uint16_t> b16;
  std::vector<int64_t> tokens;
  std::vector<int32_t> cu;
};

Case make_case(int64_t V, bool bf16, bool ties, std::mt19937_64& rng) {
  Case c{V, bf16};
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::uniform_int_distribution<int> tie(0, static_cast<int>(V / 20));
  c.f32.resize(static_cast<size_t>(kN) * V);
  for (auto& x : c.f32) x = ties ? static_cast<float>(tie(rng) % 250) : nd(rng);
  if (bf16) {
    c.b16.resize(c.f32.size());
    for (size_t i = 0; i < c.f32.size(); ++i) c.b16[i] = to_bf16(c.f32[i]);
  }
  std::uniform_int_distribution<int64_t> tok(0, V - 1);
  std::uniform_int_distribution<int> acc(1, kStride - 1);
  c.cu.push_back(0);
  for (int b = 0; b < kB; ++b) c.cu.push_back(c.cu.back() + acc(rng));
  for (int r = 0; r < kN; ++r) c.tokens.push_back(tok(rng));
  return c;
}

struct Dev {
  void* logits;
  int64_t *tokens, *ids, *ranks;
  int32_t* cu;
  float* scores;
};

}  // namespace

int main() {
  std::mt19937_64 rng(7);
  int failures = 0;
  std::printf("%7s %5s %4s %5s | %9s | %s\n", "V", "dtype", "k", "parts", "median us",
              "ids+ranks vs CPU (random, ties), max |score diff|");
  for (int64_t V : {32000L, 152064L}) {
    for (bool bf16 : {false, true}) {
      Case cases[2] = {make_case(V, bf16, false, rng), make_case(V, bf16, true, rng)};
      const size_t elem = bf16 ? 2 : 4;
      Dev d{};
      CHECK(cudaMalloc(&d.logits, kN * V * elem));
      CHECK(cudaMalloc(&d.tokens, kN * 8));
      CHECK(cudaMalloc(&d.ids, kN * (kK + 1) * 8));
      CHECK(cudaMalloc(&d.ranks, kN * 8));
      CHECK(cudaMalloc(&d.cu, (kB + 1) * 4));
      CHECK(cudaMalloc(&d.scores, kN * (kK + 1) * 4));
      for (int k : {0, kK}) {
        for (int parts : {1, 2, 3, 4, 8}) {
          bool same[2];
          float med = 0, max_err = 0;
          for (int ci = 0; ci < 2; ++ci) {
            const Case& c = cases[ci];
            const void* host = bf16 ? static_cast<const void*>(c.b16.data()) : c.f32.data();
            CHECK(cudaMemcpy(d.logits, host, kN * V * elem, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(d.tokens, c.tokens.data(), kN * 8, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(d.cu, c.cu.data(), (kB + 1) * 4, cudaMemcpyHostToDevice));
            fdspec::LogprobsTopkParams p{};
            p.logits = d.logits;
            p.dtype = bf16 ? fdspec::LogitsDType::kBFloat16 : fdspec::LogitsDType::kFloat32;
            p.rows = kN;
            p.vocab = V;
            p.token_ids = d.tokens;
            p.cu_batch_token_offset = d.cu;
            p.batch = kB;
            p.logprob_token_ids = d.ids;
            p.logprob_scores = d.scores;
            p.logprob_ranks = d.ranks;
            p.top_k = k;
            CHECK(fdspec::logprobs_topk_gpu(p, 0, parts));
            CHECK(cudaDeviceSynchronize());
            std::vector<int64_t> gids(kN * (k + 1)), granks(kN), cids(kN * (k + 1)), cranks(kN);
            std::vector<float> cscores(kN * (k + 1));
            CHECK(cudaMemcpy(gids.data(), d.ids, gids.size() * 8, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(granks.data(), d.ranks, kN * 8, cudaMemcpyDeviceToHost));
            std::vector<float> gscores(kN * (k + 1));
            CHECK(cudaMemcpy(gscores.data(), d.scores, gscores.size() * 4, cudaMemcpyDeviceToHost));
            fdspec::LogprobsTopkParams h = p;
            h.logits = host;
            h.token_ids = c.tokens.data();
            h.cu_batch_token_offset = c.cu.data();
            h.logprob_token_ids = cids.data();
            h.logprob_scores = cscores.data();
            h.logprob_ranks = cranks.data();
            fdspec::logprobs_topk_cpu(h);
            same[ci] = gids == cids && granks == cranks;
            for (size_t i = 0; i < gscores.size(); ++i) max_err = std::max(max_err, std::fabs(gscores[i] - cscores[i]));
            if (!same[ci]) {
              ++failures;
              for (int r = 0; r < kN; ++r) {
                bool bad = granks[r] != cranks[r];
                for (int j = 0; j <= k; ++j) bad |= gids[r * (k + 1) + j] != cids[r * (k + 1) + j];
                if (bad) {
                  std::printf("  first bad row %d: rank gpu %lld cpu %lld; ids gpu/cpu:", r,
                              static_cast<long long>(granks[r]), static_cast<long long>(cranks[r]));
                  for (int j = 0; j <= std::min(k, 6); ++j)
                    std::printf(" %lld/%lld", static_cast<long long>(gids[r * (k + 1) + j]),
                                static_cast<long long>(cids[r * (k + 1) + j]));
                  std::printf("\n");
                  break;
                }
              }
            }
            if (ci == 0) {  // time the random case
              cudaEvent_t ev[51];
              for (auto& e : ev) CHECK(cudaEventCreate(&e));
              for (int i = 0; i < 10; ++i) CHECK(fdspec::logprobs_topk_gpu(p, 0, parts));
              CHECK(cudaEventRecord(ev[0]));
              for (int i = 1; i <= 50; ++i) {
                CHECK(fdspec::logprobs_topk_gpu(p, 0, parts));
                CHECK(cudaEventRecord(ev[i]));
              }
              CHECK(cudaDeviceSynchronize());
              std::vector<float> t(50);
              for (int i = 0; i < 50; ++i) CHECK(cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]));
              std::nth_element(t.begin(), t.begin() + 25, t.end());
              med = t[25] * 1e3f;
              for (auto& e : ev) CHECK(cudaEventDestroy(e));
            }
          }
          std::printf("%7lld %5s %4d %5d | %9.1f | %s %s %.2e\n", static_cast<long long>(V), bf16 ? "bf16" : "fp32", k,
                      parts, med, same[0] ? "same" : "DIFF", same[1] ? "same" : "DIFF", max_err);
        }
      }
      CHECK(cudaFree(d.logits));
      CHECK(cudaFree(d.tokens));
      CHECK(cudaFree(d.ids));
      CHECK(cudaFree(d.ranks));
      CHECK(cudaFree(d.cu));
      CHECK(cudaFree(d.scores));
    }
  }
  std::printf("%s: %d mismatching configurations\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
