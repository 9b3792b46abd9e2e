// ngram_match's CUDA kernels against its CPU implementation, at the kernel layer (no Paddle needed), on
// random batches: small grids with out-of-range values and binding thresholds, mid-size batches with
// thresholds around the batch's floor, n-gram sizes up to 64, graph mode (pad_to_max, with
// max_draft_tokens below, at and above K) on a third of the cases, CUDA-graph capture and replay,
// repeated launches, and 256 x 128k batches. Exits 1 on any difference. Run with tests/cuda/run_ngram_match_check.sh;
// an argument ("quick") keeps it short for compute-sanitizer.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "ngram_match/ngram_match.h"

using namespace fdspec;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(2); } } while (0)

struct Batch {
  int64_t B, W, K;
  std::vector<int64_t> ids, P, s, drafts, mdl;
  std::vector<int32_t> dtn, slt, enc, dec;
};

static Batch make(std::mt19937_64& g, int64_t B, int64_t W, int64_t K, int64_t vocab, int maxn, double p_odd) {
  auto U = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
  auto R = [&]() { return std::uniform_real_distribution<double>(0, 1)(g); };
  Batch b; b.B = B; b.W = W; b.K = K;
  int64_t rows = B + U(0, 2);
  b.ids.assign(rows * W, -1); b.P.resize(B); b.s.resize(B); b.mdl.resize(B);
  b.dtn.resize(B); b.slt.resize(B); b.enc.resize(B); b.dec.resize(B);
  b.drafts.resize(B * (K + 1));
  for (int64_t i = 0; i < B * (K + 1); ++i) b.drafts[i] = -100 - i;
  for (int64_t r = B; r < rows; ++r) for (int64_t j = 0; j < W; ++j) b.ids[r * W + j] = U(0, vocab - 1);
  for (int64_t i = 0; i < B; ++i) {
    int64_t* row = b.ids.data() + i * W;
    int64_t used = W ? U(0, W) : 0;
    b.P[i] = U(0, used); b.s[i] = used - b.P[i];
    for (int64_t j = 0; j < used; ++j) row[j] = U(0, vocab - 1);
    if (used && R() < 0.5) {
      int64_t n = U(1, maxn);
      if (used >= 2 * n) { int64_t src = U(0, used - 2 * n); for (int64_t j = 0; j < n; ++j) row[used - n + j] = row[src + j]; }
    }
    if (R() < p_odd) for (int64_t j = used; j < W; ++j) row[j] = U(0, vocab - 1);
    b.mdl[i] = R() < 0.3 ? b.s[i] + 1 + U(0, K + 2) : (1 << 20);
    b.dtn[i] = R() < 0.3 ? (int32_t)U(0, K + 2) : (int32_t)K;
    b.slt[i] = (int32_t)U(0, 3); b.enc[i] = 0; b.dec[i] = 0;
    double st = R();
    if (st < 0.2) { b.enc[i] = (int32_t)U(1, 63); b.dec[i] = (int32_t)U(0, 2); b.slt[i] = (int32_t)U(1, 63); }
    else if (st >= 0.35) b.dec[i] = (int32_t)std::max<int64_t>(used, 1);
    if (R() < p_odd) {
      switch (U(0, 4)) {
        case 0: b.P[i] = -U(1, 9); break;
        case 1: b.P[i] = W + U(0, 9); break;
        case 2: b.s[i] = W + U(1, 9); break;
        case 3: b.s[i] = -U(1, 9); break;
        default: if (b.enc[i] > 0) b.slt[i] = -(int32_t)U(1, 63); else { b.dec[i] = -1; b.enc[i] = -(int32_t)U(0, 2); }
      }
    }
  }
  return b;
}

template <class T> static T* up(const std::vector<T>& v) {
  T* d = nullptr; CK(cudaMalloc(&d, std::max<size_t>(v.size(), 1) * sizeof(T)));
  if (!v.empty()) CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <class T> static std::vector<T> down(const T* d, size_t n) {
  std::vector<T> v(n); if (n) CK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost)); return v;
}

static NgramMatchParams params(Batch& b, int maxn, int64_t T, bool pad, int64_t mdt) {
  NgramMatchParams p;
  p.token_ids_all = b.ids.data(); p.token_ids_stride = b.W; p.prompt_lens = b.P.data(); p.step_idx = b.s.data();
  p.draft_token_num = b.dtn.data(); p.draft_tokens = b.drafts.data(); p.draft_stride = b.K + 1;
  p.seq_lens_this_time = b.slt.data(); p.seq_lens_encoder = b.enc.data(); p.seq_lens_decoder = b.dec.data();
  p.max_dec_len = b.mdl.data(); p.batch = b.B; p.max_ngram_size = maxn; p.threshold = T;
  p.pad_to_max = pad; p.max_draft_tokens = mdt;
  return p;
}

static long n_cases = 0, n_bad = 0, n_drafted = 0;

static long n_padded = 0;

