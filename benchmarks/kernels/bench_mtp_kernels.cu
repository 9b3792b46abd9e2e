// Device time of the MTP proposer's own kernels per decode step (issue 17), at the kernel layer (no
// Paddle): exactly the sequence MTPProposer.run + accept launches, the draft model's forward
// excluded (its float32 logits are prepared on the device, one [B, V] tensor per draft-model step):
//
//   draft_model_accept_preprocess, (draft_model_greedy_update) x model steps, [hybrid_mtp_ngram]
//
// (the proposer's default: the previous step's accept fused with this step's start) or, with
// --accept-at-once (MTPProposer(defer_accept=False)):
//
//   draft_model_greedy_preprocess, (draft_model_greedy_update) x model steps, [hybrid_mtp_ngram],
//   draft_model_accept
//
// on the inputs of the mtp routine (benchmarks/mtp.py): B slots, all decoding, K = 5, V = 32000, W
// = 8192 with a prompt of 3/4 W whose late part continues the newest generated tokens (the n-gram
// extension searches the whole prompt and finds a match), hybrid threshold not binding, accept_num
// 0 (a step leaves the state as it found it, so replays need no reset).
//
// - warm: a CUDA graph of 20 back-to-back steps, replayed; per-step time from CUDA events around
// the
//   replays, median over rounds;
// - cold: before each step the graph reads a buffer of max(128 MB, 2.5 x L2), timed alone in a
// second
//   graph and subtracted.
// - breakdown: each kernel alone in its own graph of 20 calls (update and hybrid_mtp_ngram change
// what
//   they read, so each of their calls is preceded by a tiny restore kernel, timed alone and
//   subtracted), warm.
// Every row is checked against the CPU implementations after one step and again after the timed
// replays (all outputs and the draft side's state, bit for bit). Exits 1 on a mismatch.
//
//   bash benchmarks/kernels/build.sh 90a build bench_mtp_kernels   # nvcc, from the repository root
//   build/bench_mtp_kernels [--accept-at-once] [--quick] [--json FILE]
//   build/bench_mtp_kernels --profile B STEPS NGRAM   (3 plain steps and the check, for nsys / ncu)
// or HARNESSES=bench_mtp_kernels TOOLS= bash tests/cuda/run_cuda_checks.sh
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_utils.cuh"
#include "bench_timing.cuh"
#include "draft_model/draft_model.h"
#include "proposer_params.cuh"
#include "harness.cuh"
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"

