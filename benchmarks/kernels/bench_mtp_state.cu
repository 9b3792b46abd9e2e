// Device time of an MTP decode step's own kernels, at the kernel layer (no Paddle), the draft
// model's forward excluded (its float32 logits [B, V] of each model step are prepared on the
// device):
//
//   FastDeploy's sequence (MTPProposer ops="upstream", as MTPProposerCUDA calls it):
//     draft_model_preprocess, eagle_get_hidden_states, (speculate_sample_tokens greedy,
//     draft_model_update) x 2, draft_model_postprocess, hybrid_mtp_ngram
//   the fused greedy step (MTPProposer ops="fused", the default):
//     draft_model_accept_preprocess, (draft_model_greedy_update) x 2, hybrid_mtp_ngram
//
// B = 64 slots, all decoding, K = 5, V = 32000, accept_num 1 .. 6 (the fused step: 0, so that it
// leaves its state as it found it, bench_mtp_kernels' inputs), pre_ids and input_ids 8192 wide,
// hidden states bfloat16 [B (K + 1), 4096], a prompt whose late part continues the newest tokens,
// hybrid threshold not binding. FastDeploy's step re-initialises the draft side from the target's
// state, so replays need no reset. Printed:
//   - each FastDeploy-contract op alone (update: preprocess + update minus preprocess), the
//     bookkeeping step (no sampler) and the step without the gather, warm: a CUDA graph of 20
//     calls replayed, median over rounds (bench_timing.cuh);
//   - one table of whole steps, warm and cold (each step after an L2 flush, the flush timed alone
//     and subtracted): the fused step, FastDeploy's sequence with the sampler, and the
//     bookkeeping alone;
//   - built with -DFDSPEC_BENCH_UPSTREAM and -I<dir of upstream_kernels.cuh> (upstream's kernels,
//     copied for figures only, never committed): the same rows and table rows with upstream's
//     kernels on the same inputs (its hidden-state gather with its memset of the position map and
//     its cooperative launch; its scratch buffers allocated once here, not per call as upstream
//     does), the sampler and hybrid_mtp_ngram ours in both (upstream's sampler is Paddle code).
// Ours and the fused step are checked against their CPU implementations after one step, and the
// token outputs of upstream's against ours (upstream leaves rows of the gather's output
// unwritten: the rows it writes are compared). Exits 1 on a mismatch.
//
//   bash benchmarks/kernels/build.sh 90a build bench_mtp_state   # nvcc, from the repository root
//   build/bench_mtp_state [--quick]
// With upstream's kernels: the same nvcc line plus -DFDSPEC_BENCH_UPSTREAM -I<dir>, where <dir>
// holds upstream_kernels.cuh (upstream's __global__ functions, copied locally; never committed).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.cuh"
#include "common/cuda_utils.cuh"
#include "harness.cuh"
#include "draft_model/draft_model.h"
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"
#include "proposer_params.cuh"
#include "mtp_state/mtp_state.h"
#include "speculate_sample_tokens/speculate_sample_tokens.h"
#ifdef FDSPEC_BENCH_UPSTREAM
#include <cuda_bf16.h>

#include "upstream_kernels.cuh"
#endif

