// ngram_match's CUDA launcher against its CPU implementation, at the kernel layer (no Paddle), bit
// for bit, on random batches: small grids with out-of-range values and binding thresholds, mid-size
// batches with thresholds around the batch's floor, n-gram sizes up to 64, graph mode (pad_to_max,
// with max_draft_tokens below, at and above K) on a third of the cases, CUDA-graph capture and
// replay, repeated launches, and 256 x 128k batches; thresholds on both sides of the walk-free
// bound (T = U - 1
// .. U + 2), with hostile max_dec_len and draft_token_num. Usage and exit status:
// tests/cuda/harness.cuh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "harness.cuh"
#include "ngram_match/ngram_match.h"
#include "proposer_params.cuh"

namespace {

using namespace fdspec;
using harness::DevVec;

// clang-format off
#define NGRAM_ARRAYS(X)                                                          \
  X(int64_t, ids) X(int64_t, P) X(int64_t, s) X(int64_t, drafts) X(int64_t, mdl) \
  X(int32_t, dtn) X(int32_t, slt) X(int32_t, enc) X(int32_t, dec)
// clang-format on
struct Batch {
  int64_t B, W, K;
  HARNESS_VECTORS(NGRAM_ARRAYS)
};

struct DevBatch {
  HARNESS_MIRROR(DevBatch, Batch, NGRAM_ARRAYS)
};

Batch make(std::mt19937_64& g, int64_t B, int64_t W, int64_t K, int64_t vocab, int maxn,
           double p_odd) {
  auto U = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(g);
  };
  auto R = [&]() { return std::uniform_real_distribution<double>(0, 1)(g); };
  Batch b;
  b.B = B;
  b.W = W;
  b.K = K;
  int64_t rows = B + U(0, 2);
  b.ids.assign(rows * W, -1);
  harness::resize_all(B, b.P, b.s, b.mdl, b.dtn, b.slt, b.enc, b.dec);
  b.drafts.resize(B * (K + 1));
  for (int64_t i = 0; i < B * (K + 1); ++i) b.drafts[i] = -100 - i;
  for (int64_t r = B; r < rows; ++r)
    for (int64_t j = 0; j < W; ++j) b.ids[r * W + j] = U(0, vocab - 1);
  for (int64_t i = 0; i < B; ++i) {
    int64_t* row = b.ids.data() + i * W;
    int64_t used = W ? U(0, W) : 0;
    b.P[i] = U(0, used);
    b.s[i] = used - b.P[i];
    for (int64_t j = 0; j < used; ++j) row[j] = U(0, vocab - 1);
    if (used && R() < 0.5) {
      int64_t n = U(1, maxn);
      if (used >= 2 * n) {
        int64_t src = U(0, used - 2 * n);
        for (int64_t j = 0; j < n; ++j) row[used - n + j] = row[src + j];
      }
    }
    if (R() < p_odd)
      for (int64_t j = used; j < W; ++j) row[j] = U(0, vocab - 1);
    b.mdl[i] = R() < 0.3 ? b.s[i] + 1 + U(0, K + 2) : (1 << 20);
    b.dtn[i] = R() < 0.3 ? (int32_t)U(0, K + 2) : (int32_t)K;
    b.slt[i] = (int32_t)U(0, 3);
    b.enc[i] = 0;
    b.dec[i] = 0;
    double st = R();
    if (st < 0.2) {
      b.enc[i] = (int32_t)U(1, 63);
      b.dec[i] = (int32_t)U(0, 2);
      b.slt[i] = (int32_t)U(1, 63);
    } else if (st >= 0.35)
      b.dec[i] = (int32_t)std::max<int64_t>(used, 1);
    if (R() < p_odd) {
      switch (U(0, 6)) {
        case 0:
          b.P[i] = -U(1, 9);
          break;
        case 1:
          b.P[i] = W + U(0, 9);
          break;
        case 2:
          b.s[i] = W + U(1, 9);
          break;
        case 3:
          b.s[i] = -U(1, 9);
          break;
        case 4:
          b.mdl[i] = U(0, 1) ? INT64_MAX : INT64_MIN;
          break;
        case 5:
          b.dtn[i] = U(0, 1) ? INT32_MAX : INT32_MIN;
          break;
        default:
          if (b.enc[i] > 0)
            b.slt[i] = -(int32_t)U(1, 63);
          else {
            b.dec[i] = -1;
            b.enc[i] = -(int32_t)U(0, 2);
          }
      }
    }
  }
  return b;
}

// The parameters over the arrays of `a`: the Batch `b` itself (host) or its DevBatch (device).
template <class A>
NgramMatchParams params_of(const Batch& b, A& a, int maxn, int64_t T, bool pad, int64_t mdt) {
  return harness::ngram_match_params_of(a, b.B, b.W, b.K, maxn, mdt, pad, T);
}

NgramMatchParams params(Batch& b, int maxn, int64_t T, bool pad, int64_t mdt) {
  return params_of(b, b, maxn, T, pad, mdt);
}

