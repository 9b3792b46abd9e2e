// Benchmark of speculate_sample_tokens' CUDA launcher (no Paddle): the target's tokens of B (K + 1)
// verification rows, K = 5, B in {64, 256}, V = 152064, float32 and bfloat16, against a
// device-to-device copy of the same logits in the same run (its time / 2 is one read of the logits
// at the measured copy bandwidth: the bound is 1.5 x that).
//
// Rows (generated on the device):
//   peaked: a language model's shape: a N(0, 2) body and about 0.2 % of the entries 14..20 higher
//           (the top-p set is a handful of entries: the candidate list decides);
//   broad:  N(0, 1) (the top-p set holds tens of thousands of entries: the slow path decides).
// Parameters: temperature 0.8, top-p 0.9, top-k 0 (and top-k 50 on peaked rows), one seed per slot.
// warm: graph replays back to back; cold: each call after a read of max(128 MB, 2.5 x L2), whose
// time alone is subtracted. Medians of rounds.
//
//   bash benchmarks/kernels/build.sh 90a build bench_sample_tokens
//   build/bench_sample_tokens [--quick] [--json FILE]
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_timing.cuh"
#include "speculate_sample_tokens/speculate_sample_tokens.h"

using fdspec::LogitsDType;

namespace {

__global__ void fill_logits(void* out, LogitsDType dtype, int64_t n, bool broad, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const fdspec::Philox4x32 d =
        fdspec::philox_draw(seed, static_cast<uint64_t>(i), fdspec::RngStream::kSample, 7);
    const float u1 = (static_cast<float>(d.v[0] >> 8) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>(d.v[1] >> 8) * (1.0f / 16777216.0f);
    float x = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * (broad ? 1.0f : 2.0f);
    if (!broad && d.v[2] < 8589935u)
      x += 14.0f + 6.0f * (static_cast<float>(d.v[3] >> 8) * (1.0f / 16777216.0f));
    if (dtype == LogitsDType::kFloat32) {
      static_cast<float*>(out)[i] = x;
    } else {
      static_cast<uint16_t*>(out)[i] =
          static_cast<uint16_t>(__float_as_uint(x) >> 16);  // truncation is fine here
    }
  }
}

struct Row {
  std::string dtype, rows;
  int64_t B, N;
  int top_k;
  double warm, cold, copy, copy_cold;
};

}  // namespace

