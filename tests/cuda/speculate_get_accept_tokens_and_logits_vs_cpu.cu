// speculate_get_accept_tokens_and_logits and speculate_compute_cu_batch_offset: the CUDA launchers
// against the CPU implementations, at the kernel layer (no Paddle), bit for bit on every output and
// on every input (which must be left as it was). Logits are raw bit patterns (float32, or the 16
// bits of float16 / bfloat16, NaN payloads included): the gather is a byte copy and must be exact.
// Covered: odd vocabularies and base pointers misaligned by whole elements (every vector width of
// the copy: 16, 8, 4, 2 bytes), real vocabularies (32000, 152064), batches up to ~600 (one fused
// kernel) and past 1024 (offset scan + gather), docs/contract/general.md hostile values (accept_num
// below 0, above K + 1 and at the int32 limits; cu_seqlens_q_output out of [0, R); fewer output
// rows than accepted tokens; longer offset tensors than B + 1), CUDA-graph replays with new inputs
// in the captured buffers, and the offset op alone (real_bsz up to 3000, no clamp or a clamp,
// counts over the whole int32 range). Usage and exit status: tests/cuda/harness.cuh.
#include <algorithm>
#include <cinttypes>
#include <string>
#include <vector>

#include "harness.cuh"
#include "speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits.h"

namespace {

using harness::DevBuf;
using harness::DevVec;
using harness::Rng;

const char* dtype_name(int esize, int tag) {
  return esize == 4 ? "float32" : (tag ? "bfloat16" : "float16");
}

// What a CUDA graph bakes in: sizes, dtype and pointer offsets.
struct Shape {
  int64_t B = 0, K1 = 1, V = 1, R = 0, N = 0;
  int esize = 4, dtype_tag = 0;               // element size; 16-bit: float16 (0) or bfloat16 (1)
  int64_t in_misalign = 0, out_misalign = 0;  // elements between the allocation and the row pointer
  int64_t cu_len = 1, cuq_len = 0, at_rows = 0;
  int64_t row_bytes() const { return V * esize; }
};

// target: out_misalign elements (never written), then the N rows.
// clang-format off
#define ACCEPT_ARRAYS(X)                                                                  \
  X(int64_t, token_ids) X(int64_t, accept_tokens) X(unsigned char, target) X(int32_t, cu) \
  X(int32_t, cuq) X(int32_t, enc) X(int32_t, accept)
// clang-format on
struct Inputs {
  HARNESS_VECTORS(ACCEPT_ARRAYS)
  std::vector<unsigned char> logits;  // the R rows
};

void random_bits(Rng& r, std::vector<unsigned char>& v) {
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    const uint64_t x = r.g();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < v.size(); ++i) v[i] = static_cast<unsigned char>(r.g());
}

// How the slots' counts are drawn.
struct Mix {
  double prefill = 0.25;
  double hostile = 0.1;
};