// The GPU launcher; in the self-test the CPU implementation, perturbed on request.
cudaError_t launch(const NgramMatchParams& p, cudaStream_t stream) {
  auto& st = harness::selftest();
  if (!st.host_backend) return ngram_match_gpu(p, stream);
  ngram_match_cpu(p);
  if (p.batch > 0)
    harness::perturb(p.seq_lens_this_time[p.batch - 1],
                     p.draft_tokens[p.batch * p.draft_stride - 1]);
  return cudaSuccess;
}

std::string describe(const Batch& b, const Batch& c, const std::vector<int64_t>& dr,
                     const std::vector<int32_t>& sl, int maxn, int64_t T, bool graph, bool pad,
                     int64_t mdt) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "B=%ld W=%ld K=%ld maxn=%d T=%ld graph=%d pad_to_max=%d max_draft_tokens=%ld",
                (long)b.B, (long)b.W, (long)b.K, maxn, (long)T, graph, pad, (long)mdt);
  std::string s = buf;
  for (int64_t i = 0; i < b.B; ++i) {
    bool rowbad = sl[i] != c.slt[i];
    for (int64_t k = 0; k <= b.K; ++k)
      rowbad |= dr[i * (b.K + 1) + k] != c.drafts[i * (b.K + 1) + k];
    if (!rowbad) continue;
    if (b.W <= 64) {
      std::snprintf(
          buf, sizeof(buf),
          "\n  slot %ld P=%ld s=%ld enc=%d dec=%d slt_in=%d dtn=%d mdl=%ld cpu_slt=%d gpu_slt=%d",
          (long)i, (long)b.P[i], (long)b.s[i], b.enc[i], b.dec[i], b.slt[i], b.dtn[i],
          (long)b.mdl[i], c.slt[i], sl[i]);
    } else {
      std::snprintf(buf, sizeof(buf), "\n  slot %ld cpu_slt=%d gpu_slt=%d", (long)i, c.slt[i],
                    sl[i]);
    }
    s += buf;
  }
  return s;
}

// The walk-free bound's U (ngram_walk.h) of a batch, as the GPU sums it.
int64_t walk_bound(Batch& b) {
  const NgramMatchParams p = params(b, 1, 0, false, 0);
  int64_t u = 0;
  for (int64_t i = 0; i < b.B; ++i) u += ngram_match_walk_free_term(p, i);
  return u;
}

void run_case(harness::Tally& t, const harness::Stream& stream, Batch b, int maxn, int64_t T,
              bool graph, int repeats = 1, bool pad = false, int64_t mdt = 0) {
  Batch c = b;
  NgramMatchParams pc = params(c, maxn, T, pad, mdt);
  ngram_match_cpu(pc);
  for (int64_t i = 0; i < b.B; ++i) t.count("drafted_slots", c.slt[i] > 1 && c.enc[i] <= 0);
  DevBatch d(b);
  t.count("pad_to_max_cases", pad);
  const int64_t u = walk_bound(b);
  t.count("walk_free_cases", ngram_walk_free(b.B, T, u));
  t.count("walk_free_cases_u_eq_t_minus_1", ngram_walk_free(b.B, T, u) && u == T - 1);
  t.count("walked_cases_u_eq_t", u == T);
  {  // The bound itself, on the CPU: a walk-free batch comes out as with no threshold at all.
    Batch free = b;
    NgramMatchParams pf = params(free, maxn, INT64_MAX, pad, mdt);
    ngram_match_cpu(pf);
    const bool same = free.slt == c.slt && free.drafts == c.drafts;
    t.count("threshold_binds_at_u_eq_t", u == T && !same);
    t.begin_case();
    t.record(same || !ngram_walk_free(b.B, T, u),
             "walk-free bound unsound on the CPU: " +
                 describe(b, c, free.drafts, free.slt, maxn, T, graph, pad, mdt));
  }
  const NgramMatchParams pg = params_of(b, d, maxn, T, pad, mdt);
  for (int rep = 0; rep < repeats; ++rep) {
    d.drafts.upload(b.drafts);
    d.slt.upload(b.slt);
    harness::run_case(
        t, stream,
        [&](cudaStream_t st) {
          harness::launch_once(st, graph, [&](cudaStream_t s) { return launch(pg, s); });
        },
        [&] {
          const std::vector<int64_t> dr = d.drafts.download();
          const std::vector<int32_t> sl = d.slt.download();
          return dr == c.drafts && sl == c.slt ? std::string()
                                               : describe(b, c, dr, sl, maxn, T, graph, pad, mdt);
        });
  }
}