namespace {

using harness::DevVec;

constexpr int64_t kB = 64, kK = 5, kW1 = kK + 1, kD = 8192, kH = 4096, kPrompt = 3 * kD / 4,
                  kGen = 512, kV = 32000;
constexpr int kSteps = 2;
constexpr int64_t kNonBinding = int64_t{1} << 40;

// Host arrays. logits: the draft model's float32 logits [B, V] of each step; rows_cu, zeros,
// temperature, top_p: the greedy sampler's parameters (row r is its own "slot": cu = 0 .. B,
// temperature 0); f_*: the fused greedy step's own state (our draft_model_* ops, as
// MTPProposer(ops="fused") keeps it): accept_num 0, so a step leaves the state as it found it
// (bench_mtp_kernels' inputs).
// clang-format off
#define BENCH_ARRAYS(X)                                                                       \
  MTP_STATE_ARRAYS(X) X(int64_t, ids) X(int64_t, prompt_lens) X(int32_t, tslt) X(int32_t, cu) \
  X(int32_t, actual) X(uint16_t, hidden) X(uint16_t, hidden_out) X(int32_t, out_count)        \
  X(int32_t, position_map) X(float, logits) X(int32_t, rows_cu) X(int64_t, zeros)             \
  X(float, temperature) X(float, top_p) X(int64_t, f_input_ids) X(int64_t, f_step)            \
  X(int64_t, f_pre) X(int64_t, f_max_dec) X(int64_t, f_tdraft) X(int32_t, f_dec)              \
  X(int32_t, f_mtp) X(int32_t, f_tslt) X(int32_t, f_acc_num)
// clang-format on
struct Host {
  HARNESS_VECTORS(BENCH_ARRAYS)
};

Host make_host() {
  std::mt19937_64 g(17);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(g);
  };
  Host h;
  h.draft.assign(kB * kW1, -1);
  h.input_ids.assign(kB * kD, 0);
  h.step.assign(kB, 0);
  h.pre.assign(kB * kD, -1);
  h.acc.resize(kB * kW1);
  h.tstep.assign(kB, kGen);
  h.max_dec.assign(kB, 4096);
  h.tdraft.assign(kB * kW1, -1);
  h.next.resize(kB);
  h.ids.assign(kB * kD, -1);
  h.prompt_lens.assign(kB, kPrompt);
  h.slt.assign(kB, 0);
  h.enc.assign(kB, 0);
  h.dec.assign(kB, 0);
  h.acc_num.resize(kB);
  h.tenc.assign(kB, 0);
  h.tdec.assign(kB, kPrompt + kGen);
  h.tslt.assign(kB, kW1);
  h.cu.assign(kB + 1, 0);
  h.actual.assign(kB, kK);
  h.stop.assign(kB, 0);
  h.tstop.assign(kB, 0);
  h.nns.assign(1, 0);
  for (int64_t b = 0; b < kB; ++b) {
    h.acc_num[b] = static_cast<int32_t>(uni(1, kW1));
    for (int64_t j = 0; j < kW1; ++j) h.acc[b * kW1 + j] = uni(0, 999);
    for (int64_t j = 0; j < kGen; ++j) h.pre[b * kD + j] = uni(0, 999);
    for (int64_t j = 0; j < kPrompt; ++j) h.ids[b * kD + j] = uni(0, 999);
    // The prompt's late part continues the newest generated tokens: the n-gram search finds them.
    for (int64_t j = 0; j < 8; ++j) h.ids[b * kD + kPrompt - 40 + j] = h.pre[b * kD + kGen - 8 + j];
    h.next[b] = uni(0, 999);
  }
  h.hidden.resize(kB * kW1 * kH);
  for (auto& x : h.hidden) x = static_cast<uint16_t>(uni(0, 0x7F7F));
  h.hidden_out.assign(h.hidden.size(), 0);
  h.out_count.assign(1, 0);
  h.position_map.assign(kB * kW1, -1);
  std::normal_distribution<float> nd;
  h.logits.resize(kSteps * kB * kV);
  for (float& x : h.logits) x = nd(g);
  h.rows_cu.resize(kB + 1);
  for (int64_t r = 0; r <= kB; ++r) h.rows_cu[r] = static_cast<int32_t>(r);
  h.zeros.assign(kB, 0);
  h.temperature.assign(kB, 0.0f);
  h.top_p.assign(kB, 1.0f);
  h.f_input_ids.assign(kB, 0);
  h.f_step.assign(kB, kGen - 1);
  h.f_pre = h.pre;
  h.f_max_dec.assign(kB, 0);
  h.f_tdraft.assign(kB * kW1, -1);
  h.f_dec.assign(kB, 0);
  h.f_mtp.assign(kB, 0);
  h.f_tslt.assign(kB, 1);
  h.f_acc_num.assign(kB, 0);
  return h;
}

struct Dev {
  HARNESS_MIRROR(Dev, Host, BENCH_ARRAYS)
};

// One set of pointers (host vectors or device buffers) and the params of each op over them:
// FastDeploy's bookkeeping ops' (proposer_params.cuh), and the rest.
struct Ptrs : harness::MtpStatePtrs {
  int64_t *ids, *prompt_lens;
  int32_t* tslt;
  uint16_t *hidden, *hidden_out;
  int32_t* out_count;
  const float* logits;
  const int32_t* rows_cu;
  const int64_t* zeros;
  const float *temperature, *top_p;
  int64_t *f_input_ids, *f_step, *f_pre, *f_max_dec, *f_tdraft;
  int32_t *f_dec, *f_mtp, *f_tslt, *f_acc_num;