namespace {

using harness::DevVec;

constexpr int64_t kK = 5;
constexpr int64_t kV = 32000;
constexpr int64_t kW = 8192;
constexpr int64_t kPrompt = 3 * kW / 4;
constexpr int64_t kGenerated = 512;
constexpr int kMaxNgram = 3;
constexpr int kMinNgram = 1;
constexpr int64_t kNonBinding = int64_t{1} << 40;

bool g_defer_accept =
    true;  // the step starts with draft_model_accept_preprocess (--accept-at-once: not)

// One row's host state: the runner's share-inputs (ids .. stop, a bool per byte), the draft side's
// buffers (pre .. mtp_num), the logits.
// clang-format off
#define STEP_ARRAYS(X)                                                                     \
  X(int64_t, ids) X(int64_t, prompt_lens) X(int64_t, max_dec_len) X(int64_t, draft_tokens) \
  X(int64_t, accept_tokens) X(int32_t, slt) X(int32_t, enc) X(int32_t, dec)                \
  X(int32_t, accept_num) X(int32_t, actual_dtn) X(uint8_t, stop) X(int64_t, pre)           \
  X(int64_t, step) X(int64_t, d_max_dec_len) X(int64_t, input_ids) X(int32_t, d_dec)       \
  X(int32_t, mtp_num)
// clang-format on
struct State {
  int64_t B = 0;
  int steps = 1;
  bool ngram = false;
  HARNESS_VECTORS(STEP_ARRAYS)
  std::vector<std::vector<float>> logits;
};

State make_state(int64_t B, int steps, bool ngram) {
  std::mt19937_64 rng(11 + B);
  State s;
  s.B = B;
  s.steps = steps;
  s.ngram = ngram;
  s.ids.assign(B * kW, -1);
  s.pre.assign(B * kW, -1);
  const int64_t at = static_cast<int64_t>(0.9 * kPrompt);
  for (int64_t b = 0; b < B; ++b) {
    int64_t* row = s.ids.data() + b * kW;
    int64_t* pre = s.pre.data() + b * kW;
    for (int64_t j = 0; j < kPrompt; ++j) row[j] = static_cast<int64_t>(rng() % kV);
    for (int64_t j = 0; j < kGenerated; ++j)
      row[kPrompt + j] = pre[1 + j] = static_cast<int64_t>(rng() % kV);
    // The newest 3 generated tokens also occur 90% into the prompt: a late hit.
    for (int k = 0; k < 3; ++k) row[at + k] = pre[kGenerated - 2 + k];
  }
  s.prompt_lens.assign(B, kPrompt);
  s.max_dec_len.assign(B, kW - kPrompt);
  s.draft_tokens.assign(B * (kK + 1), 0);
  s.accept_tokens.assign(B * (kK + 1), 0);
  s.slt.assign(B, 1);
  s.enc.assign(B, 0);
  s.dec.assign(B, static_cast<int32_t>(kPrompt + kGenerated));
  s.accept_num.assign(B, 0);
  s.actual_dtn.assign(B, static_cast<int32_t>(kK));
  s.stop.assign(B, 0);
  s.step.assign(B, kGenerated);
  s.d_max_dec_len.assign(B, 0);
  s.input_ids.assign(B, 0);
  s.d_dec.assign(B, 0);
  s.mtp_num.assign(B, 0);
  std::normal_distribution<float> nd;
  s.logits.resize(steps);
  for (auto& l : s.logits) {
    l.resize(B * kV);
    for (float& x : l) x = nd(rng);
  }
  return s;
}

// Parameter structs of the step's ops over one set of pointers (host or device).
struct Ptrs {
  harness::FusedMtpPtrs op;  // the draft side and the target's tensors (proposer_params.cuh)
  const int64_t *ids, *prompt_lens;
  std::vector<const float*> logits;

  fdspec::DraftModelAcceptPreprocessParams accept_preprocess() const {
    return op.accept_preprocess();
  }
  fdspec::DraftModelGreedyPreprocessParams preprocess() const {
    return accept_preprocess().preprocess();
  }
  fdspec::DraftModelAcceptParams accept() const { return accept_preprocess().accept(); }
  fdspec::DraftModelGreedyUpdateParams update(int substep) const {
    return op.update(logits[substep], substep);
  }
  fdspec::HybridMtpNgramParams hybrid() const {
    return op.hybrid(ids, kW, prompt_lens, kMaxNgram, kMinNgram, kK, kNonBinding);
  }
};

// The pointers of a State's vectors or of its device copies (DevState).
template <class S>
Ptrs ptrs_of(int64_t B, S& s) {
  // The accept + preprocess's params in their field order (draft_model.h), then V and the drafts.
  return {{{s.input_ids.data(), s.d_dec.data(), s.step.data(), s.pre.data(), kW, s.mtp_num.data(),
            s.d_max_dec_len.data(), s.accept_tokens.data(), s.accept_num.data(), kK + 1,
            s.slt.data(), s.enc.data(), s.dec.data(), reinterpret_cast<bool*>(s.stop.data()),
            s.max_dec_len.data(), B},
           kV,
           s.draft_tokens.data()},
          s.ids.data(),
          s.prompt_lens.data(),
          {}};
}

Ptrs host_ptrs(State& s) {
  Ptrs p = ptrs_of(s.B, s);
  for (auto& l : s.logits) p.logits.push_back(l.data());
  return p;
}

void cpu_step(State& s) {
  const Ptrs p = host_ptrs(s);
  if (g_defer_accept) {
    fdspec::draft_model_accept_preprocess_cpu(p.accept_preprocess());
  } else {
    fdspec::draft_model_greedy_preprocess_cpu(p.preprocess());
  }
  for (int i = 0; i < s.steps; ++i) fdspec::draft_model_greedy_update_cpu(p.update(i));
  if (s.ngram) fdspec::hybrid_mtp_ngram_cpu(p.hybrid());
  if (!g_defer_accept) fdspec::draft_model_accept_cpu(p.accept());
}

struct DevArrays {
  HARNESS_MIRROR(DevArrays, State, STEP_ARRAYS)
};

// Device copies of a State, and snapshots for the breakdown's restores.
struct DevState : DevArrays {
  const State& h;
  std::vector<DevVec<float>> logits;
  // restore sources for the breakdown: the state just after preprocess (update substep 0 reads it)
  // and just before hybrid_mtp_ngram.
  DevVec<int64_t> step_pre, step_hyb;
  DevVec<int32_t> mtp_pre, mtp_hyb, ddec_pre, ddec_hyb, slt_pre, slt_hyb;

