// suffix_match's CUDA launcher against its CPU implementation, at the kernel layer (no Paddle), bit
// for bit on every output (draft_tokens, seq_lens_this_time, suffix_tokens, suffix_probs,
// suffix_meta) and on every input (which must be left as it was). Random batches with vocabularies
// of 1 .. 50 tokens and planted repeats, every parameter varied (tree depth 1 .. 256, factor,
// offset, min_token_prob, K up to 64, pad_to_max, binding thresholds and ones no batch can reach:
// the one-kernel path), out-of-range lengths; adversarial histories (one token; "x a_i" with more
// distinct continuations than the kernel's hash table, which forces its range splitting); then
// CUDA-graph rounds (one capture per shape, new inputs copied into the captured buffers before each
// replay). Usage and exit status: tests/cuda/harness.cuh.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "harness.cuh"
#include "suffix_params.cuh"
#include "suffix_match/suffix_match.h"

namespace {

using harness::DevVec;
using harness::Rng;

struct Shape {
  int64_t B = 0, W = 1, K = 1, rows = 0;
  int depth = 64;
  float factor = 1.0f, offset = 0.0f, min_prob = 0.1f;
  int max_draft = 1;
  bool pad = false;
  int64_t T = 1 << 20;
  int64_t vocab = 2;
  int kind = 0;  // 0 random, 1 one token, 2 distinct continuations
};

// clang-format off
#define SUFFIX_INPUTS(X)                                                            \
  X(int64_t, ids) X(int64_t, P) X(int64_t, s) X(int64_t, drafts) X(int64_t, mdl)    \
  X(int64_t, stoks) X(int32_t, dtn) X(int32_t, slt) X(int32_t, enc) X(int32_t, dec) \
  X(int32_t, smeta) X(float, sprobs)
// clang-format on
struct Inputs {
  HARNESS_VECTORS(SUFFIX_INPUTS)
};

Shape make_shape(Rng& r, int64_t B, int64_t W, int64_t vocab, int kind) {
  Shape sh;
  sh.B = B;
  sh.W = W;
  sh.vocab = vocab;
  sh.kind = kind;
  sh.K = r.chance(0.1) ? fdspec::kMaxSuffixSpecTokens : r.uni(1, 16);
  sh.rows = B + r.uni(0, 2);
  sh.depth = static_cast<int>(r.pick<int64_t>({1, 2, 3, 8, 24, 64, 64, 100, 256}));
  sh.factor = static_cast<float>(r.pick<double>({0.0, 0.5, 1.0, 1.0, 2.0, 8.0}));
  sh.offset = static_cast<float>(r.pick<double>({-1.5, 0.0, 0.0, 1.0, 4.0}));
  sh.min_prob = static_cast<float>(r.pick<double>({0.0, 0.05, 0.1, 0.1, 0.4, 1.5}));
  sh.max_draft = static_cast<int>(r.uni(0, sh.K));
  sh.pad = r.chance(0.3);
  return sh;
}

Inputs make_inputs(Rng& r, const Shape& sh) {
  const int64_t B = sh.B, W = sh.W, K = sh.K;
  Inputs in;
  in.ids.assign(sh.rows * W, -1);
  for (int64_t b = 0; b < sh.rows; ++b) {
    int64_t* row = in.ids.data() + b * W;
    // Adversarial rows are full but for room to draft, and (kind 2) end on the repeated token 7.
    int64_t used = b < B ? r.uni(0, W) : W;
    if (sh.kind != 0 && b < B) used = std::max<int64_t>(W - sh.K - 2, 0) & ~int64_t{1};
    if (sh.kind == 2 && used > 0) --used;
    if (sh.kind == 1) {
      for (int64_t j = 0; j < used; ++j) row[j] = 5;
    } else if (sh.kind == 2) {
      for (int64_t j = 0; j < used; ++j) row[j] = (j % 2) ? 1000 + j * 7919 : 7;
    } else {
      for (int64_t j = 0; j < used; ++j) row[j] = r.uni(0, sh.vocab - 1);
      if (used >= 8 && r.chance(0.6)) {  // the history ends with a copy of an earlier stretch
        const int64_t n = r.uni(2, used / 2);
        const int64_t src = r.uni(0, used - n - 1);
        for (int64_t j = 0; j < n; ++j) row[used - n + j] = row[src + j];
      }
    }
    if (b < B && r.chance(0.05)) {  // garbage after the history that must never be read
      for (int64_t j = used; j < W; ++j) row[j] = r.uni(0, sh.vocab - 1);
    }
    if (b < B) {
      in.P.push_back(r.uni(0, used));
      in.s.push_back(used - in.P.back());
    }
  }
  in.drafts.resize(B * (K + 1));
  for (int64_t i = 0; i < B * (K + 1); ++i) in.drafts[i] = -100 - i;
  in.stoks.assign(sh.rows * K, -7);
  in.sprobs.assign(sh.rows * K, -7.0f);
  in.smeta.assign(sh.rows * 2, -7);
  for (int64_t b = 0; b < B; ++b) {
    in.dtn.push_back(r.chance(0.2) ? static_cast<int32_t>(r.uni(-1, K + 1))
                                   : static_cast<int32_t>(K));
    in.mdl.push_back(r.chance(0.2) ? in.s[b] + 1 + r.uni(-1, K + 1) : (int64_t{1} << 20));
    const double st = r.real();
    int32_t enc = 0, dec = 0, slt = static_cast<int32_t>(r.uni(0, 3));
    if (st < 0.15) {
      enc = static_cast<int32_t>(r.uni(1, 63));
      slt = static_cast<int32_t>(r.uni(-3, 63));
    } else if (st >= 0.25) {
      dec = static_cast<int32_t>(std::max<int64_t>(in.P[b] + in.s[b], 1));
      if (r.chance(0.03)) dec = -1;
    }
    in.enc.push_back(enc);
    in.dec.push_back(dec);
    in.slt.push_back(slt);
    if (sh.kind != 0) {  // decoding, with every limit wide open
      in.enc[b] = 0;
      in.dec[b] = 1;
      in.dtn[b] = static_cast<int32_t>(K);
      in.mdl[b] = int64_t{1} << 20;
      continue;
    }
    if (r.chance(0.05)) {
      r.one_of({[&] { in.P[b] = -r.uni(1, 9); }, [&] { in.P[b] = W + r.uni(0, 9); },
                [&] { in.s[b] = W + r.uni(1, 9); },
                [&] { in.s[b] = r.pick<int64_t>({INT64_MIN, INT64_MAX}); },
                [&] { in.mdl[b] = r.pick<int64_t>({INT64_MIN, INT64_MAX, -1}); }});
    }
  }
  return in;
}

int64_t make_threshold(Rng& r, const Shape& sh, const Inputs& in) {
  int64_t floor = 0;
  for (int64_t b = 0; b < sh.B; ++b) floor += (in.enc[b] > 0 ? std::max(in.slt[b], 0) : 0) + 1;
  const double t = r.real();
  if (t < 0.4) return std::max<int64_t>(floor + r.uni(-3, 3 * sh.B + 5), 0);
  if (t < 0.65) return int64_t{1} << 20;
  if (t < 0.9)
    return INT64_MAX;  // no batch can reach it: the search kernel finishes every slot alone
  return r.uni(0, 3);
}

// The params over the arrays of `in`: the Inputs (host) or their DeviceInputs (device).
template <class A>
fdspec::SuffixMatchParams params_of(const Shape& sh, A& in) {
  return suffix_match_params_of(in, {sh.W, sh.K, sh.B, sh.depth, sh.factor, sh.offset, sh.min_prob,
                                     sh.max_draft, sh.pad, sh.T});
}

cudaError_t launch(const fdspec::SuffixMatchParams& p, cudaStream_t stream) {
  auto& st = harness::selftest();
  if (!st.host_backend) return fdspec::suffix_match_gpu(p, stream);
  fdspec::suffix_match_cpu(p);
  if (st.perturb && p.batch > 0) {
    static int turn = 0;
    const int64_t K = p.draft_stride - 1;
    switch (++turn % 3) {
      case 0:
        p.seq_lens_this_time[p.batch - 1] ^= 1;
        break;
      case 1:
        p.suffix_meta[2 * (p.batch - 1) + 1] += 1;
        break;
      default: {  // one bit of a probability
        uint32_t bits;
        std::memcpy(&bits, &p.suffix_probs[p.batch * K - 1], 4);
        bits ^= 1u;
        std::memcpy(&p.suffix_probs[p.batch * K - 1], &bits, 4);
      }
    }
    st.perturbed = true;
  }
  return cudaSuccess;
}

struct DeviceInputs {
  HARNESS_MIRROR(DeviceInputs, Inputs, SUFFIX_INPUTS)
  fdspec::SuffixMatchParams params(const Shape& sh) const { return params_of(sh, *this); }
};

bool same(const Inputs& in, const Inputs& want, const Inputs& got) {
  return got.drafts == want.drafts && got.slt == want.slt && got.stoks == want.stoks &&
         got.smeta == want.smeta &&
         std::memcmp(got.sprobs.data(), want.sprobs.data(), 4 * want.sprobs.size()) == 0 &&
         got.ids == in.ids && got.P == in.P && got.s == in.s && got.mdl == in.mdl &&
         got.dtn == in.dtn && got.enc == in.enc && got.dec == in.dec;
}

std::string describe(const Shape& sh, const Inputs& in, const Inputs& want, const Inputs& got,
                     const char* how) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "[%s] B=%" PRId64 " W=%" PRId64 " K=%" PRId64
                " depth=%d factor=%g offset=%g "
                "min_prob=%g max_draft=%d pad=%d T=%" PRId64 " vocab=%" PRId64 " kind=%d",
                how, sh.B, sh.W, sh.K, sh.depth, sh.factor, sh.offset, sh.min_prob, sh.max_draft,
                sh.pad, sh.T, sh.vocab, sh.kind);
  std::string out = buf;
  int shown = 0;
  for (int64_t b = 0; b < sh.B && shown < 4; ++b) {
    if (want.smeta[2 * b] == got.smeta[2 * b] && want.smeta[2 * b + 1] == got.smeta[2 * b + 1] &&
        want.slt[b] == got.slt[b])
      continue;
    ++shown;
    std::snprintf(buf, sizeof(buf),
                  "\n  slot %" PRId64 ": P=%" PRId64 " s=%" PRId64
                  " meta cpu=(%d,%d) gpu=(%d,%d) "
                  "slt cpu=%d gpu=%d",
                  b, in.P[b], in.s[b], want.smeta[2 * b], want.smeta[2 * b + 1], got.smeta[2 * b],
                  got.smeta[2 * b + 1], want.slt[b], got.slt[b]);
    out += buf;
  }
  return out;
}