// Sizes first (R and N depend on the slot layout), then the inputs.
Inputs make_case(Rng& r, Shape& sh, const Mix& mix, bool keep_sizes) {
  const int64_t B = sh.B, K1 = sh.K1;
  Inputs in;
  in.enc.resize(B);
  in.accept.resize(B);
  int64_t accepted = 0;  // sum of the clamped counts
  for (int64_t b = 0; b < B; ++b) {
    const double e = r.real();
    in.enc[b] = e < mix.prefill ? static_cast<int32_t>(r.uni(1, 50))
                                : (e < mix.prefill + 0.05 ? -static_cast<int32_t>(r.uni(1, 5)) : 0);
    int32_t a = static_cast<int32_t>(r.uni(0, K1));
    if (r.chance(mix.hostile)) {
      a = r.chance(0.7) ? static_cast<int32_t>(r.uni(-3, K1 + 4))
                        : r.pick<int32_t>({INT32_MIN, INT32_MAX, -1});
    }
    in.accept[b] = a;
    accepted += std::clamp<int64_t>(a, 0, K1);
  }
  // The runner's layout of the target model's rows: one per prefill slot, K + 1 per decoding slot.
  std::vector<int32_t> layout(B);
  int64_t rows = 0;
  for (int64_t b = 0; b < B; ++b) {
    layout[b] = static_cast<int32_t>(rows);
    rows += in.enc[b] > 0 ? 1 : K1;
  }
  if (!keep_sizes) {
    sh.R = std::max<int64_t>(0, r.chance(0.7) ? rows + r.uni(-2, 2) : r.uni(0, B * K1 + 2));
    const double n = r.real();
    sh.N = n < 0.4 ? B * K1 : (n < 0.7 ? accepted : (n < 0.95 ? r.uni(0, B * K1 + 2) : 0));
    sh.cu_len = B + 1 + r.uni(0, 2);
    sh.cuq_len = B + r.uni(0, 2);
    sh.at_rows = B + r.uni(0, 2);
  }
  const bool random_q = r.chance(0.2);
  in.cuq.resize(sh.cuq_len);
  for (int64_t b = 0; b < sh.cuq_len; ++b) {
    int32_t q = b < B && !random_q ? layout[b] : static_cast<int32_t>(r.uni(-2, sh.R + 2));
    if (r.chance(0.02)) q = r.pick<int32_t>({INT32_MIN, INT32_MAX, -1});
    in.cuq[b] = q;
  }
  in.cu.resize(sh.cu_len);
  for (auto& c : in.cu) c = static_cast<int32_t>(r.uni(-7777, 7777));  // stale values
  in.accept_tokens.resize(sh.at_rows * K1);
  for (auto& t : in.accept_tokens) t = r.uni(0, 1000);
  in.token_ids.assign(sh.N, -5);
  in.logits.resize(sh.R * sh.row_bytes());
  random_bits(r, in.logits);
  in.target.resize(sh.out_misalign * sh.esize + sh.N * sh.row_bytes());
  random_bits(r, in.target);  // stale rows: a row the op should not write keeps its bytes
  return in;
}

fdspec::AcceptTokensLogitsParams params_of(const Shape& sh, int64_t* token_ids,
                                           unsigned char* target_rows,
                                           const unsigned char* logits_rows, int32_t* cu,
                                           const int32_t* cuq, const int32_t* enc,
                                           const int32_t* accept, const int64_t* accept_tokens) {
  fdspec::AcceptTokensLogitsParams p;
  p.token_ids = token_ids;
  p.target_logits = target_rows;
  p.logits = logits_rows;
  p.row_bytes = sh.row_bytes();
  p.out_rows = sh.N;
  p.in_rows = sh.R;
  p.cu_batch_token_offset = cu;
  p.cu_seqlens_q_output = cuq;
  p.seq_lens_encoder = enc;
  p.accept_num = accept;
  p.accept_tokens = accept_tokens;
  p.accept_stride = sh.K1;
  p.batch = sh.B;
  return p;
}

Inputs cpu_result(const Shape& sh, const Inputs& in) {
  Inputs c = in;
  fdspec::get_accept_tokens_and_logits_cpu(params_of(
      sh, c.token_ids.data(), c.target.data() + sh.out_misalign * sh.esize, c.logits.data(),
      c.cu.data(), c.cuq.data(), c.enc.data(), c.accept.data(), c.accept_tokens.data()));
  return c;
}

// What the case reaches: rows copied, tokens written, accepted tokens dropped for lack of output
// rows.
void count_coverage(harness::Tally& t, const Shape& sh, const Inputs& in, const Inputs& want) {
  const int64_t rb = sh.row_bytes(), pre = sh.out_misalign * sh.esize;
  for (int64_t i = 0; i < sh.N; ++i) {
    t.count("rows_copied", std::memcmp(want.target.data() + pre + i * rb,
                                       in.target.data() + pre + i * rb, rb) != 0);
    t.count("tokens_written", want.token_ids[i] != in.token_ids[i]);
  }
  t.count("tokens_dropped", sh.B > 0 && want.cu[sh.B] > sh.N);
  t.count("unfused_batches", sh.B > 1024);
}