  // The greedy sampler of draft-model step `substep`: its tokens become inter_next_tokens.
  fdspec::SampleTokensParams sample(int substep) const {
    // In SampleTokensParams' field order: logits, dtype, rows, vocab, cu, batch, step_idx, seed,
    // temperature, top_p, top_k, min_p, sampled_tokens.
    return {logits + static_cast<int64_t>(substep) * kB * kV,
            fdspec::LogitsDType::kFloat32,
            kB,
            kV,
            rows_cu,
            kB,
            zeros,
            zeros,
            temperature,
            top_p,
            zeros,
            nullptr,
            next};
  }
  // The accept + preprocess's params in their field order (draft_model.h), then V and the drafts.
  harness::FusedMtpPtrs fused() const {
    return {{f_input_ids, f_dec, f_step, f_pre, kD, f_mtp, f_max_dec, acc, f_acc_num, kW1, f_tslt,
             tenc, tdec, tstop, max_dec, kB},
            kV,
            f_tdraft};
  }
  fdspec::DraftModelGreedyUpdateParams fused_update(int substep) const {
    return fused().update(logits + static_cast<int64_t>(substep) * kB * kV, substep);
  }
  fdspec::HybridMtpNgramParams fused_hybrid() const { return hybrid_of(fused()); }

  fdspec::MtpPreprocessParams preprocess() const { return MtpStatePtrs::preprocess(kSteps, false); }
  fdspec::HiddenGatherParams gather() const {
    return harness::hidden_gather_params(fdspec::HiddenGather::kTarget, hidden, hidden_out,
                                         out_count, kB * kW1, kH * 2, slt, enc, acc_num, tslt,
                                         nullptr, kB);
  }
  fdspec::MtpPostprocessParams postprocess() const { return MtpStatePtrs::postprocess(tslt); }
  // FastDeploy's sequence's tensors in the fused step's roles, for the hybrid_mtp_ngram both end
  // with (it reads neither input_ids nor mtp_draft_num).
  harness::FusedMtpPtrs upstream() const {
    return {{nullptr, dec, step, pre, kD, nullptr, max_dec, acc, acc_num, kW1, tslt, tenc, tdec,
             tstop, max_dec, kB},
            kV,
            tdraft};
  }
  fdspec::HybridMtpNgramParams hybrid() const { return hybrid_of(upstream()); }
  fdspec::HybridMtpNgramParams hybrid_of(const harness::FusedMtpPtrs& side) const {
    return side.hybrid(ids, kD, prompt_lens, 3, 1, kK, kNonBinding);
  }
};

// One set of pointers from host vectors or device buffers.
template <class S>
Ptrs ptrs_of(S& s) {
  return {harness::mtp_state_ptrs(s, kB, kW1, kD, kD, kB),
          s.ids.data(),
          s.prompt_lens.data(),
          s.tslt.data(),
          s.hidden.data(),
          s.hidden_out.data(),
          s.out_count.data(),
          s.logits.data(),
          s.rows_cu.data(),
          s.zeros.data(),
          s.temperature.data(),
          s.top_p.data(),
          s.f_input_ids.data(),
          s.f_step.data(),
          s.f_pre.data(),
          s.f_max_dec.data(),
          s.f_tdraft.data(),
          s.f_dec.data(),
          s.f_mtp.data(),
          s.f_tslt.data(),
          s.f_acc_num.data()};
}

Ptrs host_ptrs(Host& h) { return ptrs_of(h); }

Ptrs dev_ptrs(const Dev& d) { return ptrs_of(d); }

// FastDeploy's sequence with the greedy sampler between the draft model and draft_model_update.
void cpu_step(Host& h) {
  const Ptrs p = host_ptrs(h);
  fdspec::mtp_preprocess_cpu(p.preprocess());
  fdspec::hidden_gather_cpu(p.gather());
  for (int i = 0; i < kSteps; ++i) {
    fdspec::sample_tokens_cpu(p.sample(i));
    fdspec::mtp_update_cpu(p.update(i));
  }
  fdspec::mtp_postprocess_cpu(p.postprocess());
  fdspec::hybrid_mtp_ngram_cpu(p.hybrid());
}

void cpu_fused_step(Host& h) {
  const Ptrs p = host_ptrs(h);
  fdspec::draft_model_accept_preprocess_cpu(p.fused().accept_preprocess());
  for (int i = 0; i < kSteps; ++i) fdspec::draft_model_greedy_update_cpu(p.fused_update(i));
  fdspec::hybrid_mtp_ngram_cpu(p.fused_hybrid());
}

