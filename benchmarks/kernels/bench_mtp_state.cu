// Device time of FastDeploy's MTP bookkeeping ops under their upstream contracts
// (custom_ops/mtp_state), at the kernel layer (no Paddle), in the order FastDeploy's MTPProposer
// (CUDA path) calls them, the draft model and its sampler excluded:
//
//   draft_model_preprocess, eagle_get_hidden_states, (draft_model_update) x 2,
//   draft_model_postprocess, hybrid_mtp_ngram
//
// B = 64 slots, all decoding, K = 5, accept_num 1 .. 6, pre_ids and input_ids 8192 wide, hidden
// states bfloat16 [B (K + 1), 4096], a prompt whose late part continues the newest tokens (the
// n-gram extension finds a match), hybrid threshold not binding. A step re-initialises the draft
// side from the target's state, so replays need no reset. Rows:
//   - each op alone (update: preprocess + update minus preprocess), and the whole step, warm: a
//   CUDA
//     graph of 20 calls replayed, median over rounds (tests/cuda/bench_timing.cuh);
//   - built with -DFDSPEC_BENCH_UPSTREAM and -I<dir of upstream_kernels.cuh> (upstream's kernels,
//     copied for figures only, never committed): the same rows with upstream's kernels on the same
//     inputs (its hidden-state gather with its memset of the position map and its cooperative
//     launch; its scratch buffers allocated once here, not per call as upstream does),
//     hybrid_mtp_ngram ours in both. Ours is checked against the CPU implementation after one step,
//     and the token outputs of both against each other (upstream leaves rows of the gather's output
//     unwritten: the rows it writes are compared). Exits 1 on a mismatch.
//
//   bash benchmarks/kernels/build.sh 90a build bench_mtp_state   # nvcc, from the repository root
//   build/bench_mtp_state [--quick]
// With upstream's kernels: the same nvcc line plus -DFDSPEC_BENCH_UPSTREAM -I<dir>, where <dir>
// holds upstream_kernels.cuh (upstream's __global__ functions, copied locally; never committed).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.cuh"
#include "common/cuda_utils.cuh"
#include "harness.cuh"
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"
#include "mtp_state/mtp_state.h"
#ifdef FDSPEC_BENCH_UPSTREAM
#include <cuda_bf16.h>

#include "upstream_kernels.cuh"
#endif

namespace {

using harness::DevVec;

constexpr int64_t kB = 64, kK = 5, kW1 = kK + 1, kD = 8192, kH = 4096, kPrompt = 3 * kD / 4,
                  kGen = 512;
constexpr int kSteps = 2;
constexpr int64_t kNonBinding = int64_t{1} << 40;

// clang-format off
#define BENCH_ARRAYS(X)                                                                       \
  X(int64_t, draft) X(int64_t, input_ids) X(int64_t, step) X(int64_t, pre) X(int64_t, acc)    \
  X(int64_t, tstep) X(int64_t, max_dec) X(int64_t, tdraft) X(int64_t, next) X(int64_t, ids)   \
  X(int64_t, prompt_lens) X(int32_t, slt) X(int32_t, enc) X(int32_t, dec) X(int32_t, acc_num) \
  X(int32_t, tenc) X(int32_t, tdec) X(int32_t, tslt) X(int32_t, cu) X(int32_t, actual)        \
  X(uint8_t, stop) X(uint8_t, tstop) X(uint8_t, nns) X(uint16_t, hidden)                      \
  X(uint16_t, hidden_out) X(int32_t, out_count) X(int32_t, position_map)
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
  return h;
}

struct Dev {
  HARNESS_MIRROR(Dev, Host, BENCH_ARRAYS)
};

// One set of pointers (host vectors or device buffers) and the params of each op over them.
struct Ptrs {
  int64_t *draft, *input_ids, *step, *pre, *acc, *tstep, *max_dec, *tdraft, *next, *ids,
      *prompt_lens;
  int32_t *slt, *enc, *dec, *acc_num, *tenc, *tdec, *tslt;
  bool *stop, *tstop, *nns;
  uint16_t *hidden, *hidden_out;
  int32_t* out_count;