// The GPU launchers; in the self-test the CPU implementations, perturbed on request.
cudaError_t launch_gather(const fdspec::AcceptTokensLogitsParams& p, cudaStream_t stream) {
  return harness::launch_or_emulate(
      p, stream, fdspec::get_accept_tokens_and_logits_gpu, fdspec::get_accept_tokens_and_logits_cpu,
      [](const fdspec::AcceptTokensLogitsParams& q) {
        if (q.batch <= 0) return false;
        static int turn = 0;  // a token, a copied row's last byte, an offset, in turn
        const int k = turn++ % 3;
        if (k == 1 && q.out_rows > 0) {
          q.token_ids[q.out_rows - 1] ^= 1;
        } else if (k == 2 && q.out_rows > 0) {
          q.target_logits[q.out_rows * q.row_bytes - 1] ^= 1;
        } else {
          q.cu_batch_token_offset[q.batch] ^= 1;
        }
        return true;
      });
}

cudaError_t launch_offsets(const fdspec::CuBatchOffsetParams& p, cudaStream_t stream) {
  return harness::launch_or_emulate(p, stream, fdspec::compute_cu_batch_offset_gpu,
                                    fdspec::compute_cu_batch_offset_cpu,
                                    [](const fdspec::CuBatchOffsetParams& q) {
                                      if (q.batch <= 0) return false;
                                      q.cu_batch_token_offset[q.batch] ^= 1;
                                      return true;
                                    });
}

struct DeviceArrays {
  HARNESS_MIRROR(DeviceArrays, Inputs, ACCEPT_ARRAYS)
};

// The arrays, and the logits behind a prefix of bytes left uninitialised (initcheck).
struct DeviceInputs : DeviceArrays {
  int64_t logits_prefix;
  DevBuf logits;

  DeviceInputs(const Shape& sh, const Inputs& in)
      : DeviceArrays(in),
        logits_prefix(sh.in_misalign * sh.esize),
        logits(logits_prefix + in.logits.size()) {
    harness::copy_to_device(logits.bytes() + logits_prefix, in.logits.data(), in.logits.size());
  }
  void upload(const Inputs& in) {
    DeviceArrays::upload(in);
    if (in.logits.size() + logits_prefix != logits.size()) std::exit(2);
    harness::copy_to_device(logits.bytes() + logits_prefix, in.logits.data(), in.logits.size());
  }
  Inputs download() const {
    Inputs out = DeviceArrays::download();
    out.logits.resize(logits.size() - logits_prefix);
    harness::copy_to_host(out.logits.data(), logits.bytes() + logits_prefix, out.logits.size());
    return out;
  }
  fdspec::AcceptTokensLogitsParams params(const Shape& sh) const {
    return params_of(sh, token_ids.ptr(), target.ptr() + sh.out_misalign * sh.esize,
                     logits.bytes() + logits_prefix, cu.ptr(), cuq.ptr(), enc.ptr(), accept.ptr(),
                     accept_tokens.ptr());
  }
};

bool same(const Inputs& in, const Inputs& want, const Inputs& got) {
  return got.token_ids == want.token_ids && got.target == want.target && got.cu == want.cu &&
         got.accept_tokens == in.accept_tokens && got.logits == in.logits && got.cuq == in.cuq &&
         got.enc == in.enc && got.accept == in.accept;
}