Inputs cpu_result(const Shape& sh, const Inputs& in) {
  Inputs c = in;
  fdspec::suffix_match_cpu(params_of(sh, c));
  return c;
}

void run_case(harness::Tally& t, const Shape& sh, const Inputs& in, const harness::Stream& stream) {
  const Inputs want = cpu_result(sh, in);
  for (int64_t b = 0; b < sh.B; ++b) t.count("drafted_slots", want.smeta[2 * b] > 0);
  DeviceInputs dev(in);
  harness::check_inputs_case(t, stream, sh, in, want, dev, "launch",
                             [&](cudaStream_t s) { CHECK(launch(dev.params(sh), s)); });
}

void graph_rounds(harness::Tally& t, Rng& r, Shape sh, int rounds, const harness::Stream& stream) {
  Inputs first = make_inputs(r, sh);
  DeviceInputs dev(first);
  const fdspec::SuffixMatchParams p = dev.params(sh);
  harness::Graph graph(stream.get(), [&](cudaStream_t s) { return launch(p, s); });
  for (int i = 0; i < rounds; ++i) {
    const Inputs in = make_inputs(r, sh);
    const Inputs want = cpu_result(sh, in);
    dev.upload(in);
    harness::check_inputs_case(t, stream, sh, in, want, dev, "graph replay",
                               [&](cudaStream_t s) { graph.replay(s); });
    t.count("graph_replays");
  }
}