void body(harness::Tally& t, bool quick) {
  std::mt19937_64 g(1234);
  // Progress on stderr, so that a run cut short by a time limit says how far it got.
  const auto t0 = std::chrono::steady_clock::now();
  auto phase = [&](const char* name) {
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "  %s done at %.1f s\n", name, sec);
  };
  const harness::Stream stream;
  auto U = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(g);
  };
  // Thresholds that do not bind (2^20, 2^50) or sit at the walk-free bound's edge: with U the bound
  // (ngram_walk.h), T = U + 1 and U + 2 skip the walk (each search block finishes its own slot), T
  // = U and U - 1 walk (the threshold may or may not change the outcome).
  auto unbound = [&]() { return U(0, 1) == 0 ? int64_t{1} << 20 : int64_t{1} << 50; };
  auto edge = [&](Batch& b) { return walk_bound(b) + U(-1, 2); };
  const int small = quick ? 150 : 20000;
  for (int it = 0; it < small; ++it) {
    int64_t B = U(0, 40), W = U(0, 60), K = U(0, 7), vocab = U(1, 5);
    int maxn = (int)U(1, it % 10 == 0 ? 64 : 6);
    Batch b = make(g, B, W, K, vocab, maxn, 0.15);
    const int64_t mode = U(0, 5);
    int64_t T = mode < 2 ? unbound() : (mode < 4 ? edge(b) : U(0, 3 * B + 10));
    run_case(t, stream, b, maxn, T, it % 50 == 0, 1, it % 3 == 1, U(-1, K + 2));
  }
  phase("small");
  const int mids = quick ? 4 : 300;
  for (int it = 0; it < mids; ++it) {
    int64_t B = U(1, 300), W = U(1, 5000), K = U(1, 8), vocab = U(2, 50);
    int maxn = (int)U(1, it % 5 == 0 ? 64 : 5);
    Batch b = make(g, B, W, K, vocab, maxn, 0.05);
    int64_t enc_sum = 0, counted = 0;
    for (int64_t i = 0; i < B; ++i) {
      if (b.enc[i] > 0) enc_sum += std::max(b.slt[i], 0);
      counted += b.enc[i] > 0 || b.dec[i] > 0;
    }
    int64_t T =
        U(0, 3) == 0 ? unbound() : (U(0, 2) == 0 ? edge(b) : counted + enc_sum + U(-5, 2 * B + 5));
    run_case(t, stream, b, maxn, T, it % 10 == 0, it % 30 == 0 ? 5 : 1, it % 3 == 1, U(-1, K + 2));
  }
  // Few slots with long rows: the search runs C = 2 .. 8 blocks per slot (a cluster). Rare matches
  // (a large vocabulary) make the blocks scan to the end; frequent ones stop them at an early
  // round.
  phase("mid-size");
  const int clustered = quick ? 2 : 30;
  for (int it = 0; it < clustered; ++it) {
    int64_t B = quick ? U(1, 3) : U(1, 16), W = quick ? U(16384, 40000) : U(16384, 1 << 17),
            K = U(1, 8), vocab = it % 3 == 0 ? 4 : (it % 3 == 1 ? 50 : 30000);
    int maxn = (int)U(1, it % 4 == 0 ? 64 : 5);
    Batch b = make(g, B, W, K, vocab, maxn, 0.05);
    int64_t T = U(0, 2) == 0 ? unbound() : (U(0, 1) == 0 ? edge(b) : U(0, 3 * B + 10));
    run_case(t, stream, b, maxn, T, it % 10 == 0, it % 15 == 0 ? 3 : 1, it % 3 == 1, U(-1, K + 2));
  }
  phase("clustered");
  // One block per slot (B > SMs / 4 on an H100: no cluster) with rows of several 8192-token rounds
  // of the streaming search, of odd and even widths (rows on either 16-byte alignment).
  const int streamed = quick ? 1 : 24;
  for (int it = 0; it < streamed; ++it) {
    int64_t B = U(34, quick ? 40 : 140), W = U(8193, quick ? 20000 : 40000), K = U(1, 8),
            vocab = it % 3 == 0 ? 4 : (it % 3 == 1 ? 50 : 30000);
    int maxn = (int)U(1, it % 4 == 0 ? 64 : 5);
    Batch b = make(g, B, W, K, vocab, maxn, 0.05);
    int64_t T = U(0, 2) == 0 ? unbound() : (U(0, 1) == 0 ? edge(b) : U(0, 3 * B + 10));
    run_case(t, stream, b, maxn, T, it % 10 == 0, it % 8 == 0 ? 3 : 1, it % 3 == 1, U(-1, K + 2));
  }
  // Long rows with one block per slot and every block resident: the shared-memory ring at C = 1.
  for (int it = 0; it < (quick ? 1 : 4); ++it) {
    int64_t B = U(34, 60), W = quick ? 65600 : U(65537, 1 << 17), K = U(1, 8),
            vocab = it % 2 == 0 ? 4 : 30000;
    Batch b = make(g, B, W, K, vocab, 3, 0.05);
    run_case(t, stream, b, 3, U(0, 1) == 0 ? unbound() : edge(b), it == 1, 1, it % 2 == 1,
             U(-1, K + 2));
  }
  phase("streamed");
  if (!quick) {
    for (int it = 0; it < 6; ++it) {
      int64_t vocab = it < 2 ? 1000 : (it < 4 ? 4 : 50);
      int maxn = it % 2 ? 5 : 3;
      Batch b = make(g, 256, 1 << 17, 7, vocab, maxn, 0.05);
      run_case(t, stream, b, maxn, it < 3 ? (1 << 20) : (it == 3 ? walk_bound(b) + 1 : 900),
               it == 5, 2, it % 2 == 1, 7);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return harness::run_main(argc, argv, "ngram_match_vs_cpu", body);
}