  fdspec::MtpPreprocessParams preprocess() const {
    fdspec::MtpPreprocessParams p{};
    p.draft_tokens = draft;
    p.draft_tokens_stride = kW1;
    p.input_ids = input_ids;
    p.input_ids_stride = kD;
    p.stop_flags = stop;
    p.seq_lens_this_time = slt;
    p.seq_lens_encoder = enc;
    p.seq_lens_decoder = dec;
    p.step_idx = step;
    p.not_need_stop = nns;
    p.pre_ids = pre;
    p.pre_ids_stride = kD;
    p.accept_tokens = acc;
    p.accept_stride = kW1;
    p.accept_num = acc_num;
    p.target_model_seq_lens_encoder = tenc;
    p.target_model_seq_lens_decoder = tdec;
    p.target_model_step_idx = tstep;
    p.target_model_stop_flags = tstop;
    p.max_dec_len = max_dec;
    p.target_model_draft_tokens = tdraft;
    p.target_draft_stride = kW1;
    p.num_model_step = kSteps;
    p.is_splitwise_prefill = false;
    p.batch = kB;
    return p;
  }
  fdspec::HiddenGatherParams gather() const {
    fdspec::HiddenGatherParams p{};
    p.kind = fdspec::HiddenGather::kTarget;
    p.input = hidden;
    p.out = hidden_out;
    p.output_token_num = out_count;
    p.rows = kB * kW1;
    p.row_bytes = kH * 2;
    p.seq_lens_this_time = slt;
    p.seq_lens_encoder = enc;
    p.accept_nums = acc_num;
    p.base_model_seq_lens_this_time = tslt;
    p.batch = kB;
    return p;
  }
  fdspec::MtpUpdateParams update(int substep) const {
    fdspec::MtpUpdateParams p{};
    p.inter_next_tokens = next;
    p.next_tokens_len = kB;
    p.draft_tokens = draft;
    p.draft_tokens_stride = kW1;
    p.pre_ids = pre;
    p.pre_ids_stride = kD;
    p.seq_lens_this_time = slt;
    p.seq_lens_encoder = enc;
    p.seq_lens_decoder = dec;
    p.step_idx = step;
    p.stop_flags = stop;
    p.not_need_stop = nns;
    p.max_dec_len = max_dec;
    p.base_model_draft_tokens = tdraft;
    p.base_draft_stride = kW1;
    p.substep = substep;
    p.batch = kB;
    return p;
  }
  fdspec::MtpPostprocessParams postprocess() const {
    fdspec::MtpPostprocessParams p{};
    p.base_model_draft_tokens = tdraft;
    p.base_draft_stride = kW1;
    p.base_model_seq_lens_this_time = tslt;
    p.base_model_seq_lens_encoder = tenc;
    p.base_model_stop_flags = tstop;
    p.batch = kB;
    return p;
  }
  fdspec::HybridMtpNgramParams hybrid() const {
    fdspec::HybridMtpNgramParams p{};
    p.token_ids_all = ids;
    p.token_ids_stride = kD;
    p.prompt_lens = prompt_lens;
    p.pre_ids = pre;
    p.pre_ids_stride = kD;
    p.step_idx = step;
    p.draft_tokens = tdraft;
    p.draft_stride = kW1;
    p.seq_lens_this_time = tslt;
    p.seq_lens_decoder = dec;
    p.max_dec_len = max_dec;
    p.batch = kB;
    p.max_ngram_size = 3;
    p.min_ngram_size = 1;
    p.max_draft_tokens = kK;
    p.pad_to_max = false;
    p.threshold = kNonBinding;
    return p;
  }
};

// The pointers of the Host's vectors or of its Dev copy.
template <class S>
Ptrs ptrs_of(S& h) {
  return {h.draft.data(),
          h.input_ids.data(),
          h.step.data(),
          h.pre.data(),
          h.acc.data(),
          h.tstep.data(),
          h.max_dec.data(),
          h.tdraft.data(),
          h.next.data(),
          h.ids.data(),
          h.prompt_lens.data(),
          h.slt.data(),
          h.enc.data(),
          h.dec.data(),
          h.acc_num.data(),
          h.tenc.data(),
          h.tdec.data(),
          h.tslt.data(),
          reinterpret_cast<bool*>(h.stop.data()),
          reinterpret_cast<bool*>(h.tstop.data()),
          reinterpret_cast<bool*>(h.nns.data()),
          h.hidden.data(),
          h.hidden_out.data(),
          h.out_count.data()};
}

Ptrs host_ptrs(Host& h) { return ptrs_of(h); }

