// hybrid_mtp_ngram's CUDA launcher against its CPU implementation, at the kernel layer (no Paddle),
// bit for bit on every output (draft_tokens, seq_lens_this_time) and on every input (which must be
// left as it was). Random batches with tiny vocabularies and planted patterns so that matches are
// common; thresholds that bind; min_ngram_size at 1, at max_ngram_size and in between; slots with
// ori == 0, with drafts already filling the row, with max_dec_len reached; docs/contract/general.md
// hostile values (negative and too large lengths, negative seq_lens_this_time, int64 limits, extra
// rows); n-gram sizes up to 64; wide rows; graph mode (pad_to_max) on about a third of the shapes;
// thresholds on both sides of the walk-free bound (T = U - 1 .. U + 2). Then CUDA-graph rounds: one
// capture per shape, new inputs copied into the captured buffers before each replay. Usage and exit
// status: tests/cuda/harness.cuh.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <string>
#include <vector>

#include "harness.cuh"
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"
#include "proposer_params.cuh"

namespace {

using harness::DevVec;
using harness::Rng;

// What a CUDA graph bakes in: sizes and scalar attributes.
struct Shape {
  int64_t B = 0, W = 0, D = 1, K1 = 1;
  int64_t ids_rows = 0, pre_rows = 0, draft_rows = 0;  // >= B: the op reads and writes only B rows
  int max_n = 1, min_n = 1;
  int64_t max_draft = 0, T = 0;
  bool pad = false;  // pad_to_max
  int64_t vocab = 2;
  double odd = 0.0;  // rate of hostile values per slot
};

// clang-format off
#define HYBRID_INPUTS(X)                                                         \
  X(int64_t, ids) X(int64_t, P) X(int64_t, pre) X(int64_t, s) X(int64_t, drafts) \
  X(int64_t, mdl) X(int32_t, slt) X(int32_t, dec)
// clang-format on
struct Inputs {
  HARNESS_VECTORS(HYBRID_INPUTS)
};

Shape make_shape(Rng& r, int64_t B, int64_t W, int64_t D, int64_t K1, int max_n_hi, int64_t vocab,
                 double odd) {
  Shape sh{B, W, D, K1};
  sh.vocab = vocab;
  sh.odd = odd;
  sh.ids_rows = B + r.uni(0, 2);
  sh.pre_rows = B + r.uni(0, 2);
  sh.draft_rows = B + r.uni(0, 2);
  sh.max_n = static_cast<int>(r.uni(1, max_n_hi));
  const double m = r.real();
  sh.min_n = m < 0.4 ? 1 : (m < 0.7 ? sh.max_n : static_cast<int>(r.uni(1, sh.max_n)));
  const double d = r.real();
  if (d < 0.55) {
    sh.max_draft = K1 - 1;
  } else if (d < 0.95) {
    sh.max_draft = r.uni(0, K1 + 1);  // K + 1, K + 2: the write clamp of hybrid_slot_budget binds
  } else {
    sh.max_draft = r.pick<int64_t>({-1, INT32_MAX});
  }
  sh.pad = r.chance(0.35);
  return sh;
}

Inputs make_inputs(Rng& r, const Shape& sh) {
  const int64_t B = sh.B, W = sh.W, D = sh.D, K1 = sh.K1;
  auto tok = [&]() { return r.uni(0, sh.vocab - 1); };
  Inputs in;
  in.ids.resize(sh.ids_rows * W);
  in.pre.resize(sh.pre_rows * D);
  for (auto& t : in.ids) t = tok();
  for (auto& t : in.pre) t = tok();
  in.drafts.resize(sh.draft_rows * K1);
  for (int64_t i = 0; i < static_cast<int64_t>(in.drafts.size()); ++i) in.drafts[i] = -100 - i;
  harness::resize_all(B, in.P, in.s, in.mdl, in.slt, in.dec);
  for (int64_t b = 0; b < B; ++b) {
    int64_t* row = in.ids.data() + b * W;
    int64_t* pre = in.pre.data() + b * D;
    const int64_t P = r.uni(0, W);
    const int64_t s = r.uni(0, D - 1);
    if (r.chance(0.5)) {
      for (int64_t j = P; j < W; ++j) row[j] = -1;
    }
    // Plant the pattern (pre[s - n + 1 .. s]) in the prompt or earlier in pre_ids.
    if (r.chance(0.6)) {
      const int64_t n = r.uni(1, std::min<int64_t>(sh.max_n, s + 1));
      if (r.chance(0.6) && P >= n) {
        const int64_t at = r.uni(0, P - n);
        for (int64_t k = 0; k < n; ++k) row[at + k] = pre[s - n + 1 + k];
      } else if (s + 1 >= 2 * n) {
        const int64_t at = r.uni(0, s + 1 - 2 * n);
        for (int64_t k = 0; k < n; ++k) pre[at + k] = pre[s - n + 1 + k];
      }
    }
    const double o = r.real();
    int64_t ori;
    if (o < 0.1) {
      ori = 0;
    } else if (o < 0.4) {
      ori = 1;
    } else if (o < 0.85) {
      ori = r.uni(std::min<int64_t>(2, K1), K1);
    } else {
      ori = K1 + r.uni(0, 2);  // drafts already fill the row (q <= 0)
    }
    const double dd = r.real();
    const int32_t dec = dd < 0.75 ? static_cast<int32_t>(r.uni(1, 100)) : 0;
    // max_dec_len reached (budget <= 0) or close, or far.
    const int64_t mdl = r.chance(0.3) ? s + 1 + r.uni(-2, K1 + 1) : (int64_t{1} << 20);
    in.P[b] = P;
    in.s[b] = s;
    in.slt[b] = static_cast<int32_t>(ori);
    in.dec[b] = dec;
    in.mdl[b] = mdl;
    if (r.chance(sh.odd)) {
      r.one_of({[&] { in.P[b] = -r.uni(1, 9); }, [&] { in.P[b] = W + r.uni(1, 9); },
                [&] { in.s[b] = -r.uni(1, 9); }, [&] { in.s[b] = D + r.uni(0, 9); },
                [&] { in.slt[b] = -static_cast<int32_t>(r.uni(1, 63)); },
                [&] { in.slt[b] = r.pick<int32_t>({INT32_MIN, INT32_MAX}); },
                [&] { in.dec[b] = r.pick<int32_t>({-1, INT32_MIN}); },
                [&] { in.mdl[b] = r.pick<int64_t>({INT64_MIN, INT64_MAX, -1}); },
                [&] { in.P[b] = r.pick<int64_t>({INT64_MIN, INT64_MAX}); },
                [&] { in.s[b] = r.pick<int64_t>({INT64_MIN, INT64_MAX}); }});
    }
  }
  return in;
}

// The parameters over the arrays of `a`: Inputs (host) or DeviceInputs (device).
template <class A>
fdspec::HybridMtpNgramParams params_of(const Shape& sh, A& a) {
  return harness::hybrid_params_of(a, sh.B, sh.W, sh.D, sh.K1, sh.max_n, sh.min_n, sh.max_draft,
                                   sh.pad, sh.T);
}

// The walk-free bound's U (ngram_walk.h) of a batch, as the GPU sums it.
int64_t walk_bound(const Shape& sh, Inputs& in) {
  const fdspec::HybridMtpNgramParams p = params_of(sh, in);
  int64_t u = 0;
  for (int64_t b = 0; b < sh.B; ++b) u += fdspec::hybrid_walk_free_term(p, b, in.slt[b]);
  return u;
}

// A threshold that binds inside the batch about half of the time; 2^20 and above do not; about one
// in six sits at the walk-free bound's edge: T = U + 1 and U + 2 skip the walk (each search block
// finishes its own slot), T = U and U - 1 walk.
int64_t make_threshold(Rng& r, const Shape& sh, Inputs& in) {
  int64_t floor = 0;
  for (int64_t b = 0; b < sh.B; ++b) floor += std::max<int64_t>(in.slt[b], 0) + (in.dec[b] > 0);
  const double t = r.real();
  if (t < 0.42) return std::max<int64_t>(floor + r.uni(-3, 2 * sh.B + 5), -3);
  if (t < 0.58) return walk_bound(sh, in) + r.uni(-1, 2);
  if (t < 0.68) return int64_t{1} << 20;
  if (t < 0.75) return int64_t{1} << 50;
  if (t < 0.9) return r.uni(0, 3);
  if (t < 0.97) return r.uni(-3, -1);
  return INT64_MAX;
}

Inputs cpu_result(const Shape& sh, const Inputs& in) {
  Inputs c = in;
  fdspec::hybrid_mtp_ngram_cpu(params_of(sh, c));
  return c;
}

// What the case reaches: slots that draft, a threshold that changes the outcome, MTP rows already
// full, graph-mode padding that changes the outcome.
void count_coverage(harness::Tally& t, const Shape& sh, const Inputs& in, const Inputs& want) {
  for (int64_t b = 0; b < sh.B; ++b) {
    t.count("drafted_slots", want.slt[b] > std::max<int32_t>(in.slt[b], 0));
    t.count("full_rows", in.slt[b] >= sh.K1);
  }
  Shape unbound = sh;
  unbound.T = INT64_MAX;
  const Inputs free = cpu_result(unbound, in);
  const bool same = free.slt == want.slt && free.drafts == want.drafts;
  t.count("threshold_binds", free.slt != want.slt);
  Inputs copy = in;
  const int64_t u = walk_bound(sh, copy);
  t.count("threshold_binds_at_u_eq_t", u == sh.T && !same);
  // The bound itself, on the CPU: a walk-free batch comes out as with no threshold at all.
  t.begin_case();
  t.record(same || !fdspec::ngram_walk_free(sh.B, sh.T, u),
           "walk-free bound unsound on the CPU: B=" + std::to_string(sh.B) +
               " T=" + std::to_string(sh.T) + " U=" + std::to_string(u));
  t.count("walk_free_cases", fdspec::ngram_walk_free(sh.B, sh.T, u));
  t.count("walk_free_cases_u_eq_t_minus_1",
          fdspec::ngram_walk_free(sh.B, sh.T, u) && u == sh.T - 1);
  t.count("walked_cases_u_eq_t", u == sh.T);
  if (sh.pad) {
    Shape unpadded = sh;
    unpadded.pad = false;
    t.count("padding_changes", cpu_result(unpadded, in).slt != want.slt);
  }
}

// The GPU launcher; in the self-test the CPU implementation, perturbed on request.
cudaError_t launch(const fdspec::HybridMtpNgramParams& p, cudaStream_t stream) {
  auto& st = harness::selftest();
  if (!st.host_backend) return fdspec::hybrid_mtp_ngram_gpu(p, stream);
  fdspec::hybrid_mtp_ngram_cpu(p);
  if (p.batch > 0)
    harness::perturb(p.seq_lens_this_time[p.batch - 1],
                     p.draft_tokens[p.batch * p.draft_stride - 1]);
  return cudaSuccess;
}

struct DeviceInputs {
  HARNESS_MIRROR(DeviceInputs, Inputs, HYBRID_INPUTS)
  fdspec::HybridMtpNgramParams params(const Shape& sh) const { return params_of(sh, *this); }
};

std::string describe(const Shape& sh, const Inputs& in, const Inputs& want, const Inputs& got,
                     const char* how) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "[%s] B=%" PRId64 " W=%" PRId64 " D=%" PRId64 " K+1=%" PRId64
                " max_n=%d min_n=%d "
                "max_draft=%" PRId64 " pad_to_max=%d T=%" PRId64 " vocab=%" PRId64,
                how, sh.B, sh.W, sh.D, sh.K1, sh.max_n, sh.min_n, sh.max_draft, sh.pad, sh.T,
                sh.vocab);
  std::string s = buf;
  if (got.ids != in.ids || got.P != in.P || got.pre != in.pre || got.s != in.s ||
      got.mdl != in.mdl || got.dec != in.dec) {
    s += "\n  an input tensor was modified";
  }
  int shown = 0;
  for (int64_t b = 0; b < sh.draft_rows && shown < 4; ++b) {
    bool bad = b < sh.B && want.slt[b] != got.slt[b];
    for (int64_t k = 0; k < sh.K1; ++k)
      bad |= want.drafts[b * sh.K1 + k] != got.drafts[b * sh.K1 + k];
    if (!bad) continue;
    ++shown;
    if (b >= sh.B) {
      std::snprintf(buf, sizeof(buf), "\n  row %" PRId64 " (past B) was written", b);
      s += buf;
      continue;
    }
    std::snprintf(buf, sizeof(buf),
                  "\n  slot %" PRId64 ": P=%" PRId64 " s=%" PRId64 " ori=%d dec=%d mdl=%" PRId64
                  " slt cpu=%d gpu=%d",
                  b, in.P[b], in.s[b], in.slt[b], in.dec[b], in.mdl[b], want.slt[b], got.slt[b]);
    s += buf;
  }
  return s;
}

