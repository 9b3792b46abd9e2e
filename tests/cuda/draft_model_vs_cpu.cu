// The draft-model ops' CUDA launchers against their CPU implementations, at the kernel layer (no
// Paddle), bit for bit on every tensor: whole MTP steps (draft_model_greedy_preprocess,
// draft_model_greedy_update for substeps 0 .. steps - 1 on their own logits, draft_model_accept),
// and the fused draft_model_accept_preprocess against the two CPU ops (also with K + 1 > 32), on
// random slot states (every slot kind, unverified drafts left over, full pre_ids rows, hostile
// lengths), tiny and large vocabularies, float32 / float16 / bfloat16 logits with raw random 16-bit
// patterns (ties, NaN, inf, -0), logits rows off 16-byte boundaries. Then CUDA-graph rounds: a
// whole step captured once, new state and logits copied into the captured buffers before each
// replay. Usage: tests/cuda/harness.cuh.
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "draft_model/draft_model.h"
#include "proposer_params.cuh"
#include "harness.cuh"

namespace {

using fdspec::LogitsDType;
using harness::DevVec;
using harness::Rng;

struct Shape {
  int64_t B = 0, rows = 0, D = 1, K1 = 2, V = 1;
  int steps = 1;
  LogitsDType dtype = LogitsDType::kFloat32;
  int64_t esize() const { return fdspec::logits_dtype_size(dtype); }
};

// Every tensor of the three ops. Bools are held as bytes.
// logits: steps x rows x V elements of the dtype (only read).
// clang-format off
#define DRAFT_STATE(X)                                                                      \
  X(int64_t, input_ids) X(int64_t, step) X(int64_t, pre) X(int64_t, mdl) X(int64_t, bmdl)   \
  X(int64_t, drafts) X(int64_t, acc_tokens) X(int32_t, dec) X(int32_t, num) X(int32_t, slt) \
  X(int32_t, enc) X(int32_t, bdec) X(int32_t, acc_num) X(uint8_t, stop) X(uint8_t, logits)
// clang-format on
struct State {
  HARNESS_VECTORS(DRAFT_STATE)
  HARNESS_SAME_VECTORS(State, DRAFT_STATE)
};

State make_state(Rng& r, const Shape& sh, double odd) {
  const int64_t B = sh.B, D = sh.D, K1 = sh.K1, V = sh.V;
  const int64_t vocab = std::min<int64_t>(V, 50);
  State s;
  s.pre.resize(sh.rows * D);
  for (auto& t : s.pre) t = r.chance(0.9) ? r.uni(0, vocab - 1) : -1;
  s.drafts.resize(sh.rows * K1);
  for (auto& t : s.drafts) t = r.uni(-1, vocab - 1);
  s.acc_tokens.resize(sh.rows * K1);
  for (auto& t : s.acc_tokens) t = r.uni(0, vocab - 1);
  harness::resize_all(B, s.input_ids, s.step, s.mdl, s.bmdl, s.dec, s.num, s.slt, s.enc, s.bdec,
                      s.acc_num, s.stop);
  for (int64_t b = 0; b < B; ++b) {
    s.pre[b * D] = -1;
    const double kind = r.real();  // decoding, prefill, idle, stopped
    s.enc[b] = kind > 0.7 && kind <= 0.85 ? static_cast<int32_t>(r.uni(1, 9)) : 0;
    s.bdec[b] = kind <= 0.7 || kind > 0.95 ? static_cast<int32_t>(r.uni(1, 300)) : 0;
    s.stop[b] = kind > 0.95;
    s.step[b] = r.chance(0.1) ? D - 1 : r.uni(0, D - 1);  // full rows too
    s.num[b] = static_cast<int32_t>(r.uni(0, std::min<int64_t>(K1 - 1, s.step[b])));
    s.input_ids[b] = r.uni(-3, vocab);
    s.dec[b] = static_cast<int32_t>(r.uni(0, 5));
    s.mdl[b] = r.uni(0, 9);
    s.bmdl[b] = r.uni(1, 1000);
    s.slt[b] = static_cast<int32_t>(r.uni(0, K1));
    s.acc_num[b] = static_cast<int32_t>(r.uni(0, K1));
    if (r.chance(odd)) {
      r.one_of({[&] { s.step[b] = r.pick<int64_t>({INT64_MIN, -1, D, D + 5, INT64_MAX}); },
                [&] {
                  s.num[b] =
                      r.pick<int32_t>({INT32_MIN, -1, static_cast<int32_t>(K1 + 3), INT32_MAX});
                },
                [&] {
                  s.acc_num[b] =
                      r.pick<int32_t>({INT32_MIN, -2, static_cast<int32_t>(K1 + 1), INT32_MAX});
                },
                [&] { s.bdec[b] = r.pick<int32_t>({INT32_MIN, -1, INT32_MAX}); },
                [&] { s.enc[b] = r.pick<int32_t>({INT32_MIN, -1, INT32_MAX}); },
                [&] {
                  s.pre[b * D + std::min<int64_t>(std::max<int64_t>(s.step[b], 0), D - 1)] =
                      -r.uni(1, 5);
                },
                [&] { s.bmdl[b] = r.pick<int64_t>({INT64_MIN, INT64_MAX}); }});
    }
  }
  // Logits: float32 small integers (ties) or random values with NaN / inf / -0; 16-bit types as raw
  // random bit patterns, a third of them forced into a few values so that ties are common.
  const int64_t n = sh.steps * sh.rows * V;
  s.logits.resize(n * sh.esize());
  for (int64_t i = 0; i < n; ++i) {
    if (sh.dtype == LogitsDType::kFloat32) {
      const double c = r.real();
      float x = c < 0.5 ? static_cast<float>(r.uni(-2, 2))
                        : (c < 0.9 ? static_cast<float>(r.real() * 8 - 4)
                                   : r.pick<float>({-0.0f, 0.0f, __builtin_inff(),
                                                    -__builtin_inff(), __builtin_nanf("")}));
      std::memcpy(s.logits.data() + i * 4, &x, 4);
    } else {
      uint16_t h = r.chance(0.33)
                       ? r.pick<uint16_t>({0x3C00, 0x3C00, 0x8000, 0x0000, 0x7C00, 0xFF80})
                       : static_cast<uint16_t>(r.uni(0, 0xFFFF));
      std::memcpy(s.logits.data() + i * 2, &h, 2);
    }
  }
  return s;
}

// The step on raw pointers: the same function drives the CPU (host pointers) and the GPU (device).
struct Ptrs {
  harness::FusedMtpPtrs op;  // the parameters of each op (proposer_params.cuh)
  const uint8_t* logits;     // [steps, rows, V] of sh.dtype
};

// The pointers of a State (host vectors) or a DeviceState (device buffers).
template <class S>
Ptrs ptrs_of(const Shape& sh, S& s) {
  // The accept + preprocess's params in their field order (draft_model.h), then V and the drafts.
  return {{{s.input_ids.data(), s.dec.data(), s.step.data(), s.pre.data(), sh.D, s.num.data(),
            s.mdl.data(), s.acc_tokens.data(), s.acc_num.data(), sh.K1, s.slt.data(), s.enc.data(),
            s.bdec.data(), reinterpret_cast<bool*>(s.stop.data()), s.bmdl.data(), sh.B},
           sh.V,
           s.drafts.data()},
          s.logits.data()};
}

fdspec::DraftModelGreedyPreprocessParams pre_params(const Ptrs& q) {
  return q.op.accept_preprocess().preprocess();
}

fdspec::DraftModelGreedyUpdateParams upd_params(const Shape& sh, const Ptrs& q, int substep) {
  return q.op.update(q.logits + static_cast<int64_t>(substep) * sh.rows * sh.V * sh.esize(),
                     substep, sh.dtype);
}

fdspec::DraftModelAcceptParams acc_params(const Ptrs& q) {
  return q.op.accept_preprocess().accept();
}

void cpu_ops(const Shape& sh, const Ptrs& q) {
  fdspec::draft_model_greedy_preprocess_cpu(pre_params(q));
  for (int i = 0; i < sh.steps; ++i) fdspec::draft_model_greedy_update_cpu(upd_params(sh, q, i));
  fdspec::draft_model_accept_cpu(acc_params(q));
}

void cpu_step(const Shape& sh, State& s) { cpu_ops(sh, ptrs_of(sh, s)); }

// The GPU step; in the self-test the CPU implementation, with a perturbed output now and then.
cudaError_t gpu_step(const Shape& sh, const Ptrs& q, cudaStream_t stream) {
  auto& st = harness::selftest();
  if (st.host_backend) {
    cpu_ops(sh, q);
    if (st.perturb && sh.B > 0) {
      static int turn = 0;
      switch (++turn % 3) {
        case 0:
          q.op.ap.step_idx[sh.B - 1] += 1;
          break;
        case 1:
          q.op.ap.pre_ids[sh.B * sh.D - 1] ^= 1;
          break;
        default:
          q.op.draft_tokens[sh.B * sh.K1 - 1] += 1;
          break;
      }
      st.perturbed = true;
    }
    return cudaSuccess;
  }
  cudaError_t e = fdspec::draft_model_greedy_preprocess_gpu(pre_params(q), stream);
  for (int i = 0; i < sh.steps && e == cudaSuccess; ++i)
    e = fdspec::draft_model_greedy_update_gpu(upd_params(sh, q, i), stream);
  return e == cudaSuccess ? fdspec::draft_model_accept_gpu(acc_params(q), stream) : e;
}

// The deferred accept: draft_model_accept then draft_model_greedy_preprocess on the CPU against the
// fused launcher (in the self-test the CPU implementation, with a perturbed output now and then).
cudaError_t gpu_accept_preprocess(const Shape& sh, const Ptrs& q, cudaStream_t stream) {
  auto& st = harness::selftest();
  if (st.host_backend) {
    fdspec::draft_model_accept_preprocess_cpu(q.op.accept_preprocess());
    if (st.perturb && sh.B > 0) {
      q.op.ap.input_ids[sh.B - 1] += 1;
      st.perturbed = true;
    }
    return cudaSuccess;
  }
  return fdspec::draft_model_accept_preprocess_gpu(q.op.accept_preprocess(), stream);
}

struct DeviceState {
  HARNESS_MIRROR(DeviceState, State, DRAFT_STATE)
  Ptrs ptrs(const Shape& sh) const { return ptrs_of(sh, *this); }
};

std::string describe(const Shape& sh, const State& want, const State& got, const char* how) {
  char buf[512];
  std::snprintf(
      buf, sizeof(buf),
      "[%s] B=%" PRId64 " rows=%" PRId64 " D=%" PRId64 " K+1=%" PRId64 " V=%" PRId64
      " steps=%d dtype=%d; first differences: step %" PRId64 " pre %" PRId64 " drafts %" PRId64
      " slt %" PRId64 " input_ids %" PRId64 " dec %" PRId64,
      how, sh.B, sh.rows, sh.D, sh.K1, sh.V, sh.steps, static_cast<int>(sh.dtype),
      harness::first_diff(want.step, got.step), harness::first_diff(want.pre, got.pre),
      harness::first_diff(want.drafts, got.drafts), harness::first_diff(want.slt, got.slt),
      harness::first_diff(want.input_ids, got.input_ids), harness::first_diff(want.dec, got.dec));
  return buf;
}

void count_coverage(harness::Tally& t, const Shape& sh, const State& in, const State& want) {
  for (int64_t b = 0; b < sh.B; ++b) {
    t.count("drafting_slots", want.slt[b] >= 2 && in.slt[b] != want.slt[b]);
    t.count("prefill_clears", in.enc[b] > 0 && !in.stop[b]);
    t.count("full_rows", in.step[b] == sh.D - 1);
  }
}

// One case: `enqueue(stream)` launches on dev's buffers, which must then hold `want`.
template <class Enqueue>
void check(harness::Tally& t, const harness::Stream& stream, const Shape& sh,
           const DeviceState& dev, const State& want, const char* how, Enqueue&& enqueue) {
  harness::run_case(t, stream, enqueue, [&] {
    const State got = dev.download();
    return got == want ? std::string() : describe(sh, want, got, how);
  });
}

void run_case(harness::Tally& t, const Shape& sh, const State& in, const harness::Stream& stream) {
  State want = in;
  cpu_step(sh, want);
  count_coverage(t, sh, in, want);
  DeviceState dev(in);
  check(t, stream, sh, dev, want, "eager",
        [&](cudaStream_t s) { CHECK(gpu_step(sh, dev.ptrs(sh), s)); });
}

void run_accept_preprocess_case(harness::Tally& t, const Shape& sh, const State& in,
                                const harness::Stream& stream) {
  State want = in;
  const Ptrs q = ptrs_of(sh, want);
  fdspec::draft_model_accept_cpu(acc_params(q));
  fdspec::draft_model_greedy_preprocess_cpu(pre_params(q));
  DeviceState dev(in);
  check(t, stream, sh, dev, want, "accept_preprocess",
        [&](cudaStream_t s) { CHECK(gpu_accept_preprocess(sh, dev.ptrs(sh), s)); });
}

void run_graph_rounds(harness::Tally& t, Rng& r, const Shape& sh, int replays,
                      const harness::Stream& stream) {
  State in = make_state(r, sh, 0.1);
  DeviceState dev(in);
  const Ptrs q = dev.ptrs(sh);
  const harness::Graph graph(stream.get(), [&](cudaStream_t s) { return gpu_step(sh, q, s); });
  for (int i = 0; i < replays; ++i) {
    in = make_state(r, sh, 0.1);
    dev.upload(in);
    State want = in;
    cpu_step(sh, want);
    check(t, stream, sh, dev, want, "graph replay", [&](cudaStream_t s) { graph.replay(s); });
  }
}

Shape make_shape(Rng& r, int64_t B, int64_t D, int64_t V) {
  Shape sh;
  sh.B = B;
  sh.rows = B + r.uni(0, 2);
  sh.D = D;
  sh.K1 = r.uni(2, 6);
  sh.V = V;
  sh.steps = static_cast<int>(r.uni(1, sh.K1 - 1));
  sh.dtype =
      r.pick<LogitsDType>({LogitsDType::kFloat32, LogitsDType::kFloat16, LogitsDType::kBFloat16});
  return sh;
}

void body(harness::Tally& t, bool quick) {
  Rng r(20261124);
  const harness::Stream stream;
  const int small = quick ? 80 : 6000;
  for (int it = 0; it < small; ++it) {
    const Shape sh = make_shape(r, r.uni(0, 40), r.uni(1, 12), r.uni(1, 50));
    run_case(t, sh, make_state(r, sh, 0.15), stream);
    if (it % 2 == 0) run_accept_preprocess_case(t, sh, make_state(r, sh, 0.15), stream);
  }
  // The fused accept + preprocess with K + 1 > 32 accepted tokens (lanes past the warp).
  for (int it = 0; it < (quick ? 2 : 40); ++it) {
    Shape sh = make_shape(r, r.uni(1, 70), r.uni(2, 80), 3);
    sh.K1 = r.uni(30, 40);
    run_accept_preprocess_case(t, sh, make_state(r, sh, 0.15), stream);
  }
  // Vectors, odd V (rows off 16-byte boundaries), many rows, in each of the update's launch shapes
  // (draft_model.cu; on an H100: B <= 33 rows split over clusters once V > 1024 float32, B <= 132
  // one 512-thread block per row, more one 256-thread block per row), also in the quick mode, which
  // the sanitizers run.
  const int large = quick ? 4 : 60;
  for (int it = 0; it < large; ++it) {
    const int64_t B =
        it % 4 == 0
            ? r.uni(1, 16)
            : (it % 4 == 1 ? r.uni(17, 33) : (it % 4 == 2 ? r.uni(34, 132) : r.uni(133, 300)));
    const Shape sh = make_shape(r, B, r.uni(2, 64), r.uni(51, quick ? 12000 : 40000));
    run_case(t, sh, make_state(r, sh, 0.05), stream);
  }
  const int shapes = quick ? 2 : 10;
  for (int it = 0; it < shapes; ++it) {
    run_graph_rounds(t, r, make_shape(r, r.uni(1, 64), r.uni(2, 40), r.uni(2, 2000)),
                     quick ? 3 : 20, stream);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return harness::run_main(argc, argv, "draft_model_vs_cpu", body);
}