Ptrs dev_ptrs(const Dev& d) { return ptrs_of(d); }

void cpu_step(Host& h) {
  const Ptrs p = host_ptrs(h);
  fdspec::mtp_preprocess_cpu(p.preprocess());
  fdspec::hidden_gather_cpu(p.gather());
  for (int i = 0; i < kSteps; ++i) fdspec::mtp_update_cpu(p.update(i));
  fdspec::mtp_postprocess_cpu(p.postprocess());
  fdspec::hybrid_mtp_ngram_cpu(p.hybrid());
}

using Op = std::function<cudaError_t(cudaStream_t)>;

struct Flow {
  Op preprocess, gather, update0, update1, postprocess, hybrid;
  cudaError_t step(cudaStream_t st) const {
    for (const Op* op : {&preprocess, &gather, &update0, &update1, &postprocess, &hybrid}) {
      const cudaError_t e = (*op)(st);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
};

Flow ours(const Ptrs& p) {
  return {[p](cudaStream_t s) { return fdspec::mtp_preprocess_gpu(p.preprocess(), s); },
          [p](cudaStream_t s) { return fdspec::hidden_gather_gpu(p.gather(), s); },
          [p](cudaStream_t s) { return fdspec::mtp_update_gpu(p.update(0), s); },
          [p](cudaStream_t s) { return fdspec::mtp_update_gpu(p.update(1), s); },
          [p](cudaStream_t s) { return fdspec::mtp_postprocess_gpu(p.postprocess(), s); },
          [p](cudaStream_t s) { return fdspec::hybrid_mtp_ngram_gpu(p.hybrid(), s); }};
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
      [p](cudaStream_t s) { return fdspec::hybrid_mtp_ngram_gpu(p.hybrid(), s); }};
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
  r.update = t([&](cudaStream_t s) {
               const cudaError_t e = f.preprocess(s);
               return e != cudaSuccess ? e : f.update0(s);
             }) -
             r.preprocess;
  r.postprocess = t(f.postprocess);
  r.step = t([&](cudaStream_t s) { return f.step(s); });
  r.step_no_gather = t([&](cudaStream_t s) {
    for (const Op* op : {&f.preprocess, &f.update0, &f.update1, &f.postprocess, &f.hybrid}) {
      const cudaError_t e = (*op)(s);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
  return r;
}

void print_rows(const char* who, const Rows& r) {
  std::printf(
      "%-9s preprocess %6.2f us  hidden gather %6.2f us  update %6.2f us  postprocess %6.2f us  "
      "step %6.2f us  step without gather %6.2f us\n",
      who, r.preprocess, r.gather, r.update, r.postprocess, r.step, r.step_no_gather);
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
  std::printf("bench_mtp_state: %s, B=%lld K=%lld steps=%d D=%lld hidden bf16 [%lld, %lld]\n",
              prop.name, (long long)kB, (long long)kK, kSteps, (long long)kD, (long long)(kB * kW1),
              (long long)kH);
  const harness::Stream stream;
  Host ref = make_host();
  const Host init = ref;
  cpu_step(ref);
  Dev d(init);
  const Ptrs p = dev_ptrs(d);
  const Flow f = ours(p);
  CHECK(f.step(stream.get()));
  stream.sync();
  bool ok = same("draft_tokens", d.draft.download(), ref.draft) &&
            same("pre_ids", d.pre.download(), ref.pre);
  ok = same("step_idx", d.step.download(), ref.step) && ok;
  ok = same("target draft_tokens", d.tdraft.download(), ref.tdraft) && ok;
  ok = same("target seq_lens_this_time", d.tslt.download(), ref.tslt) && ok;
  ok = same("hidden out", d.hidden_out.download(), ref.hidden_out) && ok;
  ok = same("output_token_num", d.out_count.download(), ref.out_count) && ok;
  print_rows("ours", time_flow(f, stream.get(), opt.quick));
#ifdef FDSPEC_BENCH_UPSTREAM
  Dev u(init);
  DevVec<int32_t> position_map(init.position_map);
  const Ptrs q = dev_ptrs(u);
  const Flow g = theirs(q, position_map.ptr());
  CHECK(g.step(stream.get()));
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
#endif
  std::printf("bench_mtp_state: %s\n", ok ? "outputs checked" : "MISMATCH");
  return ok ? 0 : 1;
}