static void run_case(Batch b, int maxn, int64_t T, bool graph, int repeats = 1, bool pad = false,
                     int64_t mdt = 0) {
  Batch c = b;
  NgramMatchParams pc = params(c, maxn, T, pad, mdt);
  ngram_match_cpu(pc);
  n_padded += pad;
  NgramMatchParams pg = params(b, maxn, T, pad, mdt);
  int64_t* d_ids = up(b.ids); int64_t* d_P = up(b.P); int64_t* d_s = up(b.s); int32_t* d_dtn = up(b.dtn);
  int64_t* d_mdl = up(b.mdl); int32_t* d_enc = up(b.enc); int32_t* d_dec = up(b.dec);
  for (int rep = 0; rep < repeats; ++rep) {
    int64_t* d_dr = up(b.drafts); int32_t* d_slt = up(b.slt);
    pg.token_ids_all = d_ids; pg.prompt_lens = d_P; pg.step_idx = d_s; pg.draft_token_num = d_dtn; pg.draft_tokens = d_dr;
    pg.seq_lens_this_time = d_slt; pg.seq_lens_encoder = d_enc; pg.seq_lens_decoder = d_dec; pg.max_dec_len = d_mdl;
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (graph) {
      cudaGraph_t gr; cudaGraphExec_t ex;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      CK(ngram_match_gpu(pg, st));
      CK(cudaStreamEndCapture(st, &gr));
      CK(cudaGraphInstantiate(&ex, gr, 0));
      CK(cudaGraphLaunch(ex, st));
      CK(cudaGraphExecDestroy(ex)); CK(cudaGraphDestroy(gr));
    } else {
      CK(ngram_match_gpu(pg, st));
    }
    CK(cudaStreamSynchronize(st)); CK(cudaStreamDestroy(st));
    auto dr = down(d_dr, b.drafts.size()); auto sl = down(d_slt, b.slt.size());
    ++n_cases;
    for (int64_t i = 0; i < b.B; ++i) n_drafted += c.slt[i] > 1 && c.enc[i] <= 0;
    if (dr != c.drafts || sl != c.slt) {
      if (++n_bad <= 5) {
        printf("MISMATCH B=%ld W=%ld K=%ld maxn=%d T=%ld graph=%d pad_to_max=%d max_draft_tokens=%ld\n", (long)b.B, (long)b.W, (long)b.K, maxn, (long)T, graph, pad, (long)mdt);
        for (int64_t i = 0; i < b.B; ++i) {
          bool rowbad = sl[i] != c.slt[i];
          for (int64_t k = 0; k <= b.K; ++k) rowbad |= dr[i * (b.K + 1) + k] != c.drafts[i * (b.K + 1) + k];
          if (rowbad && b.W <= 64) {
            printf(" slot %ld P=%ld s=%ld enc=%d dec=%d slt_in=%d dtn=%d mdl=%ld cpu_slt=%d gpu_slt=%d\n", (long)i, (long)b.P[i], (long)b.s[i], b.enc[i], b.dec[i], b.slt[i], b.dtn[i], (long)b.mdl[i], c.slt[i], sl[i]);
          } else if (rowbad) {
            printf(" slot %ld cpu_slt=%d gpu_slt=%d\n", (long)i, c.slt[i], sl[i]);
          }
        }
      }
    }
    CK(cudaFree(d_dr)); CK(cudaFree(d_slt));
  }
  CK(cudaFree(d_ids)); CK(cudaFree(d_P)); CK(cudaFree(d_s)); CK(cudaFree(d_dtn)); CK(cudaFree(d_mdl)); CK(cudaFree(d_enc)); CK(cudaFree(d_dec));
}

int main(int argc, char** argv) {
  const bool quick = argc > 1;  // for compute-sanitizer
  std::mt19937_64 g(1234);
  auto U = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
  const int small = quick ? 150 : 20000;
  for (int it = 0; it < small; ++it) {
    int64_t B = U(0, 40), W = U(0, 60), K = U(0, 7), vocab = U(1, 5); int maxn = (int)U(1, it % 10 == 0 ? 64 : 6);
    Batch b = make(g, B, W, K, vocab, maxn, 0.15);
    int64_t T = U(0, 2) == 0 ? (1 << 20) : U(0, 3 * B + 10);
    run_case(b, maxn, T, it % 50 == 0, 1, it % 3 == 1, U(-1, K + 2));
  }
  printf("small: cases %ld bad %ld drafted-slots %ld\n", n_cases, n_bad, n_drafted);
  const int mids = quick ? 4 : 300;
  for (int it = 0; it < mids; ++it) {
    int64_t B = U(1, 300), W = U(1, 5000), K = U(1, 8), vocab = U(2, 50); int maxn = (int)U(1, it % 5 == 0 ? 64 : 5);
    Batch b = make(g, B, W, K, vocab, maxn, 0.05);
    int64_t enc_sum = 0, counted = 0;
    for (int64_t i = 0; i < B; ++i) { if (b.enc[i] > 0) enc_sum += std::max(b.slt[i], 0); counted += b.enc[i] > 0 || b.dec[i] > 0; }
    int64_t T = U(0, 3) == 0 ? (1 << 20) : counted + enc_sum + U(-5, 2 * B + 5);
    run_case(b, maxn, T, it % 10 == 0, it % 30 == 0 ? 5 : 1, it % 3 == 1, U(-1, K + 2));
  }
  printf("mid: cases %ld bad %ld drafted-slots %ld\n", n_cases, n_bad, n_drafted);
  if (!quick) {
    for (int it = 0; it < 6; ++it) {
      int64_t vocab = it < 2 ? 1000 : (it < 4 ? 4 : 50); int maxn = it % 2 ? 5 : 3;
      Batch b = make(g, 256, 1 << 17, 7, vocab, maxn, 0.05);
      run_case(b, maxn, it < 3 ? (1 << 20) : 900, it == 5, 2, it % 2 == 1, 7);
    }
    printf("big: cases %ld bad %ld drafted-slots %ld\n", n_cases, n_bad, n_drafted);
  }
  printf("ngram_match_vs_cpu %s: %s (%ld cases, %ld mismatches, %ld with pad_to_max)\n", quick ? "quick" : "full",
         n_bad ? "FAIL" : "PASS", n_cases, n_bad, n_padded);
  CK(cudaDeviceReset());  // memcheck's leak check needs the context torn down
  return n_bad != 0;
}