bool same(const Inputs& in, const Inputs& want, const Inputs& got) {
  return got.drafts == want.drafts && got.slt == want.slt && got.ids == in.ids && got.P == in.P &&
         got.pre == in.pre && got.s == in.s && got.mdl == in.mdl && got.dec == in.dec;
}

void run_case(harness::Tally& t, const Shape& sh, const Inputs& in, const harness::Stream& stream) {
  const Inputs want = cpu_result(sh, in);
  count_coverage(t, sh, in, want);
  DeviceInputs dev(in);
  harness::check_inputs_case(t, stream, sh, in, want, dev, "eager",
                             [&](cudaStream_t s) { CHECK(launch(dev.params(sh), s)); });
}

// One capture, then `replays` rounds of new inputs copied into the captured buffers.
void run_graph_rounds(harness::Tally& t, Rng& r, const Shape& shape, int replays,
                      const harness::Stream& stream) {
  Shape sh = shape;
  Inputs in = make_inputs(r, sh);
  sh.T = make_threshold(r, sh, in);
  DeviceInputs dev(in);
  const fdspec::HybridMtpNgramParams p = dev.params(sh);
  const harness::Graph graph(stream.get(), [&](cudaStream_t s) { return launch(p, s); });
  for (int i = 0; i < replays; ++i) {
    if (i > 0) in = make_inputs(r, sh);
    dev.upload(in);
    const Inputs want = cpu_result(sh, in);
    count_coverage(t, sh, in, want);
    harness::check_inputs_case(t, stream, sh, in, want, dev, "graph replay",
                               [&](cudaStream_t s) { graph.replay(s); });
  }
}