  explicit DevState(const State& s)
      : DevArrays(s),
        h(s),
        step_pre(s.step),
        step_hyb(s.step),
        mtp_pre(s.mtp_num),
        mtp_hyb(s.mtp_num),
        ddec_pre(s.d_dec),
        ddec_hyb(s.d_dec),
        slt_pre(s.slt),
        slt_hyb(s.slt) {
    for (const auto& l : s.logits) logits.emplace_back(l);
  }
  Ptrs ptrs() const {
    Ptrs p = ptrs_of(h.B, *this);
    for (const auto& l : logits) p.logits.push_back(l.ptr());
    return p;
  }
};

// The step's first kernel: the fused accept + preprocess, or with --accept-at-once
// draft_model_greedy_preprocess.
cudaError_t gpu_preprocess(const DevState& d, cudaStream_t st) {
  if (g_defer_accept)
    return fdspec::draft_model_accept_preprocess_gpu(d.ptrs().accept_preprocess(), st);
  return fdspec::draft_model_greedy_preprocess_gpu(d.ptrs().preprocess(), st);
}
cudaError_t gpu_update(const DevState& d, int i, cudaStream_t st) {
  return fdspec::draft_model_greedy_update_gpu(d.ptrs().update(i), st);
}
cudaError_t gpu_hybrid(const DevState& d, cudaStream_t st) {
  return fdspec::hybrid_mtp_ngram_gpu(d.ptrs().hybrid(), st);
}
cudaError_t gpu_accept(const DevState& d, cudaStream_t st) {
  return fdspec::draft_model_accept_gpu(d.ptrs().accept(), st);
}

// The proposer's step: run (preprocess, updates, hybrid) then accept (deferred into the next run's
// first kernel unless --accept-at-once).
cudaError_t gpu_step(const DevState& d, cudaStream_t st) {
  cudaError_t e = gpu_preprocess(d, st);
  for (int i = 0; e == cudaSuccess && i < d.h.steps; ++i) e = gpu_update(d, i, st);
  if (e == cudaSuccess && d.h.ngram) e = gpu_hybrid(d, st);
  return e == cudaSuccess && !g_defer_accept ? gpu_accept(d, st) : e;
}

template <class T>
bool same(const char* what, const DevVec<T>& d, const std::vector<T>& ref) {
  const auto got = d.download();
  const int64_t i = harness::first_diff(got, ref);
  if (i >= 0) {
    std::printf("  %s[%lld]: gpu %lld cpu %lld\n", what, (long long)i, (long long)got[i],
                (long long)ref[i]);
  }
  return i < 0;
}

bool same_state(const DevState& d, const State& ref) {
  bool ok = same("draft_tokens", d.draft_tokens, ref.draft_tokens);
  ok = same("seq_lens_this_time", d.slt, ref.slt) && ok;
  ok = same("pre_ids", d.pre, ref.pre) && ok;
  ok = same("step_idx", d.step, ref.step) && ok;
  ok = same("input_ids", d.input_ids, ref.input_ids) && ok;
  ok = same("draft seq_lens_decoder", d.d_dec, ref.d_dec) && ok;
  ok = same("mtp_draft_num", d.mtp_num, ref.mtp_num) && ok;
  ok = same("draft max_dec_len", d.d_max_dec_len, ref.d_max_dec_len) && ok;
  return ok;
}

// Copies up to four int32 / int64 arrays from their snapshots: the breakdown's restore before an op
// that changes what it reads. One plain launch.
struct Restore {
  const void* src[4];
  void* dst[4];
  int64_t bytes[4];
  int n;
};
__global__ void restore_kernel(Restore r) {
  for (int k = 0; k < r.n; ++k) {
    const auto* s = static_cast<const uint32_t*>(r.src[k]);
    auto* d = static_cast<uint32_t*>(r.dst[k]);
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < r.bytes[k] / 4;
         i += int64_t{gridDim.x} * blockDim.x) {
      d[i] = s[i];
    }
  }
}
cudaError_t restore(const Restore& r, cudaStream_t st) {
  restore_kernel<<<4, 256, 0, st>>>(r);
  return cudaGetLastError();
}