std::string describe(const Shape& sh, const Inputs& in, const Inputs& want, const Inputs& got,
                     const char* how) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "[%s] %s B=%" PRId64 " K+1=%" PRId64 " V=%" PRId64 " R=%" PRId64 " N=%" PRId64
                " misalign in/out=%" PRId64 "/%" PRId64 " elements;",
                how, dtype_name(sh.esize, sh.dtype_tag), sh.B, sh.K1, sh.V, sh.R, sh.N,
                sh.in_misalign, sh.out_misalign);
  std::string s = buf;
  auto diff = [&](const char* name, int64_t at) {
    if (at < 0) return;
    std::snprintf(buf, sizeof(buf), " %s differs first at %" PRId64 ";", name, at);
    s += buf;
  };
  diff("token_ids", harness::first_diff(want.token_ids, got.token_ids));
  const int64_t t = harness::first_diff(want.target, got.target);
  if (t >= 0) {
    const int64_t row = (t - sh.out_misalign * sh.esize) / std::max<int64_t>(sh.row_bytes(), 1);
    std::snprintf(buf, sizeof(buf),
                  " target_logits differs first at byte %" PRId64 " (row %" PRId64 ");", t,
                  t < sh.out_misalign * sh.esize ? -1 : row);
    s += buf;
  }
  diff("cu_batch_token_offset", harness::first_diff(want.cu, got.cu));
  diff("input accept_tokens", harness::first_diff(in.accept_tokens, got.accept_tokens));
  diff("input logits", harness::first_diff(in.logits, got.logits));
  diff("input cu_seqlens_q_output", harness::first_diff(in.cuq, got.cuq));
  diff("input seq_lens_encoder", harness::first_diff(in.enc, got.enc));
  diff("input accept_num", harness::first_diff(in.accept, got.accept));
  return s;
}

void run_case(harness::Tally& t, const Shape& sh, const Inputs& in, const harness::Stream& stream) {
  const Inputs want = cpu_result(sh, in);
  count_coverage(t, sh, in, want);
  DeviceInputs dev(sh, in);
  harness::check_inputs_case(t, stream, sh, in, want, dev, "eager",
                             [&](cudaStream_t s) { CHECK(launch_gather(dev.params(sh), s)); });
}

void run_graph_rounds(harness::Tally& t, Rng& r, Shape sh, const Mix& mix, int replays,
                      const harness::Stream& stream) {
  Inputs in = make_case(r, sh, mix, false);
  DeviceInputs dev(sh, in);
  const fdspec::AcceptTokensLogitsParams p = dev.params(sh);
  const harness::Graph graph(stream.get(), [&](cudaStream_t s) { return launch_gather(p, s); });
  for (int i = 0; i < replays; ++i) {
    if (i > 0) in = make_case(r, sh, mix, true);
    dev.upload(in);
    const Inputs want = cpu_result(sh, in);
    count_coverage(t, sh, in, want);
    DeviceInputs dev(sh, in);
    harness::check_inputs_case(t, stream, sh, in, want, dev, "eager",
                               [&](cudaStream_t s) { CHECK(launch_gather(dev.params(sh), s)); });
  }
}

// speculate_compute_cu_batch_offset alone: real_bsz slots of longer tensors.
void run_offset_case(harness::Tally& t, Rng& r, int64_t B, const harness::Stream& stream) {
  std::vector<int32_t> accept(B + r.uni(0, 2)), cu(B + 1 + r.uni(0, 2));
  const bool full_range = r.chance(0.2);
  for (auto& a : accept) {
    a = full_range ? static_cast<int32_t>(r.uni(INT32_MIN, INT32_MAX))
                   : static_cast<int32_t>(r.uni(-3, 9));
  }
  for (auto& c : cu) c = static_cast<int32_t>(r.uni(-7777, 7777));
  const int64_t max_accept = r.chance(0.4) ? -1 : r.uni(0, 7);
  std::vector<int32_t> want = cu;
  fdspec::compute_cu_batch_offset_cpu({want.data(), accept.data(), B, max_accept});
  DevVec<int32_t> d_cu(cu), d_accept(accept);
  t.begin_case();
  CHECK(launch_offsets({d_cu.ptr(), d_accept.ptr(), B, max_accept}, stream.get()));
  stream.sync();
  const std::vector<int32_t> got = d_cu.download();
  const bool ok = got == want && d_accept.download() == accept;
  char buf[256];
  if (!ok) {
    std::snprintf(buf, sizeof(buf),
                  "[offsets] real_bsz=%" PRId64 " max_accept=%" PRId64
                  " full_range=%d: cu differs first at %" PRId64,
                  B, max_accept, full_range, harness::first_diff(want, got));
  }
  t.record(ok, ok ? std::string() : std::string(buf));
}