void body(harness::Tally& t, bool quick) {
  Rng r(20260519);
  harness::Stream stream;
  const int64_t vocabs[] = {1, 2, 3, 5, 12, 50};
  const int reps = quick ? 1 : 12;  // quick: one case per (vocabulary, width), for racecheck
  // 12289 (full mode): histories over more than one tile of the match-length pass, odd rows.
  const std::vector<int64_t> widths = quick
                                          ? std::vector<int64_t>{1, 7, 40, 300, 1500, 4096}
                                          : std::vector<int64_t>{1, 7, 40, 300, 1500, 4096, 12289};
  for (int64_t vocab : vocabs) {
    for (int64_t W : widths) {
      for (int rep = 0; rep < reps; ++rep) {
        Shape sh = make_shape(r, r.uni(0, quick ? 4 : 12), W, vocab, 0);
        const Inputs in = make_inputs(r, sh);
        sh.T = make_threshold(r, sh, in);
        run_case(t, sh, in, stream);
        t.count("cases_random");
      }
    }
  }
  // Adversarial histories: the block path with huge sets, and its hash-range splitting.
  for (int kind : {1, 2}) {
    // 5000: more occurrences than the candidate list and (kind 2) more continuations than its
    // table.
    const std::vector<int64_t> widths =
        quick ? std::vector<int64_t>{200, 5000} : std::vector<int64_t>{200, 5000, 20000};
    for (int64_t W : widths) {
      Shape sh = make_shape(r, 3, W, 2, kind);
      sh.T = kind == 1 ? INT64_MAX : int64_t{1} << 20;
      sh.min_prob = 0.0f;
      sh.max_draft = static_cast<int>(sh.K);
      const Inputs in = make_inputs(r, sh);
      run_case(t, sh, in, stream);
      t.count(kind == 1 ? "cases_one_token" : "cases_distinct_continuations");
    }
  }
  for (int g = 0; g < (quick ? 2 : 6); ++g) {
    Shape sh = make_shape(r, r.uni(1, 16), r.pick<int64_t>({64, 1000, 3000}),
                          r.pick<int64_t>({2, 5, 50}), 0);
    sh.T = g % 2 ? INT64_MAX : int64_t{1} << 20;
    graph_rounds(t, r, sh, quick ? 2 : 8, stream);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return harness::run_main(argc, argv, "suffix_match_vs_cpu", body);
}