struct Result {
  int64_t B;
  int steps;
  bool ngram;
  double warm, cold;
  double pre_us, upd_us, hyb_us, acc_us;  // breakdown, warm, each alone
  bool identical;
};

Result bench_row(int64_t B, int steps, bool ngram, const bench::Flusher& fl, cudaStream_t st,
                 bool quick) {
  const State init = make_state(B, steps, ngram);
  State ref = init;
  cpu_step(ref);
  DevState d(init);
  CHECK(gpu_step(d, st));
  CHECK(cudaStreamSynchronize(st));
  bool identical = same_state(d, ref);

  const int calls = 20, reps = quick ? 3 : 10, rounds = quick ? 5 : 15;
  auto step = [&](cudaStream_t s) { return gpu_step(d, s); };
  const double warm = bench::graph_us(st, calls, reps, rounds, step);
  CHECK(cudaStreamSynchronize(st));
  identical = same_state(d, ref) && identical;

  const int cold_reps = quick ? 1 : 3;
  auto flush_only = [&](cudaStream_t s) { return fl.run(s); };
  auto flush_step = [&](cudaStream_t s) {
    const cudaError_t e = fl.run(s);
    return e != cudaSuccess ? e : gpu_step(d, s);
  };
  const double flush_us = bench::graph_us(st, calls, cold_reps, rounds, flush_only);
  const double cold = bench::graph_us(st, calls, cold_reps, rounds, flush_step) - flush_us;
  CHECK(cudaStreamSynchronize(st));
  identical = same_state(d, ref) && identical;

  // Breakdown. Snapshots: the state after preprocess (update 0's input) and before hybrid.
  CHECK(gpu_preprocess(d, st));
  CHECK(cudaStreamSynchronize(st));
  auto snap = [&](void* dst, const void* src, size_t bytes) {
    CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
  };
  snap(d.step_pre.ptr(), d.step.ptr(), B * 8);
  snap(d.mtp_pre.ptr(), d.mtp_num.ptr(), B * 4);
  snap(d.ddec_pre.ptr(), d.d_dec.ptr(), B * 4);
  snap(d.slt_pre.ptr(), d.slt.ptr(), B * 4);
  for (int i = 0; i < steps; ++i) CHECK(gpu_update(d, i, st));
  CHECK(cudaStreamSynchronize(st));
  snap(d.step_hyb.ptr(), d.step.ptr(), B * 8);
  snap(d.mtp_hyb.ptr(), d.mtp_num.ptr(), B * 4);
  snap(d.ddec_hyb.ptr(), d.d_dec.ptr(), B * 4);
  snap(d.slt_hyb.ptr(), d.slt.ptr(), B * 4);
  const Restore r_upd{{d.step_pre.ptr(), d.mtp_pre.ptr(), d.ddec_pre.ptr(), d.slt_pre.ptr()},
                      {d.step.ptr(), d.mtp_num.ptr(), d.d_dec.ptr(), d.slt.ptr()},
                      {B * 8, B * 4, B * 4, B * 4},
                      4};
  const Restore r_hyb{{d.slt_hyb.ptr()}, {d.slt.ptr()}, {B * 4}, 1};
  auto rest_upd = [&](cudaStream_t s) { return restore(r_upd, s); };
  auto rest_hyb = [&](cudaStream_t s) { return restore(r_hyb, s); };
  const double rest_upd_us = bench::graph_us(st, calls, reps, rounds, rest_upd);
  const double upd_us = bench::graph_us(st, calls, reps, rounds,
                                        [&](cudaStream_t s) {
                                          const cudaError_t e = restore(r_upd, s);
                                          return e != cudaSuccess ? e : gpu_update(d, 0, s);
                                        }) -
                        rest_upd_us;
  double hyb_us = 0;
  if (ngram) {
    const Restore r_h{{d.step_hyb.ptr(), d.mtp_hyb.ptr(), d.ddec_hyb.ptr(), d.slt_hyb.ptr()},
                      {d.step.ptr(), d.mtp_num.ptr(), d.d_dec.ptr(), d.slt.ptr()},
                      {B * 8, B * 4, B * 4, B * 4},
                      4};
    CHECK(restore(r_h, st));
    const double rest_hyb_us = bench::graph_us(st, calls, reps, rounds, rest_hyb);
    hyb_us = bench::graph_us(st, calls, reps, rounds,
                             [&](cudaStream_t s) {
                               const cudaError_t e = restore(r_hyb, s);
                               return e != cudaSuccess ? e : gpu_hybrid(d, s);
                             }) -
             rest_hyb_us;
  }
  // preprocess and accept (accept_num 0) are idempotent: their graphs need no restore. With the
  // deferred accept (the default) the preprocess column is the fused kernel and the step has no
  // accept.
  const double acc_us =
      g_defer_accept ? 0.0 : bench::graph_us(st, calls, reps, rounds, [&](cudaStream_t s) {
        return gpu_accept(d, s);
      });
  const double pre_us = bench::graph_us(st, calls, reps, rounds,
                                        [&](cudaStream_t s) { return gpu_preprocess(d, s); });
  // Back to the state a step starts from, then one more step must again give the CPU's answer.
  {
    State again = init;
    DevState d2(again);
    CHECK(gpu_step(d2, st));
    CHECK(cudaStreamSynchronize(st));
    identical = same_state(d2, ref) && identical;
  }
  return Result{B, steps, ngram, warm, cold, pre_us, upd_us, hyb_us, acc_us, identical};
}

