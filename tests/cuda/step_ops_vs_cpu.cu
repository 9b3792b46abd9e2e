// speculate_verify_greedy and speculate_step_update: their CUDA launchers against their CPU
// implementations, at the kernel layer (no Paddle), bit for bit on every tensor the two ops touch.
// Random batches, each run eagerly and as one captured CUDA graph of both ops; the full run then times
// one step's two ops at runner sizes from graph replays. Usage and exit status: tests/cuda/harness.cuh.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "harness.cuh"
#include "speculate_step_update/speculate_step_update.h"
#include "speculate_verify_greedy/speculate_verify_greedy.h"

namespace {

using harness::DevVec;

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

struct Params {
  fdspec::SpeculateVerifyGreedyParams verify;
  fdspec::SpeculateStepUpdateParams update;
};

// The tensors of a step, on the device (host memory in the self-test).
struct DeviceStep {
  DevVec<int64_t> target, drafts, accept, ids, prompt, step, max_dec, ends;
  DevVec<int32_t> accept_num, slt, enc, dec;
  DevVec<uint8_t> stop;
  explicit DeviceStep(const Step& s)
      : target(s.target), drafts(s.drafts), accept(s.accept), ids(s.ids), prompt(s.prompt), step(s.step),
        max_dec(s.max_dec), ends(s.ends), accept_num(s.accept_num), slt(s.slt), enc(s.enc), dec(s.dec),
        stop(s.stop) {}
  Step download(const Step& shape) const {
    Step s{shape.B, shape.W, shape.K1};
    s.target = target.download(); s.drafts = drafts.download(); s.accept = accept.download();
    s.ids = ids.download(); s.prompt = prompt.download(); s.step = step.download();
    s.max_dec = max_dec.download(); s.ends = ends.download(); s.accept_num = accept_num.download();
    s.slt = slt.download(); s.enc = enc.download(); s.dec = dec.download(); s.stop = stop.download();
    return s;
  }
};

Params params_of(int64_t B, int64_t W, int64_t K1, int64_t* target, int64_t* drafts, int64_t* accept,
                 int64_t* ids, int64_t* prompt, int64_t* step, int64_t* max_dec, int64_t* ends, int64_t n_ends,
                 int32_t* accept_num, int32_t* slt, int32_t* enc, int32_t* dec, uint8_t* stop_bytes) {
  bool* stop = reinterpret_cast<bool*>(stop_bytes);
  Params r;
  r.verify = {target, drafts, accept, accept_num, K1, step, stop, slt, enc, dec, max_dec, ends, n_ends, B};
  r.update = {accept, accept_num, K1, ids, W, prompt, step, max_dec, ends, n_ends, stop, slt, enc, dec, drafts, B};
  return r;
}

Params host_params(Step& s) {
  return params_of(s.B, s.W, s.K1, s.target.data(), s.drafts.data(), s.accept.data(), s.ids.data(),
                   s.prompt.data(), s.step.data(), s.max_dec.data(), s.ends.data(),
                   static_cast<int64_t>(s.ends.size()), s.accept_num.data(), s.slt.data(), s.enc.data(),
                   s.dec.data(), s.stop.data());
}

Params device_params(const Step& s, const DeviceStep& d) {
  return params_of(s.B, s.W, s.K1, d.target.ptr(), d.drafts.ptr(), d.accept.ptr(), d.ids.ptr(), d.prompt.ptr(),
                   d.step.ptr(), d.max_dec.ptr(), d.ends.ptr(), static_cast<int64_t>(s.ends.size()),
                   d.accept_num.ptr(), d.slt.ptr(), d.enc.ptr(), d.dec.ptr(), d.stop.ptr());
}

// Both GPU launchers; in the self-test the CPU implementations, perturbed on request.
cudaError_t launch(const Params& p, cudaStream_t stream) {
  auto& st = harness::selftest();
  if (!st.host_backend) {
    const cudaError_t e = fdspec::speculate_verify_greedy_gpu(p.verify, stream);
    return e != cudaSuccess ? e : fdspec::speculate_step_update_gpu(p.update, stream);
  }
  fdspec::speculate_verify_greedy_cpu(p.verify);
  fdspec::speculate_step_update_cpu(p.update);
  const fdspec::SpeculateStepUpdateParams& u = p.update;
  if (u.batch > 0) harness::perturb(u.seq_lens_decoder[u.batch - 1], u.token_ids_all[u.batch * u.token_ids_stride - 1]);
  return cudaSuccess;
}

bool same(const Step& a, const Step& b) {
  return a.accept == b.accept && a.accept_num == b.accept_num && a.ids == b.ids && a.step == b.step &&
         a.stop == b.stop && a.slt == b.slt && a.enc == b.enc && a.dec == b.dec && a.drafts == b.drafts;
}

// Device time of one step's two ops at runner sizes, from replays of a graph of 100 steps.
void print_timings(const harness::Stream& stream) {
  std::printf("%6s %4s %12s\n", "B", "K", "us/step");
  for (int64_t B : {8, 64, 256, 1024}) {
    for (int64_t K : {1, 5}) {
      std::mt19937_64 rng(B + K);
      const Step s = random_step(rng, B, K, 4096);
      const DeviceStep d(s);
      const Params p = device_params(s, d);
      const harness::Graph graph(stream.get(), [&](cudaStream_t st) {
        for (int i = 0; i < 100; ++i) {
          const cudaError_t e = launch(p, st);
          if (e != cudaSuccess) return e;
        }
        return cudaSuccess;
      });
      cudaEvent_t t0, t1;
      CHECK(cudaEventCreate(&t0));
      CHECK(cudaEventCreate(&t1));
      graph.replay(stream.get());
      std::vector<float> ms;
      for (int r = 0; r < 11; ++r) {
        CHECK(cudaEventRecord(t0, stream.get()));
        graph.replay(stream.get());
        CHECK(cudaEventRecord(t1, stream.get()));
        CHECK(cudaEventSynchronize(t1));
        float m;
        CHECK(cudaEventElapsedTime(&m, t0, t1));
        ms.push_back(m);
      }
      std::sort(ms.begin(), ms.end());
      std::printf("%6ld %4ld %12.2f\n", (long)B, (long)K, 1000.0 * ms[ms.size() / 2] / 100);
      CHECK(cudaEventDestroy(t0));
      CHECK(cudaEventDestroy(t1));
    }
  }
}

void body(harness::Tally& t, bool quick) {
  const harness::Stream stream;
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
          const Params pc = host_params(cpu);
          fdspec::speculate_verify_greedy_cpu(pc.verify);
          fdspec::speculate_step_update_cpu(pc.update);
          for (int graph = 0; graph < 2; ++graph) {
            const DeviceStep d(input);
            const Params pg = device_params(input, d);
            harness::run_case(
                t, stream,
                [&](cudaStream_t s) { harness::launch_once(s, graph, [&](cudaStream_t x) { return launch(pg, x); }); },
                [&] {
                  if (same(cpu, d.download(input))) return std::string();
                  char what[128];
                  std::snprintf(what, sizeof(what), "B=%ld K=%ld W=%ld seed=%d graph=%d", (long)B, (long)K,
                                (long)W, seed, graph);
                  return std::string(what);
                });
          }
        }
      }
    }
  }
  if (!quick && !harness::selftest().host_backend) print_timings(stream);
}

}  // namespace

int main(int argc, char** argv) {
  const harness::Mode mode = harness::parse_mode(argc, argv);
  return harness::run_harness("step_ops_vs_cpu", mode, [&](harness::Tally& t) { body(t, mode.quick); });
}
