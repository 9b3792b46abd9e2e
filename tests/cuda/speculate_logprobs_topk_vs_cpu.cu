// speculate_logprobs_topk: the CUDA launcher (fdspec::logprobs_topk_gpu, through the public params
// struct only, so that the harness keeps compiling while the kernel changes) against the CPU
// implementation, at the kernel layer (no Paddle). Token ids and ranks must be identical (they
// depend only on comparisons of the same float32 values, see the header), padding rows exact,
// scores within the tolerance below. Covered: k in {0, 1, 5, 20} (k > V too); V in {1, 7, 31, 1000,
// 32000, 152064}; float32 and the raw 16 bits of float16 / bfloat16; a logits pointer misaligned by
// one element; temperature absent or per slot (incl. 0, negative, +-inf, NaN, a denormal); raw
// logits on and off; padding rows (cu[B] < N), cu[B] > N, unsorted and out-of-range offsets, B = 0;
// NaN and
// +-inf sprinkled in, rows of only -inf or only NaN; tiny value sets that force ties (lower token
// id first); accepted tokens outside [0, V); 1 to 5000 rows, among them 384+ rows of V = 152064, so
// that every launch shape of the kernel runs; CUDA-graph replays with new inputs in the captured
// buffers. Usage and exit status: tests/cuda/harness.cuh.
#include <algorithm>
#include <cfloat>
#include <cinttypes>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "harness.cuh"
#include "speculate_logprobs_topk/speculate_logprobs_topk.h"