void body(harness::Tally& t, bool quick) {
  Rng r(20260708);
  const harness::Stream stream;
  auto shape = [&](int64_t B, int64_t K1, int64_t V) {
    Shape sh;
    sh.B = B;
    sh.K1 = K1;
    sh.V = V;
    sh.esize = r.chance(0.4) ? 4 : 2;
    sh.dtype_tag = static_cast<int>(r.uni(0, 1));
    sh.in_misalign = r.chance(0.5) ? 0 : r.uni(1, 3);
    sh.out_misalign = r.chance(0.5) ? 0 : r.uni(1, 3);
    return sh;
  };
  auto gather_case = [&](Shape sh, const Mix& mix) {
    const Inputs in = make_case(r, sh, mix, false);
    run_case(t, sh, in, stream);
  };
  const Mix mixed;
  const Mix decode{0.0, 0.05};

  // Small batches, every vector width (odd V, V % 4 != 0, misaligned pointers).
  for (int it = 0, n = quick ? 60 : 5000; it < n; ++it) {
    const int64_t V = r.pick<int64_t>({1, 2, 3, 5, 7, 8, 16, 31, 33, 64, 1000, 1001});
    gather_case(shape(r.uni(0, 8), r.uni(1, 6), V), it % 3 ? mixed : decode);
  }
  // Batches up to ~600: still the fused kernel.
  for (int it = 0, n = quick ? 1 : 200; it < n; ++it) {
    const int64_t V = quick ? 3 : r.pick<int64_t>({1, 3, 8, 31, 1001});
    gather_case(shape(r.uni(100, 600), quick ? 2 : r.uni(1, 6), V), it % 2 ? mixed : decode);
  }
  // Real vocabularies.
  for (int it = 0, n = quick ? 1 : 40; it < n; ++it) {
    const int64_t V = quick ? 32001 : r.pick<int64_t>({32000, 32001, 152064});
    gather_case(shape(quick ? 2 : r.uni(1, 8), r.uni(1, 6), V), mixed);
  }
  // Past kFusedOffsetMaxBatch (1024): the offset scan, then the gather.
  for (int it = 0, n = quick ? 1 : 30; it < n; ++it) {
    const int64_t V = quick ? 3 : r.pick<int64_t>({1, 3, 8, 33});
    gather_case(shape(quick ? 1100 : r.uni(1025, 2100), quick ? 2 : r.uni(1, 3), V), mixed);
  }
  // CUDA graphs: one capture per shape, new inputs before each replay.
  for (int it = 0, n = quick ? 1 : 6; it < n; ++it) {
    const int64_t B = it == 5 ? 1500 : r.uni(1, 64);
    run_graph_rounds(t, r, shape(B, r.uni(1, 6), r.pick<int64_t>({3, 8, 1001})), mixed,
                     quick ? 3 : 10, stream);
  }
  // The offset op: chunks of the 1024-thread scan, empty and one-slot batches.
  for (int64_t B : {0, 1, 2, 1023, 1024, 1025, 2100}) run_offset_case(t, r, B, stream);
  for (int it = 0, n = quick ? 13 : 2000; it < n; ++it)
    run_offset_case(t, r, r.uni(0, quick ? 40 : 3000), stream);
}

}  // namespace

int main(int argc, char** argv) {
  return harness::run_main(argc, argv, "speculate_get_accept_tokens_and_logits_vs_cpu", body);
}