using Op = std::function<cudaError_t(cudaStream_t)>;

cudaError_t run_ops(std::initializer_list<const Op*> ops, cudaStream_t st) {
  for (const Op* op : ops) {
    const cudaError_t e = (*op)(st);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

struct Flow {
  Op preprocess, gather, update0, update1, postprocess, hybrid, sample0, sample1;
  // The bookkeeping alone (the sampler's tokens left in inter_next_tokens by the last one).
  cudaError_t step(cudaStream_t st) const {
    return run_ops({&preprocess, &gather, &update0, &update1, &postprocess, &hybrid}, st);
  }
  cudaError_t sampled_step(cudaStream_t st) const {
    return run_ops(
        {&preprocess, &gather, &sample0, &update0, &sample1, &update1, &postprocess, &hybrid}, st);
  }
};

Op sampler(const Ptrs& p, int substep) {
  return [p, substep](cudaStream_t s) { return fdspec::sample_tokens_gpu(p.sample(substep), s); };
}

cudaError_t fused_step(const Ptrs& p, cudaStream_t s) {
  cudaError_t e = fdspec::draft_model_accept_preprocess_gpu(p.fused().accept_preprocess(), s);
  for (int i = 0; i < kSteps && e == cudaSuccess; ++i)
    e = fdspec::draft_model_greedy_update_gpu(p.fused_update(i), s);
  return e != cudaSuccess ? e : fdspec::hybrid_mtp_ngram_gpu(p.fused_hybrid(), s);
}

Flow ours(const Ptrs& p) {
  return {[p](cudaStream_t s) { return fdspec::mtp_preprocess_gpu(p.preprocess(), s); },
          [p](cudaStream_t s) { return fdspec::hidden_gather_gpu(p.gather(), s); },
          [p](cudaStream_t s) { return fdspec::mtp_update_gpu(p.update(0), s); },
          [p](cudaStream_t s) { return fdspec::mtp_update_gpu(p.update(1), s); },
          [p](cudaStream_t s) { return fdspec::mtp_postprocess_gpu(p.postprocess(), s); },
          [p](cudaStream_t s) { return fdspec::hybrid_mtp_ngram_gpu(p.hybrid(), s); },
          sampler(p, 0),
          sampler(p, 1)};
}

#ifdef FDSPEC_BENCH_UPSTREAM
// Upstream's launches as its Paddle wrappers make them (block sizes, grid, memset, cooperative
// launch).
Flow theirs(const Ptrs& p, int32_t* position_map) {
  auto upd = [p](int substep) {
    return [p, substep](cudaStream_t s) {
      upstream::draft_model_update_kernel<512><<<1, 512, 0, s>>>(
          p.next, p.draft, p.pre, p.slt, p.enc, p.dec, p.step, nullptr, p.stop, p.nns, p.max_dec,
          nullptr, p.tdraft, kB, kW1, kD, kW1, 0, kD, substep, false);
      return cudaGetLastError();
    };
  };
  return {
      [p](cudaStream_t s) {
        upstream::draft_model_preprocess_kernel<1024>
            <<<1, 1024, 0, s>>>(p.draft, p.input_ids, p.stop, p.slt, p.enc, p.dec, p.step, p.nns,
                                p.pre, p.acc, p.acc_num, p.tenc, p.tdec, p.tstep, p.tstop,
                                p.max_dec, p.tdraft, kB, kSteps, kW1, kW1, kD, kW1, kD, false);
        return cudaGetLastError();
      },
      [p, position_map](cudaStream_t s) {
        using T = __nv_bfloat16;
        constexpr int kPack = 16 / sizeof(T);
        static int max_grid = [] {
          int per_sm = 0, dev = 0, sms = 0;
          CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &per_sm, upstream::rebuildHiddenStatesKernel<T, kPack>, 128, 4 * 512 * sizeof(int)));
          CHECK(cudaGetDevice(&dev));
          CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
          return per_sm * sms;
        }();
        CHECK(cudaMemsetAsync(position_map, 0xFF, kB * kW1 * sizeof(int), s));
        const int per_batch = std::max(1, std::min<int>(4, max_grid / static_cast<int>(kB)));
        const int grid = std::max(1, std::min<int>(static_cast<int>(kB) * per_batch, max_grid));
        const T* in = reinterpret_cast<const T*>(p.hidden);
        T* out = reinterpret_cast<T*>(p.hidden_out);
        const int* slt = p.slt;
        const int* enc = p.enc;
        const int* tslt = p.tslt;
        const int* tenc = p.tenc;
        const int* acc = p.acc_num;
        int* pm = position_map;
        int* cnt = p.out_count;
        int bsz = kB, dim = kH, rows = kB * kW1;
        void* args[] = {&in, &slt, &enc, &tslt, &tenc, &acc, &pm, &cnt, &out, &bsz, &dim, &rows};
        return cudaLaunchCooperativeKernel(
            reinterpret_cast<void*>(upstream::rebuildHiddenStatesKernel<T, kPack>), dim3(grid),
            dim3(128), args, 4 * kB * sizeof(int), s);
      },
      upd(0),
      upd(1),
      [p](cudaStream_t s) {
        upstream::draft_model_update_seq_lens_this_time_kernel<<<1, (kB + 31) / 32 * 32, 0, s>>>(
            p.tdraft, p.tslt, p.tenc, p.tstop, kB, kW1);
        return cudaGetLastError();
      },
      [p](cudaStream_t s) { return fdspec::hybrid_mtp_ngram_gpu(p.hybrid(), s); },
      sampler(p, 0),
      sampler(p, 1)};
}
#endif

