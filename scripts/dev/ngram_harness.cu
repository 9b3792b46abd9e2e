// Paddle-free harness for the ngram_match kernel layer: random batches compared bit for bit with the
// CPU implementation, then device time of the benchmark's headline sizes from CUDA-graph replays.
// It exists to iterate on the kernels on a GPU machine without installing Paddle there.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -DFDSPEC_WITH_CUDA -Icustom_ops -I$CUDA_HOME/include/cccl \
//        scripts/dev/ngram_harness.cu custom_ops/ngram_match/ngram_match.cu \
//        custom_ops/ngram_match/ngram_match_cpu.cc -o build/ngram_harness
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "ngram_match/ngram_match.h"

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

struct Batch {
  int64_t B, W, K1;
  std::vector<int64_t> ids, prompt, step, max_dec, drafts;
  std::vector<int32_t> dtn, slt, enc, dec;
};

template <class T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  CHECK(cudaMalloc(&d, std::max<size_t>(v.size(), 1) * sizeof(T)));
  if (!v.empty()) CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <class T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> v(n);
  if (n) CHECK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

fdspec::NgramMatchParams host_params(Batch& b, int max_n, int64_t T) {
  fdspec::NgramMatchParams p;
  p.token_ids_all = b.ids.data(); p.token_ids_stride = b.W; p.prompt_lens = b.prompt.data();
  p.step_idx = b.step.data(); p.draft_token_num = b.dtn.data(); p.draft_tokens = b.drafts.data();
  p.draft_stride = b.K1; p.seq_lens_this_time = b.slt.data(); p.seq_lens_encoder = b.enc.data();
  p.seq_lens_decoder = b.dec.data(); p.max_dec_len = b.max_dec.data(); p.batch = b.B;
  p.max_ngram_size = max_n; p.threshold = T;
  return p;
}

struct DeviceBatch {
  fdspec::NgramMatchParams p;
  int64_t* drafts; int32_t* slt;
};

DeviceBatch to_device(const Batch& b, int max_n, int64_t T) {
  DeviceBatch d;
  d.p.token_ids_all = upload(b.ids); d.p.token_ids_stride = b.W; d.p.prompt_lens = upload(b.prompt);
  d.p.step_idx = upload(b.step); d.p.draft_token_num = upload(b.dtn);
  d.drafts = upload(b.drafts); d.p.draft_tokens = d.drafts; d.p.draft_stride = b.K1;
  d.slt = upload(b.slt); d.p.seq_lens_this_time = d.slt; d.p.seq_lens_encoder = upload(b.enc);
  d.p.seq_lens_decoder = upload(b.dec); d.p.max_dec_len = upload(b.max_dec); d.p.batch = b.B;
  d.p.max_ngram_size = max_n; d.p.threshold = T;
  return d;
}

Batch random_batch(std::mt19937_64& rng, int64_t B, int64_t W, int64_t K1, int vocab) {
  Batch b{B, W, K1};
  auto U = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  b.ids.assign(B * W, -1);
  for (int64_t i = 0; i < B; ++i) {
    const int64_t P = U(0, W), s = U(0, W - P);
    for (int64_t j = 0; j < P + s; ++j) b.ids[i * W + j] = U(0, vocab - 1);
    b.prompt.push_back(U(0, 9) == 0 ? U(-3, W + 3) : P);
    b.step.push_back(U(0, 9) == 0 ? U(-3, W + 3) : s);
    b.max_dec.push_back(U(0, 3) == 0 ? U(0, P + s + 3) : W * 2);
    b.dtn.push_back(static_cast<int32_t>(U(0, 7) == 0 ? U(-1, K1 + 2) : K1 - 1));
    const int64_t kind = U(0, 5);
    b.enc.push_back(kind == 0 ? static_cast<int32_t>(U(1, 50)) : 0);
    b.dec.push_back(kind == 1 ? 0 : (kind == 2 ? static_cast<int32_t>(U(-2, 2)) : static_cast<int32_t>(P + s)));
    b.slt.push_back(static_cast<int32_t>(U(-1, 60)));
    for (int64_t k = 0; k < K1; ++k) b.drafts.push_back(U(-5, 5));
  }
  return b;
}

