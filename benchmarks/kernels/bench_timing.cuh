// Pieces shared by the Paddle-free kernel benchmarks (benchmarks/kernels/bench_*.cu): CUDA-graph
// replays timed with events (median over rounds), a read of a buffer larger than L2 that makes the
// next call's inputs cold, the command line, and the JSON of the results. Each benchmark is one
// translation unit that includes this once.
#pragma once

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "harness.cuh"

namespace bench {

// Reads a buffer larger than L2 (its sum goes nowhere unless it hits a magic value, so the compiler
// keeps the loads): what evicts the op's tokens from L2 before a cold call.
__global__ void flush_l2(const uint4* __restrict__ buf, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint4 v = buf[i];  // a plain load: it allocates in L2 (a streaming hint would not evict)
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}

struct Flusher {
  harness::DevBuf buf, sink;
  size_t n = 0;
  int blocks = 0;
  Flusher() {
    int dev = 0, l2 = 0, sms = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const size_t bytes = std::max<size_t>(size_t{5} * l2 / 2, size_t{128} << 20);
    buf = harness::DevBuf(bytes);
    sink = harness::DevBuf(sizeof(unsigned));
    CHECK(cudaMemset(buf.bytes(), 1, bytes));
    n = bytes / sizeof(uint4);
    blocks = sms * 4;
  }
  cudaError_t run(cudaStream_t st) const {
    flush_l2<<<blocks, 512, 0, st>>>(reinterpret_cast<const uint4*>(buf.bytes()), n,
                                     reinterpret_cast<unsigned*>(sink.bytes()));
    return cudaGetLastError();
  }
};

// Median over rounds of (time of `reps` replays of a graph of `calls` x body) / calls, in us.
inline double graph_us(cudaStream_t st, int calls, int reps, int rounds,
                       const std::function<cudaError_t(cudaStream_t)>& body) {
  harness::Graph g(st, [&](cudaStream_t s) {
    for (int i = 0; i < calls; ++i) {
      const cudaError_t e = body(s);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  g.replay(st);
  g.replay(st);
  CHECK(cudaStreamSynchronize(st));
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    CHECK(cudaEventRecord(e0, st));
    for (int i = 0; i < reps; ++i) g.replay(st);
    CHECK(cudaEventRecord(e1, st));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e3 / (double(calls) * reps));
  }
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A benchmark's command line: [--json FILE] [--quick | quick] and, where `only_help` is given,
// [--only NAME]. On a bad argument prints the usage and sets ok = false.
struct Options {
  const char* json = nullptr;
  bool quick = false;
  std::string only;
  bool ok = true;
};

inline Options parse_options(int argc, char** argv, const char* only_help = nullptr) {
  Options o;
  for (int i = 1; i < argc && o.ok; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) {
      o.json = argv[++i];
    } else if (only_help != nullptr && a == "--only" && i + 1 < argc) {
      o.only = argv[++i];
    } else if (a == "--quick" || a == "quick") {
      o.quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE]%s%s%s [--quick]\n", argv[0],
                   only_help ? " [--only " : "", only_help ? only_help : "", only_help ? "]" : "");
      o.ok = false;
    }
  }
  return o;
}

// printf into a std::string.
inline std::string format(const char* fmt, ...) {
  va_list a, b;
  va_start(a, fmt);
  va_copy(b, a);
  const int n = std::vsnprintf(nullptr, 0, fmt, a);
  va_end(a);
  std::string s(n > 0 ? n : 0, '\0');
  std::vsnprintf(&s[0], s.size() + 1, fmt, b);
  va_end(b);
  return s;
}

// Writes a benchmark's results to `path`: {"device": ..., then `head` (more top-level fields, each
// followed by ", "), then "rows": [row(0), ..., row(n - 1)]}, one row a line. False when the file
// cannot be written.
inline bool write_json(const char* path, const char* device, const std::string& head, size_t n,
                       const std::function<std::string(size_t)>& row) {
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\"device\": \"%s\", %s\"rows\": [\n", device, head.c_str());
  for (size_t i = 0; i < n; ++i) std::fprintf(f, "  %s%s\n", row(i).c_str(), i + 1 < n ? "," : "");
  std::fprintf(f, "]}\n");
  return std::fclose(f) == 0;
}

}  // namespace bench
