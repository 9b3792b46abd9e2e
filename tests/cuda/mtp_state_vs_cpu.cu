// FastDeploy's MTP bookkeeping ops (custom_ops/mtp_state: draft_model_preprocess,
// draft_model_update, draft_model_postprocess, draft_model_set_value_by_flags, the two hidden-state
// gathers): CUDA launchers against their CPU implementations at the kernel layer (no Paddle), bit
// for bit on every tensor, on random slot states (every slot kind, hostile lengths and steps, more
// slots than a block has threads, empty batches), hidden rows of 2 and 4 bytes per element and
// widths that do or do not allow 16-byte copies; each case eagerly and as a captured CUDA graph
// replayed once. Then a whole upstream-shaped step (preprocess, hidden gather, 2 x update,
// postprocess) captured once and replayed on new states copied into its buffers. Usage:
// tests/cuda/harness.cuh.
#include <cstring>
#include <string>
#include <vector>

#include "harness.cuh"
#include "proposer_params.cuh"
#include "mtp_state/mtp_state.h"

namespace {

using harness::DevVec;
using harness::Rng;

// Every tensor of the four token ops (MTP_STATE_ARRAYS, proposer_params.cuh). W = K + 1 columns, D
// of pre_ids, L of input_ids.
struct State {
  int64_t B = 0, W = 2, D = 1, L = 1, N = 0;
  HARNESS_VECTORS(MTP_STATE_ARRAYS)
  HARNESS_SAME_VECTORS(State, MTP_STATE_ARRAYS)
};

State make_state(Rng& r, int64_t B, int64_t W, int64_t D, double odd) {
  State s;
  s.B = B;
  s.W = W;
  s.D = D;
  s.L = r.uni(1, D + 2);
  auto fill = [&](std::vector<int64_t>& v, int64_t n, int64_t lo, int64_t hi) {
    v.resize(n);
    for (auto& x : v) x = r.uni(lo, hi);
  };
  fill(s.draft, B * W, -1, 9);
  fill(s.input_ids, B * s.L, 0, 9);
  fill(s.pre, B * D, -1, 9);
  fill(s.acc, B * W, 0, 9);
  fill(s.tdraft, B * W, -1, 9);
  harness::resize_all(B, s.step, s.tstep, s.max_dec, s.slt, s.enc, s.dec, s.acc_num, s.tenc, s.tdec,
                      s.stop, s.tstop);
  s.nns = {static_cast<uint8_t>(r.chance(0.5))};
  int64_t active = 0;
  for (int64_t b = 0; b < B; ++b) {
    s.stop[b] = r.chance(0.2);
    s.tstop[b] = r.chance(0.2);
    s.slt[b] = static_cast<int32_t>(r.uni(0, W));
    s.enc[b] = r.chance(0.3) ? static_cast<int32_t>(r.uni(1, D)) : 0;
    s.dec[b] = static_cast<int32_t>(r.uni(0, 2 * D));
    s.step[b] = r.uni(0, D - 1);
    s.tstep[b] = r.uni(0, D + W);
    s.max_dec[b] = r.uni(1, D + 3);
    s.acc_num[b] = static_cast<int32_t>(r.uni(0, W));
    s.tenc[b] = static_cast<int32_t>(r.uni(0, 2));
    s.tdec[b] = static_cast<int32_t>(r.uni(0, 2 * D));
    if (r.chance(odd)) {
      r.one_of({[&] { s.step[b] = r.pick<int64_t>({INT64_MIN, -3, D, D + 7, INT64_MAX}); },
                [&] {
                  s.acc_num[b] =
                      r.pick<int32_t>({INT32_MIN, -1, static_cast<int32_t>(W + 2), INT32_MAX});
                },
                [&] { s.tstep[b] = r.pick<int64_t>({INT64_MIN, -2, D + 9, INT64_MAX}); },
                [&] { s.max_dec[b] = r.pick<int64_t>({INT64_MIN, 0, INT64_MAX}); },
                [&] { s.slt[b] = r.pick<int32_t>({INT32_MIN, -1, static_cast<int32_t>(W + 3)}); },
                [&] { s.enc[b] = r.pick<int32_t>({static_cast<int32_t>(s.L + 2), INT32_MAX}); }});
    }
    active += s.slt[b] > 0;
  }
  s.N = std::max<int64_t>(0, active + (r.chance(odd) ? r.uni(-2, 1) : 0));
  fill(s.next, s.N, 0, 9);
  if (s.next.empty()) s.next.push_back(0);  // a buffer of one element, N = 0: none is read
  return s;
}

// Parameter structs over one set of pointers (host vectors or device buffers): proposer_params.cuh.
using Ptrs = harness::MtpStatePtrs;

// The pointers of a State's vectors (host) or of its Dev copy (device); `st` gives the sizes.
template <class S>
Ptrs ptrs_of(S& s, const State& st) {
  return harness::mtp_state_ptrs(s, st.B, st.W, st.D, st.L, st.N);
}

Ptrs host_ptrs(State& s) { return ptrs_of(s, s); }

struct Dev {
  HARNESS_MIRROR(Dev, State, MTP_STATE_ARRAYS)
  Ptrs ptrs(const State& s) const { return ptrs_of(*this, s); }
};

// The ops of the grid, by index: each runs on a Ptrs (CPU) or launches on one (GPU).
constexpr int kOps = 4;
const char* const kOpNames[kOps] = {"preprocess", "update", "postprocess", "set_value_by_flags"};

struct OpCall {
  int op;
  int64_t num_model_step;
  bool splitwise;
  int64_t substep;
};

void run_cpu(const OpCall& c, const Ptrs& p) {
  switch (c.op) {
    case 0:
      fdspec::mtp_preprocess_cpu(p.preprocess(c.num_model_step, c.splitwise));
      break;
    case 1:
      fdspec::mtp_update_cpu(p.update(c.substep));
      break;
    case 2:
      fdspec::mtp_postprocess_cpu(p.postprocess(p.slt));
      break;
    default:
      fdspec::mtp_set_value_by_flags_cpu(p.set_value_by_flags());
      break;
  }
}

// The GPU launch (in the self-test: the CPU implementation, then a perturbation of one output).
cudaError_t launch(const OpCall& c, const Ptrs& p, cudaStream_t st) {
  auto& selftest = harness::selftest();
  if (selftest.host_backend) {
    run_cpu(c, p);
    if (selftest.perturb && p.B > 0) harness::perturb(p.slt[0], p.pre[0]);
    return cudaSuccess;
  }
  switch (c.op) {
    case 0:
      return fdspec::mtp_preprocess_gpu(p.preprocess(c.num_model_step, c.splitwise), st);
    case 1:
      return fdspec::mtp_update_gpu(p.update(c.substep), st);
    case 2:
      return fdspec::mtp_postprocess_gpu(p.postprocess(p.slt), st);
    default:
      return fdspec::mtp_set_value_by_flags_gpu(p.set_value_by_flags(), st);
  }
}

std::string describe(const State& s, const OpCall& c, bool graph) {
  return std::string(kOpNames[c.op]) + " B=" + std::to_string(s.B) + " W=" + std::to_string(s.W) +
         " D=" + std::to_string(s.D) + " N=" + std::to_string(s.N) + (graph ? " graph" : "");
}

void token_ops(harness::Tally& t, const harness::Stream& stream, bool quick) {
  Rng r(52);
  const std::vector<int64_t> batches = quick
                                           ? std::vector<int64_t>{0, 1, 37, 300}
                                           : std::vector<int64_t>{0, 1, 2, 31, 64, 257, 300, 1100};
  const int reps = quick ? 2 : 6;
  for (int64_t B : batches) {
    for (int64_t W : {2, 3, 6, 9}) {
      for (int64_t D : {1, 4, 16}) {
        for (int rep = 0; rep < reps; ++rep) {
          for (int op = 0; op < kOps; ++op) {
            for (bool graph : {false, true}) {
              const double odd = rep % 2 ? 0.3 : 0.0;
              State s = make_state(r, B, W, D, odd);
              const OpCall c{op, r.uni(0, 3), r.chance(0.3), r.uni(0, W - 2)};
              State want = s;
              run_cpu(c, host_ptrs(want));
              Dev d(s);
              const Ptrs p = d.ptrs(s);
              harness::run_case(
                  t, stream,
                  [&](cudaStream_t st) {
                    harness::launch_once(st, graph,
                                         [&](cudaStream_t x) { return launch(c, p, x); });
                  },
                  [&]() { return d.download(s) == want ? std::string() : describe(s, c, graph); });
              t.count(kOpNames[op]);
            }
          }
        }
      }
    }
  }
}

// ---- Hidden-state gathers
// --------------------------------------------------------------------------

struct HiddenCase {
  fdspec::HiddenGather kind;
  int64_t B, N, H, esize;
  std::vector<int32_t> slt, enc, acc, base_slt, last;
  std::vector<uint8_t> input;
};

HiddenCase make_hidden(Rng& r, fdspec::HiddenGather kind, int64_t B, int64_t H, int64_t esize,
                       double odd) {
  HiddenCase c{kind, B, 0, H, esize, {}, {}, {}, {}, {}, {}};
  int64_t rows = 0;
  for (int64_t b = 0; b < B; ++b) {
    const bool prefill = r.chance(0.25);
    c.enc.push_back(prefill ? static_cast<int32_t>(r.uni(1, 5)) : 0);
    c.slt.push_back(static_cast<int32_t>(r.uni(0, 2)));
    c.base_slt.push_back(prefill ? c.enc.back()
                                 : static_cast<int32_t>(r.uni(r.chance(odd) ? -2 : 0, 4)));
    c.acc.push_back(static_cast<int32_t>(r.uni(r.chance(odd) ? -2 : 0, r.chance(odd) ? 8 : 4)));
    c.last.push_back(static_cast<int32_t>(r.uni(r.chance(odd) ? -1 : 0, 4)));
    rows += std::max<int32_t>(
        kind == fdspec::HiddenGather::kTarget ? c.base_slt.back() : c.last.back(), 0);
  }
  c.N = std::max<int64_t>(0, rows + (r.chance(odd) ? r.uni(-3, 3) : 0));
  c.input.resize(c.N * H * esize);
  for (auto& x : c.input) x = static_cast<uint8_t>(r.uni(0, 255));
  return c;
}

fdspec::HiddenGatherParams hidden_params(const HiddenCase& c, const void* in, void* out,
                                         int32_t* count, const int32_t* slt, const int32_t* enc,
                                         const int32_t* acc, const int32_t* base,
                                         const int32_t* last) {
  return harness::hidden_gather_params(c.kind, in, out, count, c.N, c.H * c.esize, slt, enc, acc,
                                       base, last, c.B);
}

void hidden_ops(harness::Tally& t, const harness::Stream& stream, bool quick) {
  Rng r(53);
  const std::vector<int64_t> batches =
      quick ? std::vector<int64_t>{0, 1, 64} : std::vector<int64_t>{0, 1, 5, 64, 300};
  for (auto kind : {fdspec::HiddenGather::kTarget, fdspec::HiddenGather::kSelf}) {
    for (int64_t B : batches) {
      for (int64_t H : {1, 7, 8, 64, 4096}) {
        if (quick && H == 4096 && B > 1) continue;
        for (int64_t esize : {2, 4}) {
          for (bool graph : {false, true}) {
            const HiddenCase c = make_hidden(r, kind, B, H, esize, graph ? 0.3 : 0.0);
            std::vector<uint8_t> want(c.input.size(), 0xAB);
            std::vector<int32_t> want_count{-7};
            fdspec::hidden_gather_cpu(
                hidden_params(c, c.input.data(), want.data(), want_count.data(), c.slt.data(),
                              c.enc.data(), c.acc.data(), c.base_slt.data(), c.last.data()));
            DevVec<uint8_t> in(c.input), out(std::vector<uint8_t>(c.input.size(), 0xCD));
            DevVec<int32_t> count(std::vector<int32_t>{-9}), slt(c.slt), enc(c.enc), acc(c.acc),
                base(c.base_slt), last(c.last);
            const auto p = hidden_params(c, in.ptr(), out.ptr(), count.ptr(), slt.ptr(), enc.ptr(),
                                         acc.ptr(), base.ptr(), last.ptr());
            auto go = [&](cudaStream_t st) -> cudaError_t {
              auto& selftest = harness::selftest();
              if (!selftest.host_backend) return fdspec::hidden_gather_gpu(p, st);
              fdspec::hidden_gather_cpu(p);
              if (selftest.perturb) {
                p.output_token_num[0] ^= 1;
                selftest.perturbed = true;
              }
              return cudaSuccess;
            };
            harness::run_case(
                t, stream, [&](cudaStream_t st) { harness::launch_once(st, graph, go); },
                [&]() {
                  const bool same = out.download() == want && count.download() == want_count;
                  return same ? std::string()
                              : std::string(kind == fdspec::HiddenGather::kTarget ? "hidden"
                                                                                  : "self_hidden") +
                                    " B=" + std::to_string(B) + " H=" + std::to_string(H) +
                                    " esize=" + std::to_string(esize) + (graph ? " graph" : "");
                });
            t.count(kind == fdspec::HiddenGather::kTarget ? "hidden" : "self_hidden");
          }
        }
      }
    }
  }
}

// A whole upstream-shaped step captured once, replayed on new states.
void step_rounds(harness::Tally& t, const harness::Stream& stream, bool quick) {
  Rng r(54);
  const int64_t B = 64, W = 6, D = 40;
  State s = make_state(r, B, W, D, 0.1);
  Dev d(s);
  const Ptrs p = d.ptrs(s);
  const OpCall calls[] = {{0, 2, false, 0}, {1, 2, false, 0}, {1, 2, false, 1}, {2, 2, false, 0}};
  auto step = [&](cudaStream_t st) -> cudaError_t {
    for (const OpCall& c : calls) {
      const cudaError_t e = launch(c, p, st);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  };
  const harness::Graph g(stream.get(), step);
  for (int round = 0; round < (quick ? 3 : 20); ++round) {
    State fresh = make_state(r, B, W, D, 0.1);
    fresh.L = s.L;
    fresh.input_ids.resize(B * s.L);
    fresh.N = s.N;
    fresh.next.resize(s.next.size());
    d.upload(fresh);
    State want = fresh;
    for (const OpCall& c : calls) run_cpu(c, host_ptrs(want));
    harness::run_case(
        t, stream, [&](cudaStream_t st) { g.replay(st); },
        [&]() {
          return d.download(fresh) == want ? std::string() : "step round " + std::to_string(round);
        });
    t.count("step_rounds");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const harness::Mode mode = harness::parse_mode(argc, argv);
  return harness::run_harness("mtp_state_vs_cpu", mode, [&](harness::Tally& t) {
    const harness::Stream stream;
    token_ops(t, stream, mode.quick);
    hidden_ops(t, stream, mode.quick);
    step_rounds(t, stream, mode.quick);
  });
}