__global__ void empty_kernel() {
  fdspec::wait_for_primary_grid();
  fdspec::allow_dependent_launch();
}

void calibrate(cudaStream_t st) {
  auto plain = [](int n) {
    return [n](cudaStream_t s) {
      for (int i = 0; i < n; ++i) empty_kernel<<<1, 32, 0, s>>>();
      return cudaGetLastError();
    };
  };
  auto pdl = [](int n) {
    return [n](cudaStream_t s) {
      cudaError_t e = cudaSuccess;
      for (int i = 0; i < n && e == cudaSuccess; ++i)
        e = fdspec::launch_dependent(empty_kernel, dim3(1), dim3(32), s);
      return e;
    };
  };
  std::printf(
      "calibration (graph of 20 calls): 1 empty kernel %.2f us, 4 plain %.2f us, 4 programmatic "
      "dependents %.2f us\n",
      bench::graph_us(st, 20, 10, 15, plain(1)), bench::graph_us(st, 20, 10, 15, plain(4)),
      bench::graph_us(st, 20, 10, 15, pdl(4)));
}

int profile(int argc, char** argv) {
  if (argc < 5) return 2;
  const State init = make_state(std::atoll(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]) != 0);
  State ref = init;
  cpu_step(ref);
  DevState d(init);
  harness::Stream st;
  for (int i = 0; i < 3; ++i) CHECK(gpu_step(d, st.get()));
  st.sync();
  const bool ok = same_state(d, ref);
  std::printf("profile B=%s steps=%s ngram=%s: %s\n", argv[2], argv[3], argv[4],
              ok ? "identical" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--accept-at-once") {
    g_defer_accept = false;
    argv[1] = argv[0];
    ++argv;
    --argc;
  }
  if (argc > 1 && std::string(argv[1]) == "--profile") return profile(argc, argv);
  const bench::Options opt = bench::parse_options(argc, argv);  // or --profile B STEPS NGRAM
  if (!opt.ok) return 2;
  const char* json = opt.json;
  const bool quick = opt.quick;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  bench::Flusher fl;
  harness::Stream st;
  calibrate(st.get());
  std::vector<Result> res;
  const int64_t batches[] = {1, 8, 64, 256};
  for (const int64_t B : batches) {
    for (const int steps : {1, 2}) {
      for (const bool ngram : {false, true}) {
        res.push_back(bench_row(B, steps, ngram, fl, st.get(), quick));
        const Result& r = res.back();
        std::printf(
            "B=%4lld steps=%d ngram=%d: step %7.2f us (cold %7.2f) | alone: preprocess %.2f update "
            "%.2f "
            "hybrid %.2f accept %.2f | %s\n",
            (long long)r.B, r.steps, r.ngram, r.warm, r.cold, r.pre_us, r.upd_us, r.hyb_us,
            r.acc_us, r.identical ? "identical" : "MISMATCH");
        std::fflush(stdout);
      }
    }
  }
  bool all_ok = true;
  std::printf(
      "\n%s, K = %lld, V = %lld float32, W = %lld; us per proposer step (graph of 20 steps, "
      "medians); "
      "breakdown: each kernel alone in its own graph, warm%s\n",
      prop.name, (long long)kK, (long long)kV, (long long)kW,
      g_defer_accept
          ? "; deferred accept: preprocess = draft_model_accept_preprocess, no accept kernel"
          : "");
  std::printf(
      "| B | model steps | n-gram | step warm | step cold | preprocess | update | hybrid | accept "
      "| identical |\n"
      "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (const Result& r : res) {
    all_ok = all_ok && r.identical;
    std::printf("| %lld | %d | %s | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %s |\n", (long long)r.B,
                r.steps, r.ngram ? "yes" : "no", r.warm, r.cold, r.pre_us, r.upd_us,
                r.ngram ? std::to_string(r.hyb_us).substr(0, 5).c_str() : "-", r.acc_us,
                r.identical ? "yes" : "NO");
  }
  auto row = [&](size_t i) {
    const Result& r = res[i];
    return bench::format(
        "{\"B\": %lld, \"model_steps\": %d, \"ngram\": %s, \"gpu_us\": %.3f, \"gpu_cold_us\": "
        "%.3f, "
        "\"preprocess_us\": %.3f, \"update_us\": %.3f, \"hybrid_us\": %.3f, \"accept_us\": %.3f, "
        "\"bit_identical\": %s}",
        (long long)r.B, r.steps, r.ngram ? "true" : "false", r.warm, r.cold, r.pre_us, r.upd_us,
        r.hyb_us, r.acc_us, r.identical ? "true" : "false");
  };
  const std::string head =
      bench::format("\"K\": %lld, \"V\": %lld, \"W\": %lld, \"defer_accept\": %s, ", (long long)kK,
                    (long long)kV, (long long)kW, g_defer_accept ? "true" : "false");
  if (json != nullptr && !bench::write_json(json, prop.name, head, res.size(), row)) return 2;
  std::printf("bench_mtp_kernels: %s\n",
              all_ok ? "PASS (every row bit-identical to the CPU ops)" : "FAIL");
  return all_ok ? 0 : 1;
}