namespace {

using fdspec::LogitsDType;
using harness::DevBuf;
using harness::DevVec;
using harness::Rng;

// Score tolerance, GPU against CPU: |gpu - cpu| <= kScoreAbs + kScoreRel * max(|cpu|, |log s|),
// with s = sum of exp(x - m) over the row and m its largest logit. The two sides compute the same
// scaled logit x bit for bit. The CPU's score is x - (m + log s) in double, rounded once; the GPU's
// is (x - m) - log s in float32, with s summed online in another order with exp2f: x - m is exact
// near the top of the row, so the difference is the float32 error of log s (relative to |log s|, at
// most log 152064 < 12, plus an absolute term for the rounding of a sum of up to 152064 terms) and
// the rounding of the score itself. Not relative to |m + log s|: logits in the thousands must not
// widen the tolerance (a GPU that rounded m log2 e once per row was off by 1e-4 there and passed).
// Raw-logit scores are x itself: exact.
constexpr double kScoreAbs = 1e-5;
constexpr double kScoreRel = 1e-5;

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

const char* dtype_name(LogitsDType d) {
  return d == LogitsDType::kFloat32 ? "float32"
                                    : (d == LogitsDType::kFloat16 ? "float16" : "bfloat16");
}

// What a CUDA graph bakes in: sizes, dtype, options.
struct Shape {
  int64_t N = 0, V = 1, B = 0;
  int k = 0;
  LogitsDType dtype = LogitsDType::kFloat32;
  bool raw = false, temperature = false;
  int64_t misalign = 0;  // elements between the allocation and the first logit
  int esize() const { return fdspec::logits_dtype_size(dtype); }
  int64_t cols() const { return k + 1; }
};

struct Inputs {
  std::vector<unsigned char> logits;  // N * V elements of the dtype
  std::vector<int64_t> token_ids;     // [N]
  std::vector<int32_t> cu;            // [B + 1]
  std::vector<float> temp;            // [B] (unused without temperature)
};

struct Outputs {
  std::vector<int64_t> ids;    // [N, k + 1]
  std::vector<float> scores;   // [N, k + 1]
  std::vector<int64_t> ranks;  // [N]
};

// Stale values of the outputs: every element must be written.
Outputs stale_outputs(const Shape& sh) {
  return Outputs{std::vector<int64_t>(sh.N * sh.cols(), -777777),
                 std::vector<float>(sh.N * sh.cols(), 777.0f), std::vector<int64_t>(sh.N, -4242)};
}

void store(const Shape& sh, std::vector<unsigned char>& out, int64_t i, float f) {
  if (sh.dtype == LogitsDType::kFloat32) {
    std::memcpy(out.data() + 4 * i, &f, 4);
    return;
  }
  uint16_t bits;
  if (sh.dtype == LogitsDType::kFloat16) {
    const __half_raw h = __half(__float2half_rn(f));
    bits = h.x;
  } else {
    const __nv_bfloat16_raw h = __nv_bfloat16(__float2bfloat16_rn(f));
    bits = h.x;
  }
  std::memcpy(out.data() + 2 * i, &bits, 2);
}

float load(const Shape& sh, const std::vector<unsigned char>& in, int64_t i) {
  if (sh.dtype == LogitsDType::kFloat32) {
    float f;
    std::memcpy(&f, in.data() + 4 * i, 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, in.data() + 2 * i, 2);
  return sh.dtype == LogitsDType::kFloat16 ? fdspec::float16_bits_to_float(bits)
                                           : fdspec::bfloat16_bits_to_float(bits);
}

// A uniform float in [-a, a] from one draw (cheap enough for 60M logits).
float uniform(Rng& r, float a) {
  return a * (static_cast<float>(static_cast<double>(r.g() >> 11) * 0x1.0p-53) * 2.0f - 1.0f);
}

void make_row(Rng& r, const Shape& sh, std::vector<unsigned char>& out, int64_t row) {
  const int64_t V = sh.V, base = row * V;
  const double kind = r.real();
  if (kind < 0.25) {  // ties: 1 to 3 distinct values
    float vals[3];
    const int64_t c = r.uni(1, 3);
    for (auto& v : vals) v = std::round(uniform(r, 4.0f) * 4.0f) / 4.0f;
    for (int64_t v = 0; v < V; ++v) store(sh, out, base + v, vals[r.uni(0, c - 1)]);
  } else {
    // Spreads from narrow to the float16 range (65504 is its largest finite value).
    const float a = sh.dtype == LogitsDType::kFloat16 ? r.pick<float>({2, 8, 30, 60000})
                                                      : r.pick<float>({2, 8, 30, 1e5f});
    for (int64_t v = 0; v < V; ++v) store(sh, out, base + v, uniform(r, a));
  }
  const double sp = r.real();
  if (sp < 0.70) return;
  if (sp < 0.92) {  // a few specials among finite values
    const float special = sp < 0.79 ? -kInf : (sp < 0.86 ? kNaN : kInf);
    for (int64_t n = r.uni(1, std::min<int64_t>(V, 4)); n > 0; --n)
      store(sh, out, base + r.uni(0, V - 1), special);
    return;
  }
  for (int64_t v = 0; v < V; ++v) {  // only -inf, only NaN, or both
    const float f = sp < 0.96 ? -kInf : (sp < 0.98 ? kNaN : (r.chance(0.5) ? kNaN : -kInf));
    store(sh, out, base + v, f);
  }
}

// cu: the rows of the B slots, with cu[B] at N (40%), below it (padding rows), above it (clamped),
// or not a prefix sum at all.
std::vector<int32_t> make_offsets(Rng& r, const Shape& sh) {
  std::vector<int32_t> cu(sh.B + 1, 0);
  if (sh.B == 0) {
    cu[0] = static_cast<int32_t>(r.uni(-3, sh.N + 3));  // never read
    return cu;
  }
  const double m = r.real();
  if (m < 0.1) {
    for (auto& c : cu) c = static_cast<int32_t>(r.uni(-5, sh.N + 5));
    if (r.chance(0.3)) cu[sh.B] = r.pick<int32_t>({INT32_MIN, INT32_MAX, -1});
    return cu;
  }
  int64_t valid = sh.N;
  if (m < 0.45) {
    valid = std::max<int64_t>(0, sh.N - r.uni(1, 3));
  } else if (m < 0.6) {
    valid = sh.N + r.uni(1, 3);
  }
  std::vector<int64_t> cuts(sh.B - 1);
  for (auto& c : cuts) c = r.uni(0, valid);
  std::sort(cuts.begin(), cuts.end());
  for (int64_t b = 1; b < sh.B; ++b) cu[b] = static_cast<int32_t>(cuts[b - 1]);
  cu[sh.B] = static_cast<int32_t>(valid);
  return cu;
}

Inputs make_inputs(Rng& r, const Shape& sh) {
  Inputs in;
  in.logits.resize(sh.N * sh.V * sh.esize());
  for (int64_t row = 0; row < sh.N; ++row) make_row(r, sh, in.logits, row);
  in.token_ids.resize(sh.N);
  for (auto& t : in.token_ids) {
    t = r.chance(0.85) ? r.uni(0, sh.V - 1)
                       : r.pick<int64_t>({-2, -1, sh.V, sh.V + 1, INT64_MIN, INT64_MAX});
  }
  in.cu = make_offsets(r, sh);
  in.temp.resize(sh.B);
  for (auto& t : in.temp) {
    t = r.chance(0.6) ? r.pick<float>({1.0f, 0.5f, 1.7f, 0.05f})
                      : r.pick<float>({0.0f, -1.0f, kInf, -kInf, kNaN, 1e-45f});
  }
  return in;
}

fdspec::LogprobsTopkParams params_of(const Shape& sh, const void* logits, const int64_t* token_ids,
                                     const int32_t* cu, const float* temp, int64_t* ids,
                                     float* scores, int64_t* ranks) {
  fdspec::LogprobsTopkParams p;
  p.logits = logits;
  p.dtype = sh.dtype;
  p.rows = sh.N;
  p.vocab = sh.V;
  p.token_ids = token_ids;
  p.cu_batch_token_offset = cu;
  p.batch = sh.B;
  p.temperature = sh.temperature ? temp : nullptr;
  p.logprob_token_ids = ids;
  p.logprob_scores = scores;
  p.logprob_ranks = ranks;  // the outputs
  p.top_k = sh.k;
  p.raw_logits = sh.raw;
  return p;
}

fdspec::LogprobsTopkParams host_params(const Shape& sh, const Inputs& in, Outputs& out) {
  return params_of(sh, in.logits.data(), in.token_ids.data(), in.cu.data(), in.temp.data(),
                   out.ids.data(), out.scores.data(), out.ranks.data());
}

Outputs cpu_result(const Shape& sh, const Inputs& in) {
  Outputs out = stale_outputs(sh);
  fdspec::logprobs_topk_cpu(host_params(sh, in, out));
  return out;
}

// log s of valid row r (s = sum of exp(x - m), m the row's largest x), in double, for the
// tolerance.
double row_log_sum(const Shape& sh, const Inputs& in, const fdspec::LogprobsTopkParams& p,
                   int64_t r) {
  const float scale = fdspec::logprobs_row_scale(p, r);
  float m = -kInf;
  for (int64_t v = 0; v < sh.V; ++v) m = std::max(m, load(sh, in.logits, r * sh.V + v) * scale);
  if (m == -kInf) return 0.0;
  double s = 0.0;
  for (int64_t v = 0; v < sh.V; ++v)
    s += std::exp(static_cast<double>(load(sh, in.logits, r * sh.V + v) * scale) - m);
  return std::log(s);
}

bool score_ok(float got, float want, bool exact, double log_s) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (got == want) return true;
  if (exact || std::isinf(got) || std::isinf(want)) return false;
  const double tol =
      kScoreAbs + kScoreRel * std::max(std::fabs(static_cast<double>(want)), std::fabs(log_s));
  return std::fabs(static_cast<double>(got) - want) <= tol;
}

// Compares everything; returns "" when equal, else what differs first.
std::string compare(const Shape& sh, const Inputs& in, const Outputs& want, const Outputs& got) {
  char buf[320];
  const int64_t id_at = harness::first_diff(want.ids, got.ids);
  if (id_at >= 0) {
    std::snprintf(buf, sizeof(buf),
                  "ids differ at row %" PRId64 " col %" PRId64 ": cpu %" PRId64 " gpu %" PRId64,
                  id_at / sh.cols(), id_at % sh.cols(), want.ids[id_at], got.ids[id_at]);
    return buf;
  }
  const int64_t rank_at = harness::first_diff(want.ranks, got.ranks);
  if (rank_at >= 0) {
    std::snprintf(buf, sizeof(buf), "ranks differ at row %" PRId64 ": cpu %" PRId64 " gpu %" PRId64,
                  rank_at, want.ranks[rank_at], got.ranks[rank_at]);
    return buf;
  }
  Outputs dummy = stale_outputs(sh);
  const fdspec::LogprobsTopkParams p = host_params(sh, in, dummy);
  const int64_t valid = fdspec::logprobs_valid_rows(p);
  for (int64_t r = 0; r < sh.N; ++r) {
    double log_s = 0.0;
    bool log_s_known = false;
    for (int64_t c = 0; c < sh.cols(); ++c) {
      const int64_t i = r * sh.cols() + c;
      if (got.scores[i] == want.scores[i]) continue;
      if (r < valid && !sh.raw && !log_s_known) {
        log_s = row_log_sum(sh, in, p, r);
        log_s_known = true;
      }
      if (!score_ok(got.scores[i], want.scores[i], r >= valid || sh.raw, log_s)) {
        std::snprintf(buf, sizeof(buf),
                      "score at row %" PRId64 " col %" PRId64
                      " (%s row): cpu %.9g gpu %.9g log s %.9g",
                      r, c, r < valid ? "valid" : "padding", want.scores[i], got.scores[i], log_s);
        return buf;
      }
    }
  }
  return "";
}

// What the case reaches.
void count_coverage(harness::Tally& t, const Shape& sh, const Inputs& in, const Outputs& want) {
  Outputs dummy = stale_outputs(sh);
  const fdspec::LogprobsTopkParams p = host_params(sh, in, dummy);
  const int64_t valid = fdspec::logprobs_valid_rows(p);
  t.count("valid_rows", valid);
  t.count("padding_rows", sh.N - valid);
  t.count("k_above_V", sh.k > sh.V);
  for (int64_t r = 0; r < valid; ++r) {
    bool nan = false, inf = false;
    for (int64_t v = 0; v < sh.V; ++v) {
      const float x = load(sh, in.logits, r * sh.V + v);
      nan |= std::isnan(x);
      inf |= std::isinf(x);
    }
    t.count("rows_with_nan", nan);
    t.count("rows_with_inf", inf);
    // Ties decided by the token id: two top-k entries with equal scores.
    bool tie = false;
    for (int64_t c = 2; c < sh.cols(); ++c) {
      tie |= want.ids[r * sh.cols() + c] >= 0 &&
             want.scores[r * sh.cols() + c] == want.scores[r * sh.cols() + c - 1];
    }
    t.count("rows_with_topk_ties", tie);
  }
}

// The GPU launcher, each call with the next row split in turn (0: the launcher's own choice; 8
// blocks of a tiny row leave most slices empty); in the self-test the CPU implementation, perturbed
// on request.
cudaError_t launch(const fdspec::LogprobsTopkParams& p, cudaStream_t stream) {
  auto& st = harness::selftest();
  if (!st.host_backend) {
    static int call = 0;
    constexpr int kParts[] = {0, 1, 2, 3, 8};
    return fdspec::logprobs_topk_gpu(p, stream, kParts[call++ % 5]);
  }
  fdspec::logprobs_topk_cpu(p);
  if (st.perturb && p.rows > 0) {
    static int turn = 0;
    const int k = turn++ % 3;
    if (k == 0) {
      p.logprob_token_ids[p.rows * (p.top_k + 1) - 1] ^= 1;
    } else if (k == 1) {
      p.logprob_ranks[0] ^= 1;
    } else {
      float& s = p.logprob_scores[0];
      s = std::isnan(s) ? 0.0f : (s >= 0.0f ? -1e30f : 1e30f);
    }
    st.perturbed = true;
  }
  return cudaSuccess;
}

struct DeviceBuffers {
  int64_t prefix;  // bytes before the first logit, left uninitialised (initcheck)
  DevBuf logits;
  DevVec<int64_t> token_ids;
  DevVec<int32_t> cu;
  DevVec<float> temp;
  DevVec<int64_t> ids;
  DevVec<float> scores;
  DevVec<int64_t> ranks;

