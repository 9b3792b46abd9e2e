// Paddle-free harness for the kernel layers of speculate_verify_greedy and speculate_step_update:
// random batches run on the GPU (eagerly, then as one captured CUDA graph of both ops) and compared bit
// for bit with the CPU implementations. It exists to run the kernels on a GPU machine without Paddle.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -DFDSPEC_WITH_CUDA -Icustom_ops scripts/dev/step_ops_harness.cu \
//        custom_ops/speculate_verify_greedy/speculate_verify_greedy{.cu,_cpu.cc} \
//        custom_ops/speculate_step_update/speculate_step_update{.cu,_cpu.cc} -o build/step_ops_harness
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "speculate_step_update/speculate_step_update.h"
#include "speculate_verify_greedy/speculate_verify_greedy.h"

#define CHECK(x)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

// Host arrays of one step; bools as uint8_t so that std::vector gives contiguous storage.
struct Step {
  int64_t B, W, K1;
  std::vector<int64_t> target, drafts, accept, ids, prompt, step, max_dec, ends;
  std::vector<int32_t> accept_num, slt, enc, dec;
  std::vector<uint8_t> stop;
};

Step random_step(std::mt19937_64& rng, int64_t B, int64_t K, int64_t W) {
  auto u = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Step s{B, W, K + 1};
  const int64_t vocab = u(2, 4);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t agree = u(0, K);
    for (int64_t j = 0; j <= K; ++j) {
      s.target.push_back(u(0, vocab - 1));
      s.drafts.push_back(u(0, vocab - 1));
      s.accept.push_back(-7);
    }
    for (int64_t j = 0; j < agree; ++j) s.drafts[b * (K + 1) + j + 1] = s.target[b * (K + 1) + j];
    for (int64_t w = 0; w < W; ++w) s.ids.push_back(u(10, 20));
    s.prompt.push_back(u(-1, W + 1));
    s.step.push_back(u(-1, W / 2 + 1));
    s.max_dec.push_back(s.step.back() + u(-2, K + 3));
    s.accept_num.push_back(static_cast<int32_t>(u(-1, K + 2)));
    s.slt.push_back(static_cast<int32_t>(u(-1, K + 3)));
    s.enc.push_back(u(0, 4) == 0 ? static_cast<int32_t>(u(-2, 30)) : 0);
    const int32_t decs[] = {0, 0, 5, 17, -1};
    s.dec.push_back(decs[u(0, 4)]);
    s.stop.push_back(u(0, 6) == 0);
  }
  for (int64_t e = u(0, 2); e > 0; --e) s.ends.push_back(u(0, vocab));
  return s;
}

template <class T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  CHECK(cudaMalloc(&d, (v.size() + 1) * sizeof(T)));
  if (!v.empty()) CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <class T>
void download(std::vector<T>& v, const T* d) {
  if (!v.empty()) CHECK(cudaMemcpy(v.data(), d, v.size() * sizeof(T), cudaMemcpyDeviceToHost));
}

struct Params {
  fdspec::SpeculateVerifyGreedyParams verify;
  fdspec::SpeculateStepUpdateParams update;
};

Params params_of(Step& s, bool device, std::vector<void*>* allocs) {
  auto p = [&](auto& v) {
    using T = typename std::remove_reference_t<decltype(v)>::value_type;
    if (!device) return v.data();
    T* d = upload(v);
    allocs->push_back(d);
    return d;
  };
  Params r;
  int64_t* target = p(s.target); int64_t* drafts = p(s.drafts); int64_t* accept = p(s.accept);
  int64_t* ids = p(s.ids); int64_t* prompt = p(s.prompt); int64_t* step = p(s.step);
  int64_t* max_dec = p(s.max_dec); int64_t* ends = p(s.ends);
  int32_t* accept_num = p(s.accept_num); int32_t* slt = p(s.slt); int32_t* enc = p(s.enc);
  int32_t* dec = p(s.dec);
  bool* stop = reinterpret_cast<bool*>(p(s.stop));
  r.verify = {target, drafts, accept, accept_num, s.K1, step, stop, slt, enc, dec, max_dec, ends,
              static_cast<int64_t>(s.ends.size()), s.B};
  r.update = {accept, accept_num, s.K1, ids, s.W, prompt, step, max_dec, ends,
              static_cast<int64_t>(s.ends.size()), stop, slt, enc, dec, drafts, s.B};
  return r;
}

void fetch(Step& s, const std::vector<void*>& a) {
  // Order of params_of's uploads.
  download(s.target, (int64_t*)a[0]); download(s.drafts, (int64_t*)a[1]);
  download(s.accept, (int64_t*)a[2]); download(s.ids, (int64_t*)a[3]);
  download(s.prompt, (int64_t*)a[4]); download(s.step, (int64_t*)a[5]);
  download(s.max_dec, (int64_t*)a[6]); download(s.ends, (int64_t*)a[7]);
  download(s.accept_num, (int32_t*)a[8]); download(s.slt, (int32_t*)a[9]);
  download(s.enc, (int32_t*)a[10]); download(s.dec, (int32_t*)a[11]);
  download(s.stop, (uint8_t*)a[12]);
}

bool same(const Step& a, const Step& b) {
  return a.accept == b.accept && a.accept_num == b.accept_num && a.ids == b.ids && a.step == b.step &&
         a.stop == b.stop && a.slt == b.slt && a.enc == b.enc && a.dec == b.dec && a.drafts == b.drafts;
}