struct Rows {
  double preprocess, gather, update, postprocess, step, step_no_gather;
};

Rows time_flow(const Flow& f, cudaStream_t st, bool quick) {
  const int calls = 20, reps = quick ? 5 : 50, rounds = quick ? 3 : 11;
  auto t = [&](const Op& op) { return bench::graph_us(st, calls, reps, rounds, op); };
  Rows r{};
  r.preprocess = t(f.preprocess);
  r.gather = t(f.gather);
  r.update =
      t([&](cudaStream_t s) { return run_ops({&f.preprocess, &f.update0}, s); }) - r.preprocess;
  r.postprocess = t(f.postprocess);
  r.step = t([&](cudaStream_t s) { return f.step(s); });
  r.step_no_gather = t([&](cudaStream_t s) {
    return run_ops({&f.preprocess, &f.update0, &f.update1, &f.postprocess, &f.hybrid}, s);
  });
  return r;
}

struct WarmCold {
  double warm, cold;
};

// A whole step warm (a graph of 20 steps replayed) and cold (each step after an L2 flush, the
// flush timed alone and subtracted), as bench_mtp_kernels times its rows.
WarmCold time_step(const Op& step, const bench::Flusher& fl, cudaStream_t st, bool quick) {
  const int calls = 20, reps = quick ? 3 : 10, rounds = quick ? 5 : 15, cold_reps = quick ? 1 : 3;
  const Op flush = [&](cudaStream_t s) { return fl.run(s); };
  const Op flush_step = [&](cudaStream_t s) {
    const cudaError_t e = fl.run(s);
    return e != cudaSuccess ? e : step(s);
  };
  const double warm = bench::graph_us(st, calls, reps, rounds, step);
  const double flush_us = bench::graph_us(st, calls, cold_reps, rounds, flush);
  return {warm, bench::graph_us(st, calls, cold_reps, rounds, flush_step) - flush_us};
}

void print_rows(const char* who, const Rows& r) {
  std::printf(
      "%-9s preprocess %6.2f us  hidden gather %6.2f us  update %6.2f us  postprocess %6.2f us  "
      "step %6.2f us  step without gather %6.2f us\n",
      who, r.preprocess, r.gather, r.update, r.postprocess, r.step, r.step_no_gather);
}

void print_table_row(const char* what, const WarmCold& t) {
  std::printf("| %-72s | %7.2f | %7.2f |\n", what, t.warm, t.cold);
}