  DeviceBuffers(const Shape& sh, const Inputs& in, const Outputs& stale)
      : prefix(sh.misalign * sh.esize()),
        logits(prefix + in.logits.size()),
        token_ids(in.token_ids),
        cu(in.cu),
        temp(in.temp),
        ids(stale.ids),
        scores(stale.scores),
        ranks(stale.ranks) {
    harness::copy_to_device(logits.bytes() + prefix, in.logits.data(), in.logits.size());
  }
  void upload(const Inputs& in, const Outputs& stale) {
    if (in.logits.size() + prefix != logits.size()) std::exit(2);
    harness::copy_to_device(logits.bytes() + prefix, in.logits.data(), in.logits.size());
    token_ids.upload(in.token_ids);
    cu.upload(in.cu);
    temp.upload(in.temp);
    ids.upload(stale.ids);
    scores.upload(stale.scores);
    ranks.upload(stale.ranks);
  }
  Outputs download() const { return Outputs{ids.download(), scores.download(), ranks.download()}; }
  bool inputs_unchanged(const Inputs& in) const {
    std::vector<unsigned char> l(in.logits.size());
    harness::copy_to_host(l.data(), logits.bytes() + prefix, l.size());
    return l == in.logits && token_ids.download() == in.token_ids && cu.download() == in.cu &&
           harness::first_diff(temp.download(), in.temp) < 0;  // bitwise: temperatures hold NaN
  }
  fdspec::LogprobsTopkParams params(const Shape& sh) const {
    return params_of(sh, logits.bytes() + prefix, token_ids.ptr(), cu.ptr(), temp.ptr(), ids.ptr(),
                     scores.ptr(), ranks.ptr());
  }
};

std::string describe(const Shape& sh, const char* how, const std::string& what) {
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "[%s] %s N=%" PRId64 " V=%" PRId64 " B=%" PRId64
                " k=%d raw=%d temperature=%d misalign=%" PRId64 ": ",
                how, dtype_name(sh.dtype), sh.N, sh.V, sh.B, sh.k, sh.raw, sh.temperature,
                sh.misalign);
  return buf + what;
}