int check_random(int cases) {
  std::mt19937_64 rng(1234);
  int bad = 0;
  for (int c = 0; c < cases; ++c) {
    auto U = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    const int64_t B = U(0, 300), W = U(1, c % 10 == 0 ? 20000 : 600), K1 = U(1, 9);
    const int vocab = static_cast<int>(U(2, c % 3 == 0 ? 1000 : 6));
    const int max_n = static_cast<int>(U(1, c % 5 == 0 ? 9 : 5));
    const int64_t T = U(0, 4) == 0 ? (int64_t{1} << 40) : U(0, 3 * B + 20);
    Batch b = random_batch(rng, B, W, K1, vocab);
    DeviceBatch d = to_device(b, max_n, T);
    Batch ref = b;
    fdspec::ngram_match_cpu(host_params(ref, max_n, T));
    CHECK(fdspec::ngram_match_gpu(d.p, 0));
    CHECK(cudaDeviceSynchronize());
    const auto drafts = download(d.drafts, b.drafts.size());
    const auto slt = download(d.slt, b.slt.size());
    if (drafts != ref.drafts || slt != ref.slt) {
      if (bad < 5) std::printf("MISMATCH case %d: B=%lld W=%lld K1=%lld vocab=%d max_n=%d T=%lld\n", c,
                               (long long)B, (long long)W, (long long)K1, vocab, max_n, (long long)T);
      ++bad;
    }
  }
  std::printf("random cases: %d, mismatches: %d\n", cases, bad);
  return bad;
}

// The benchmark's layout: prompt 3/4 W, W/8 generated, a unique 3-gram planted at `at` (or nowhere).
Batch bench_batch(int64_t B, int64_t W, double at) {
  std::mt19937_64 rng(7);
  Batch b{B, W, 6};
  const int64_t P = 3 * W / 4, s = W / 8;
  b.ids.assign(B * W, -1);
  for (int64_t i = 0; i < B; ++i) {
    int64_t* row = b.ids.data() + i * W;
    for (int64_t j = 0; j < P + s; ++j) row[j] = static_cast<int64_t>(rng() % 50000);
    for (int k = 0; k < 3; ++k) row[P + s - 3 + k] = 50000 + 3 * i + k;
    if (at >= 0) {
      const int64_t pos = static_cast<int64_t>(at * P);
      for (int k = 0; k < 3; ++k) row[pos + k] = 50000 + 3 * i + k;
    }
    b.prompt.push_back(P); b.step.push_back(s); b.max_dec.push_back(int64_t{1} << 40);
    b.dtn.push_back(5); b.enc.push_back(0); b.dec.push_back(static_cast<int32_t>(P + s)); b.slt.push_back(1);
    for (int k = 0; k < 6; ++k) b.drafts.push_back(0);
  }
  return b;
}

void time_case(int64_t B, int64_t W, double at, const char* name, int64_t T = int64_t{1} << 40) {
  Batch b = bench_batch(B, W, at);
  DeviceBatch d = to_device(b, 3, T);
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  for (int i = 0; i < 3; ++i) CHECK(fdspec::ngram_match_gpu(d.p, st));
  CHECK(cudaStreamSynchronize(st));
  constexpr int kCalls = 20, kReps = 10, kRounds = 15;
  cudaGraph_t g; cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kCalls; ++i) CHECK(fdspec::ngram_match_gpu(d.p, st));
  CHECK(cudaStreamEndCapture(st, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0)); CHECK(cudaEventCreate(&e1));
  CHECK(cudaGraphLaunch(ge, st));
  std::vector<float> t;
  for (int r = 0; r < kRounds; ++r) {
    CHECK(cudaEventRecord(e0, st));
    for (int i = 0; i < kReps; ++i) CHECK(cudaGraphLaunch(ge, st));
    CHECK(cudaEventRecord(e1, st));
    CHECK(cudaEventSynchronize(e1));
    float ms; CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e3f / (kCalls * kReps));
  }
  std::sort(t.begin(), t.end());
  const double bytes = double(B) * (3 * W / 4 + W / 8) * 8;
  std::printf("B=%4lld W=%7lld %-5s  %8.2f us/call  (min %.2f)  %6.0f GB/s if all read\n", (long long)B,
              (long long)W, name, t[t.size() / 2], t[0], bytes / (t[t.size() / 2] * 1e3));
}

// A few plain launches of the headline case, for a profiler (ncu) to time each kernel.
void profile_once() {
  for (int64_t T : {int64_t{1} << 40, int64_t{0}}) {
    Batch b = bench_batch(64, 1 << 15, 0.9);
    DeviceBatch d = to_device(b, 3, T);
    for (int i = 0; i < 3; ++i) CHECK(fdspec::ngram_match_gpu(d.p, 0));
    CHECK(cudaDeviceSynchronize());
  }
}

int main(int argc, char** argv) {
  if (argc > 2) {
    profile_once();
    return 0;
  }
  const int cases = argc > 1 ? std::atoi(argv[1]) : 2000;
  int bad = check_random(cases);
  const int64_t Bs[] = {1, 8, 64, 256};
  const int64_t Ws[] = {1 << 10, 1 << 13, 1 << 15, 1 << 17};
  for (int64_t B : Bs)
    for (int64_t W : Ws) {
      time_case(B, W, 0.01, "early");
      time_case(B, W, 0.90, "late");
      time_case(B, W, -1.0, "none");
    }
  time_case(64, 1 << 15, 0.9, "T=0 (all give up: the op's fixed cost)", 0);
  return bad ? 1 : 0;
}