int main(int argc, char** argv) {
  // "quick": a small grid and no timing, for compute-sanitizer (tests/cuda/run_cuda_checks.sh).
  const bool quick = argc > 1 && std::string(argv[1]) == "quick";
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int cases = 0, failures = 0;
  const std::vector<int64_t> batches = quick ? std::vector<int64_t>{0, 1, 7, 130}
                                             : std::vector<int64_t>{0, 1, 3, 7, 33, 130, 1000};
  const std::vector<int64_t> draft_counts = quick ? std::vector<int64_t>{0, 1, 5} : std::vector<int64_t>{0, 1, 5, 40};
  const std::vector<int64_t> widths = quick ? std::vector<int64_t>{8} : std::vector<int64_t>{8, 64};
  const int seeds = quick ? 3 : 20;
  for (int64_t B : batches) {
    for (int64_t K : draft_counts) {
      for (int64_t W : widths) {
        for (int seed = 0; seed < seeds; ++seed) {
          std::mt19937_64 rng(B * 1000003 + K * 1009 + W * 17 + seed);
          const Step input = random_step(rng, B, K, W);
          Step cpu = input;
          const Params pc = params_of(cpu, false, nullptr);
          fdspec::speculate_verify_greedy_cpu(pc.verify);
          fdspec::speculate_step_update_cpu(pc.update);

          for (int graph = 0; graph < 2; ++graph) {
            Step gpu = input;
            std::vector<void*> allocs;
            const Params pg = params_of(gpu, true, &allocs);
            if (graph) {
              cudaGraph_t g;
              cudaGraphExec_t exec;
              CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
              CHECK(fdspec::speculate_verify_greedy_gpu(pg.verify, stream));
              CHECK(fdspec::speculate_step_update_gpu(pg.update, stream));
              CHECK(cudaStreamEndCapture(stream, &g));
              CHECK(cudaGraphInstantiateWithFlags(&exec, g, 0));
              CHECK(cudaGraphLaunch(exec, stream));
              CHECK(cudaGraphExecDestroy(exec));
              CHECK(cudaGraphDestroy(g));
            } else {
              CHECK(fdspec::speculate_verify_greedy_gpu(pg.verify, stream));
              CHECK(fdspec::speculate_step_update_gpu(pg.update, stream));
            }
            CHECK(cudaStreamSynchronize(stream));
            fetch(gpu, allocs);
            for (void* d : allocs) CHECK(cudaFree(d));
            ++cases;
            if (!same(cpu, gpu)) {
              ++failures;
              if (failures < 10)
                std::printf("MISMATCH B=%ld K=%ld W=%ld seed=%d graph=%d\n", (long)B, (long)K, (long)W,
                            seed, graph);
            }
          }
        }
      }
    }
  }
  std::printf("%d cases (eager and graph), %d mismatches between GPU and CPU\n", cases, failures);
  if (quick) {
    CHECK(cudaStreamDestroy(stream));
    std::printf("step_ops_harness quick: %s (%d cases, %d mismatches)\n", failures ? "FAIL" : "PASS", cases,
                failures);
    CHECK(cudaDeviceReset());  // memcheck's leak check needs the context torn down
    return failures ? 1 : 0;
  }

  // Device time of one step's two ops at runner sizes, from graph replays.
  std::printf("%6s %4s %12s\n", "B", "K", "us/step");
  for (int64_t B : {8, 64, 256, 1024}) {
    for (int64_t K : {1, 5}) {
      std::mt19937_64 rng(B + K);
      Step s = random_step(rng, B, K, 4096);
      std::vector<void*> allocs;
      const Params pg = params_of(s, true, &allocs);
      cudaGraph_t g;
      cudaGraphExec_t exec;
      CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < 100; ++i) {
        CHECK(fdspec::speculate_verify_greedy_gpu(pg.verify, stream));
        CHECK(fdspec::speculate_step_update_gpu(pg.update, stream));
      }
      CHECK(cudaStreamEndCapture(stream, &g));
      CHECK(cudaGraphInstantiateWithFlags(&exec, g, 0));
      cudaEvent_t t0, t1;
      CHECK(cudaEventCreate(&t0));
      CHECK(cudaEventCreate(&t1));
      CHECK(cudaGraphLaunch(exec, stream));
      std::vector<float> ms;
      for (int r = 0; r < 11; ++r) {
        CHECK(cudaEventRecord(t0, stream));
        CHECK(cudaGraphLaunch(exec, stream));
        CHECK(cudaEventRecord(t1, stream));
        CHECK(cudaEventSynchronize(t1));
        float m;
        CHECK(cudaEventElapsedTime(&m, t0, t1));
        ms.push_back(m);
      }
      std::sort(ms.begin(), ms.end());
      std::printf("%6ld %4ld %12.2f\n", (long)B, (long)K, 1000.0 * ms[ms.size() / 2] / 100);
      CHECK(cudaGraphExecDestroy(exec));
      CHECK(cudaGraphDestroy(g));
      for (void* d : allocs) CHECK(cudaFree(d));
      CHECK(cudaEventDestroy(t0));
      CHECK(cudaEventDestroy(t1));
    }
  }
  CHECK(cudaStreamDestroy(stream));
  std::printf("step_ops_harness full: %s (%d cases, %d mismatches)\n", failures ? "FAIL" : "PASS", cases, failures);
  return failures ? 1 : 0;
}