void check(harness::Tally& t, const Shape& sh, const Inputs& in, const Outputs& want,
           const DeviceBuffers& dev, const char* how) {
  const Outputs got = dev.download();
  std::string what = compare(sh, in, want, got);
  if (what.empty() && !dev.inputs_unchanged(in)) what = "an input was modified";
  t.record(what.empty(), what.empty() ? what : describe(sh, how, what));
}

void run_case(harness::Tally& t, const Shape& sh, const Inputs& in, const harness::Stream& stream) {
  const Outputs want = cpu_result(sh, in);
  count_coverage(t, sh, in, want);
  const DeviceBuffers dev(sh, in, stale_outputs(sh));
  t.begin_case();
  CHECK(launch(dev.params(sh), stream.get()));
  stream.sync();
  check(t, sh, in, want, dev, "eager");
}

void run_graph_rounds(harness::Tally& t, Rng& r, const Shape& sh, int replays,
                      const harness::Stream& stream) {
  Inputs in = make_inputs(r, sh);
  DeviceBuffers dev(sh, in, stale_outputs(sh));
  const fdspec::LogprobsTopkParams p = dev.params(sh);
  const harness::Graph graph(stream.get(), [&](cudaStream_t s) { return launch(p, s); });
  for (int i = 0; i < replays; ++i) {
    if (i > 0) in = make_inputs(r, sh);
    dev.upload(in, stale_outputs(sh));
    const Outputs want = cpu_result(sh, in);
    count_coverage(t, sh, in, want);
    t.begin_case();
    graph.replay(stream.get());
    stream.sync();
    check(t, sh, in, want, dev, "graph replay");
  }
}