void body(harness::Tally& t, bool quick) {
  Rng r(20260707);
  // Progress on stderr, so that a run cut short by a time limit says how far it got.
  const auto t0 = std::chrono::steady_clock::now();
  auto phase = [&](const char* name) {
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "  %s done at %.1f s\n", name, sec);
  };
  const harness::Stream stream;
  auto random_case = [&](int64_t B, int64_t W, int64_t D, int64_t K1, int max_n_hi, int64_t vocab,
                         double odd) {
    Shape sh = make_shape(r, B, W, D, K1, max_n_hi, vocab, odd);
    Inputs in = make_inputs(r, sh);
    sh.T = make_threshold(r, sh, in);
    run_case(t, sh, in, stream);
  };

  const int small = quick ? 120 : 20000;
  for (int it = 0; it < small; ++it) {
    random_case(r.uni(0, 40), r.uni(0, 60), r.uni(1, 40), r.uni(1, 8), it % 10 == 0 ? 64 : 6,
                r.uni(1, 4), 0.15);
  }
  phase("small");
  const int mid = quick ? 2 : 300;
  for (int it = 0; it < mid; ++it) {
    random_case(r.uni(1, quick ? 40 : 300), r.uni(1, 5000), r.uni(1, 2000), r.uni(1, 9),
                it % 5 == 0 ? 64 : 5, r.uni(2, 50), 0.05);
  }
  // Haystacks longer than the search kernel's ring of shared-memory tiles (4 x 4096 tokens), with a
  // large vocabulary so that the scan rarely stops early: the ring wraps around.
  phase("mid-size");
  random_case(3, 40000, 3000, 6, 3, 1000, 0.0);
  // Few slots with long rows: C = 2 .. 8 blocks search each slot (a cluster), stopping at an early
  // round (small vocabulary) or scanning to the end (large one).
  if (!quick) {
    for (int it = 0; it < 30; ++it) {
      const int64_t vocab = it % 3 == 0 ? 4 : (it % 3 == 1 ? 50 : 30000);
      random_case(r.uni(1, 16), r.uni(16384, int64_t{1} << 17), r.uni(1, 8192), r.uni(1, 9),
                  it % 4 == 0 ? 64 : 5, vocab, 0.05);
    }
  }
  phase("clustered");
  // One block per slot (B > SMs / 4 on an H100: no cluster) with haystacks of several 8192-token
  // rounds of the streaming search, of odd and even widths (rows on either 16-byte alignment).
  const int streamed = quick ? 1 : 24;
  for (int it = 0; it < streamed; ++it) {
    const int64_t vocab = it % 3 == 0 ? 4 : (it % 3 == 1 ? 50 : 30000);
    random_case(r.uni(34, quick ? 40 : 140), r.uni(8193, quick ? 20000 : 40000), r.uni(1, 20000),
                r.uni(1, 9), it % 4 == 0 ? 64 : 5, vocab, 0.05);
  }
  // Long rows with one block per slot and every block resident: the shared-memory ring at C = 1.
  for (int it = 0; it < (quick ? 1 : 4); ++it) {
    random_case(r.uni(34, 60), quick ? 60000 : r.uni(60000, int64_t{1} << 17), r.uni(6000, 20000),
                r.uni(1, 9), 5, it % 2 == 0 ? 4 : 30000, 0.05);
  }
  phase("streamed");
  if (!quick) {
    for (int64_t vocab : {1000, 4, 50})
      random_case(256, int64_t{1} << 16, int64_t{1} << 12, 8, 5, vocab, 0.02);
  }
  phase("256 x 64k");
  const int shapes = quick ? 2 : 12;
  for (int it = 0; it < shapes; ++it) {
    const Shape sh =
        make_shape(r, r.uni(1, 64), r.uni(1, 200), r.uni(1, 100), r.uni(2, 8), 5, r.uni(1, 4), 0.1);
    run_graph_rounds(t, r, sh, quick ? 3 : 25, stream);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return harness::run_main(argc, argv, "hybrid_mtp_ngram_vs_cpu", body);
}