template <class T>
bool same(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
  const int64_t i = harness::first_diff(got, want);
  if (i >= 0) std::printf("MISMATCH %s at %lld\n", what, static_cast<long long>(i));
  return i < 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Options opt = bench::parse_options(argc, argv);
  if (!opt.ok) return 2;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf(
      "bench_mtp_state: %s, B=%lld K=%lld steps=%d D=%lld V=%lld hidden bf16 [%lld, %lld]\n",
      prop.name, (long long)kB, (long long)kK, kSteps, (long long)kD, (long long)kV,
      (long long)(kB * kW1), (long long)kH);
  const harness::Stream stream;
  const bench::Flusher fl;
  Host ref = make_host();
  const Host init = ref;
  cpu_step(ref);
  cpu_fused_step(ref);
  Dev d(init);
  const Ptrs p = dev_ptrs(d);
  const Flow f = ours(p);
  CHECK(f.sampled_step(stream.get()));
  CHECK(fused_step(p, stream.get()));
  stream.sync();
  bool ok = same("draft_tokens", d.draft.download(), ref.draft) &&
            same("pre_ids", d.pre.download(), ref.pre);
  ok = same("step_idx", d.step.download(), ref.step) && ok;
  ok = same("sampled tokens", d.next.download(), ref.next) && ok;
  ok = same("target draft_tokens", d.tdraft.download(), ref.tdraft) && ok;
  ok = same("target seq_lens_this_time", d.tslt.download(), ref.tslt) && ok;
  ok = same("hidden out", d.hidden_out.download(), ref.hidden_out) && ok;
  ok = same("output_token_num", d.out_count.download(), ref.out_count) && ok;
  ok = same("fused pre_ids", d.f_pre.download(), ref.f_pre) && ok;
  ok = same("fused target draft_tokens", d.f_tdraft.download(), ref.f_tdraft) && ok;
  ok = same("fused target seq_lens_this_time", d.f_tslt.download(), ref.f_tslt) && ok;
  print_rows("ours", time_flow(f, stream.get(), opt.quick));
  const WarmCold fused =
      time_step([&](cudaStream_t s) { return fused_step(p, s); }, fl, stream.get(), opt.quick);
  const WarmCold seq =
      time_step([&](cudaStream_t s) { return f.sampled_step(s); }, fl, stream.get(), opt.quick);
  const WarmCold seq_books =
      time_step([&](cudaStream_t s) { return f.step(s); }, fl, stream.get(), opt.quick);
#ifdef FDSPEC_BENCH_UPSTREAM
  Dev u(init);
  DevVec<int32_t> position_map(init.position_map);
  const Ptrs q = dev_ptrs(u);
  const Flow g = theirs(q, position_map.ptr());
  CHECK(g.sampled_step(stream.get()));
  stream.sync();
  ok = same("upstream draft_tokens", u.draft.download(), ref.draft) && ok;
  ok = same("upstream pre_ids", u.pre.download(), ref.pre) && ok;
  ok = same("upstream target draft_tokens", u.tdraft.download(), ref.tdraft) && ok;
  ok = same("upstream output_token_num", u.out_count.download(), ref.out_count) && ok;
  {
    const auto got = u.hidden_out.download();
    const size_t kept = static_cast<size_t>(ref.out_count[0]) * kH;
    ok = same("upstream hidden out (kept rows)",
              std::vector<uint16_t>(got.begin(), got.begin() + kept),
              std::vector<uint16_t>(ref.hidden_out.begin(), ref.hidden_out.begin() + kept)) &&
         ok;
  }
  print_rows("upstream", time_flow(g, stream.get(), opt.quick));
  const WarmCold up =
      time_step([&](cudaStream_t s) { return g.sampled_step(s); }, fl, stream.get(), opt.quick);
  const WarmCold up_books =
      time_step([&](cudaStream_t s) { return g.step(s); }, fl, stream.get(), opt.quick);
#endif
  std::printf(
      "\n| MTP step, B = %lld, K = %lld, %d model steps + hybrid_mtp_ngram, %s | warm us | cold us "
      "|\n",
      (long long)kB, (long long)kK, kSteps, prop.name);
  std::printf("|---|---|---|\n");
  print_table_row("fused greedy step (MTPProposer ops=\"fused\": draft_model_greedy_*)", fused);
  print_table_row("FastDeploy's sequence, our ops, greedy sampler (ops=\"upstream\")", seq);
#ifdef FDSPEC_BENCH_UPSTREAM
  print_table_row("FastDeploy's sequence, upstream's kernels, the same sampler", up);
#endif
  print_table_row("FastDeploy's sequence, our ops, bookkeeping only (no sampler)", seq_books);
#ifdef FDSPEC_BENCH_UPSTREAM
  print_table_row("FastDeploy's sequence, upstream's kernels, bookkeeping only", up_books);
#endif
  std::printf("bench_mtp_state: %s\n", ok ? "outputs checked" : "MISMATCH");
  return ok ? 0 : 1;
}