void body(harness::Tally& t, bool quick) {
  Rng r(20260709);
  const harness::Stream stream;
  const LogitsDType dtypes[] = {LogitsDType::kFloat32, LogitsDType::kFloat16,
                                LogitsDType::kBFloat16};
  auto shape = [&](int64_t N, int64_t V, int64_t B, int k, LogitsDType d) {
    Shape sh{N, V, B, k, d};
    sh.raw = r.chance(0.3);
    sh.temperature = r.chance(0.5);
    sh.misalign = r.chance(0.2) ? 1 : 0;
    return sh;
  };
  auto random_case = [&](const Shape& sh) { run_case(t, sh, make_inputs(r, sh), stream); };
  auto any_k = [&]() { return r.pick<int>({0, 1, 5, 20}); };
  auto any_dtype = [&]() { return dtypes[r.uni(0, 2)]; };

  // Small vocabularies: every k, the narrow vector widths (V = 7, 31), ties, k > V.
  for (int it = 0, n = quick ? 40 : 3000; it < n; ++it) {
    const int64_t B = r.uni(0, 6);
    random_case(
        shape(r.uni(0, 3 * B + 2), r.pick<int64_t>({1, 7, 31, 1000}), B, any_k(), any_dtype()));
  }
  if (quick) {
    random_case(shape(3, 32000, 2, 20, LogitsDType::kBFloat16));
    random_case(shape(400, 1000, 7, 5, LogitsDType::kFloat16));
    run_graph_rounds(t, r, shape(9, 31, 3, 5, LogitsDType::kFloat32), 2, stream);
    return;
  }
  // Real vocabularies, a few rows: every dtype and k.
  for (LogitsDType d : dtypes) {
    for (int64_t V : {32000, 152064}) {
      for (int k : {0, 1, 5, 20}) random_case(shape(r.uni(1, 6), V, r.uni(1, 3), k, d));
    }
  }
  // Many rows (the launch shapes of large batches), up to 400 rows of V = 152064.
  for (LogitsDType d : dtypes) {
    random_case(shape(400, 152064, 64, 20, d));
    random_case(shape(384, 152064, 128, 5, d));
    random_case(shape(1000, 32000, 200, 1, d));
    random_case(shape(2000, 1000, 300, 20, d));
    random_case(shape(5000, 7, 600, 5, d));
  }
  for (int it = 0; it < 4; ++it) {
    run_graph_rounds(
        t, r,
        shape(r.uni(1, 40), r.pick<int64_t>({7, 1000, 32000}), r.uni(0, 8), any_k(), any_dtype()),
        5, stream);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return harness::run_main(argc, argv, "speculate_logprobs_topk_vs_cpu", body);
}