int main(int argc, char** argv) {
  const bench::Options opt = bench::parse_options(argc, argv);
  if (!opt.ok) return 2;
  const int64_t K = 5, V = 152064;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  harness::Stream stream;
  const cudaStream_t st = stream.get();
  bench::Flusher fl;
  std::vector<Row> out;
  const int rounds = opt.quick ? 3 : 9, reps = opt.quick ? 2 : 10, calls = 4;
  for (LogitsDType dtype : {LogitsDType::kFloat32, LogitsDType::kBFloat16}) {
    for (int64_t B : {int64_t{64}, int64_t{256}}) {
      const int64_t N = B * (K + 1);
      const size_t bytes = static_cast<size_t>(N * V * fdspec::logits_dtype_size(dtype));
      harness::DevBuf logits(bytes), copy_dst(bytes);
      std::vector<int32_t> cu(B + 1);
      std::vector<int64_t> step(B), seed(B);
      for (int64_t b = 0; b <= B; ++b) cu[b] = static_cast<int32_t>(b * (K + 1));
      for (int64_t b = 0; b < B; ++b) {
        step[b] = 100 + 7 * b;
        seed[b] = 1000003 * b + 17;
      }
      harness::DevVec<int32_t> d_cu(cu);
      harness::DevVec<int64_t> d_step(step), d_seed(seed), d_out(std::vector<int64_t>(N, 0));
      harness::DevVec<float> d_temp(std::vector<float>(B, 0.8f)),
          d_topp(std::vector<float>(B, 0.9f));
      for (const char* rows : {"peaked", "broad"}) {
        const bool broad = std::string(rows) == "broad";
        fill_logits<<<prop.multiProcessorCount * 8, 256, 0, st>>>(logits.bytes(), dtype, N * V,
                                                                  broad, 51);
        CHECK(cudaGetLastError());
        for (int top_k : {0, 50}) {
          if (broad && top_k) continue;
          harness::DevVec<int64_t> d_topk(std::vector<int64_t>(B, top_k));
          fdspec::SampleTokensParams p{logits.bytes(),
                                       dtype,
                                       N,
                                       V,
                                       d_cu.ptr(),
                                       B,
                                       d_step.ptr(),
                                       d_seed.ptr(),
                                       d_temp.ptr(),
                                       d_topp.ptr(),
                                       d_topk.ptr(),
                                       nullptr,
                                       d_out.ptr()};
          const auto sample = [&](cudaStream_t s) { return fdspec::sample_tokens_gpu(p, s); };
          const auto copy = [&](cudaStream_t s) {
            return cudaMemcpyAsync(copy_dst.bytes(), logits.bytes(), bytes,
                                   cudaMemcpyDeviceToDevice, s);
          };
          const auto flush_only = [&](cudaStream_t s) { return fl.run(s); };
          const auto cold_of = [&](const std::function<cudaError_t(cudaStream_t)>& f) {
            return [&, f](cudaStream_t s) {
              const cudaError_t e = fl.run(s);
              return e != cudaSuccess ? e : f(s);
            };
          };
          Row r{fdspec::logits_dtype_size(dtype) == 4 ? "float32" : "bfloat16",
                rows,
                B,
                N,
                top_k,
                0,
                0,
                0,
                0};
          r.warm = bench::graph_us(st, calls, reps, rounds, sample);
          r.copy = bench::graph_us(st, calls, reps, rounds, copy);
          const double flush_us = bench::graph_us(st, calls, reps, rounds, flush_only);
          r.cold = bench::graph_us(st, calls, reps, rounds, cold_of(sample)) - flush_us;
          r.copy_cold = bench::graph_us(st, calls, reps, rounds, cold_of(copy)) - flush_us;
          const double read = r.copy / 2;
          std::printf(
              "%-8s B=%3lld N=%4lld %-6s top_k=%2d: sampler warm %8.1f us cold %8.1f us | copy "
              "%8.1f us "
              "(%.0f GB/s) -> one read %7.1f us | sampler / one read: warm %.2f cold %.2f | %.0f "
              "GB/s\n",
              r.dtype.c_str(), (long long)B, (long long)N, rows, top_k, r.warm, r.cold, r.copy,
              2.0 * bytes / r.copy * 1e-3, read, r.warm / read, r.cold / read,
              bytes / r.warm * 1e-3);
          std::fflush(stdout);
          out.push_back(r);
        }
      }
    }
  }
  std::printf("\ndevice: %s (%d SMs, L2 %d MB)\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  std::printf(
      "| dtype | B | rows N | logits | top-k | sampler warm us | sampler cold us | copy us | one "
      "read us | "
      "warm / read | cold / read |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : out) {
    const double read = r.copy / 2;
    std::printf("| %s | %lld | %lld | %s | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n",
                r.dtype.c_str(), (long long)r.B, (long long)r.N, r.rows.c_str(), r.top_k, r.warm,
                r.cold, r.copy, read, r.warm / read, r.cold / read);
  }
  auto row = [&](size_t i) {
    const Row& r = out[i];
    return bench::format(
        "{\"dtype\": \"%s\", \"B\": %lld, \"N\": %lld, \"logits\": \"%s\", \"top_k\": %d, "
        "\"sampler_us\": %.3f, \"sampler_cold_us\": %.3f, \"copy_us\": %.3f, \"copy_cold_us\": "
        "%.3f}",
        r.dtype.c_str(), (long long)r.B, (long long)r.N, r.rows.c_str(), r.top_k, r.warm, r.cold,
        r.copy, r.copy_cold);
  };
  const std::string head = bench::format("\"V\": %lld, \"K\": %lld, ", (long long)V, (long long)K);
  if (opt.json != nullptr && !bench::write_json(opt.json, prop.name, head, out.size(), row))
    return 2;
  return 0;  // no cudaDeviceReset: the stream and the flush buffer are released after it otherwise
}
