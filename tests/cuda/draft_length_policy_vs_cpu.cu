// speculate_draft_length_policy: its CUDA launcher against its CPU implementation, at the kernel
// layer (no Paddle), bit for bit on every tensor the op writes (seq_lens_this_time, draft_len,
// draft_probe, accept_ewma). Random batches run as histories of several steps (each step's
// acceptance drawn from the drafts the op kept), eagerly and as captured CUDA graphs; estimates on
// few levels so that many gains tie at the cut. The full run then times the op at B = 64, 256, 1024
// (K = 5; every slot decoding, then a mix of slot kinds), warm (graph replays) and cold (L2 flushed
// before each call). Usage and exit status: tests/cuda/harness.cuh.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.cuh"
#include "harness.cuh"
#include "speculate_draft_length_policy/speculate_draft_length_policy.h"

namespace {

using harness::DevVec;
using Params = fdspec::SpeculateDraftLengthPolicyParams;

// Host arrays of one call; bools as uint8_t so that std::vector gives contiguous storage.
// clang-format off
#define POLICY_ARRAYS(X)                                                                        \
  X(int32_t, accept_num) X(int32_t, draft_len) X(int32_t, ewma) X(int32_t, slt) X(int32_t, enc) \
  X(int32_t, dec) X(uint8_t, opt_out) X(uint8_t, stop) X(int64_t, table) X(int64_t, drafts)     \
  X(int64_t, probe)
// clang-format on
struct Case {
  int64_t B = 0, K = 0;
  int32_t alpha = 0, prior = 0;
  int64_t seq_cost = 0, step_cost = 0;
  HARNESS_VECTORS(POLICY_ARRAYS)
};

// A cost table: flat then linear (a GPU's shape), random increments, or random values (any order).
std::vector<int64_t> random_table(harness::Rng& r) {
  const int64_t L = r.pick<int64_t>({1, 2, 7, 64, 300});
  std::vector<int64_t> t(L);
  const int shape = static_cast<int>(r.uni(0, 2));
  int64_t v = r.uni(1000, 8000000);
  const int64_t knee = r.uni(1, 200), slope = r.uni(0, 60000);
  for (int64_t i = 0; i < L; ++i) {
    if (shape == 0) {
      t[i] = v + (i > knee ? (i - knee) * slope : i * (slope / 50));
    } else if (shape == 1) {
      v += r.uni(0, 40000);
      t[i] = v;
    } else {
      t[i] = r.chance(0.05) ? r.uni(-5, 5) : r.uni(0, 9000000);
    }
  }
  return t;
}

// The proposer's part of a step: seq_lens_this_time = 1 + a random number of drafts on decoding
// slots (a prefill keeps its chunk), drafts and the bonus token of a vocabulary of 3 (probes hit
// often), and the previous verification's accept_num.
void propose(harness::Rng& r, Case& c) {
  for (auto& t : c.drafts) t = r.uni(0, 2);
  for (int64_t b = 0; b < c.B; ++b) {
    if (r.chance(0.03)) {  // a new request arrives in the slot
      c.enc[b] = static_cast<int32_t>(r.uni(1, 40));
      c.stop[b] = 0;
    } else if (c.enc[b] > 0 && r.chance(0.5)) {  // its prompt was processed: it decodes
      c.dec[b] = c.enc[b];
      c.enc[b] = 0;
    }
    if (c.enc[b] > 0) {
      c.slt[b] = c.enc[b];
      continue;
    }
    c.slt[b] = r.chance(0.05) ? static_cast<int32_t>(r.uni(-1, 0))
                              : static_cast<int32_t>(1 + r.uni(0, c.K + 2));
    // accept_num: 1 + the drafts accepted of those kept last step (draft_len), sometimes nonsense.
    const int64_t kept = std::max<int64_t>(c.draft_len[b], 0);
    c.accept_num[b] = r.chance(0.05) ? static_cast<int32_t>(r.uni(-3, c.K + 4))
                                     : static_cast<int32_t>(1 + r.uni(0, kept));
  }
}

Case random_case(harness::Rng& r, int64_t B, int64_t K) {
  Case c;
  c.B = B;
  c.K = K;
  c.alpha = static_cast<int32_t>(r.pick<int64_t>({0, 6554, 16384, 65536, r.uni(0, 65536), 70000}));
  c.prior = static_cast<int32_t>(r.pick<int64_t>({0, 39322, 65536, r.uni(0, 65536), -1}));
  c.seq_cost = r.pick<int64_t>({0, 42000, r.uni(0, 100000)});
  c.step_cost = r.pick<int64_t>({0, 20000, r.uni(0, 3000000)});
  c.table = random_table(r);
  const bool coarse = r.chance(0.5);  // few estimate levels: many tied gains
  for (int64_t b = 0; b < B; ++b) {
    const int kind = static_cast<int>(r.uni(0, 9));
    c.stop.push_back(kind == 0);
    c.enc.push_back(kind == 1 ? static_cast<int32_t>(r.uni(1, 40)) : 0);
    c.dec.push_back(kind == 2 ? 0 : static_cast<int32_t>(r.uni(1, 500)));
    c.opt_out.push_back(r.chance(0.1));
    c.draft_len.push_back(static_cast<int32_t>(r.chance(0.05) ? r.uni(-2, K + 3) : r.uni(0, K)));
    c.probe.push_back(r.chance(0.2) ? -1 : r.uni(0, 2));
    for (int64_t j = 0; j <= K; ++j) c.drafts.push_back(0);
    c.slt.push_back(kind == 1 ? c.enc.back() : 1);
    c.accept_num.push_back(0);
    for (int64_t i = 0; i < K; ++i) {
      const int64_t v = coarse ? r.pick<int64_t>({0, 32768, 49152, 65536})
                               : (r.chance(0.03) ? r.uni(-100, 70000) : r.uni(0, 65536));
      c.ewma.push_back(static_cast<int32_t>(v));
    }
  }
  propose(r, c);
  return c;
}

struct DevCase {
  HARNESS_MIRROR(DevCase, Case, POLICY_ARRAYS)
};

// The params over the arrays of `a`: the Case itself (host) or its DevCase (device).
template <class A>
Params params_of(const Case& c, A& a) {
  Params p;
  p.accept_num = a.accept_num.data();
  p.draft_tokens = a.drafts.data();
  p.draft_probe = a.probe.data();
  p.draft_len = a.draft_len.data();
  p.accept_ewma = a.ewma.data();
  p.opt_out = reinterpret_cast<const bool*>(a.opt_out.data());
  p.seq_lens_this_time = a.slt.data();
  p.seq_lens_encoder = a.enc.data();
  p.seq_lens_decoder = a.dec.data();
  p.stop_flags = reinterpret_cast<const bool*>(a.stop.data());
  p.cost_table = a.table.data();
  p.table_len = static_cast<int64_t>(c.table.size());
  p.max_drafts = c.K;
  p.alpha = c.alpha;
  p.prior = c.prior;
  p.seq_cost_ns = c.seq_cost;
  p.step_cost_ns = c.step_cost;
  p.batch = c.B;
  return p;
}

Params host_params(Case& c) { return params_of(c, c); }

Params device_params(const Case& c, const DevCase& d) { return params_of(c, d); }

cudaError_t launch(const Params& p, cudaStream_t stream) {
  return harness::launch_or_emulate(p, stream, fdspec::speculate_draft_length_policy_gpu,
                                    fdspec::speculate_draft_length_policy_cpu, [](const Params& q) {
                                      if (q.batch == 0) return false;
                                      harness::perturb(q.draft_len[q.batch - 1],
                                                       q.draft_probe[q.batch - 1]);
                                      return true;
                                    });
}

std::string diff(const Case& cpu, const DevCase& d) {
  const auto slt = d.slt.download(), dl = d.draft_len.download(), ew = d.ewma.download();
  const auto pr = d.probe.download();
  const int64_t a = harness::first_diff(slt, cpu.slt), b = harness::first_diff(dl, cpu.draft_len),
                e = harness::first_diff(ew, cpu.ewma), f = harness::first_diff(pr, cpu.probe);
  if (a < 0 && b < 0 && e < 0 && f < 0) return "";
  char what[160];
  std::snprintf(what, sizeof(what), "slt@%lld draft_len@%lld ewma@%lld probe@%lld", (long long)a,
                (long long)b, (long long)e, (long long)f);
  return what;
}

void count_coverage(harness::Tally& t, const Case& before, const Case& after) {
  for (int64_t b = 0; b < before.B; ++b) {
    if (!before.stop[b] && before.enc[b] > 0 && before.slt[b] > 0) t.count("new_request");
    const bool decoding =
        !before.stop[b] && before.enc[b] <= 0 && before.dec[b] != 0 && before.slt[b] > 0;
    if (!decoding) continue;
    const int64_t avail = std::min<int64_t>(std::max(before.slt[b] - 1, 0), before.K);
    const int32_t k = after.draft_len[b];
    const int64_t d = std::min<int64_t>(std::max(before.draft_len[b], 0), before.K);
    if (before.probe[b] >= 0 && before.accept_num[b] - 1 >= d && d < before.K) {
      t.count(before.probe[b] == before.drafts[b * (before.K + 1)] ? "probe_hit" : "probe_miss");
    }
    if (before.opt_out[b]) {
      t.count("opted_out");
    } else if (k == 0 && avail > 0) {
      t.count("cut_to_0");
    } else if (k < avail) {
      t.count("cut_partly");
    } else if (avail > 0) {
      t.count("kept_all");
    }
  }
}

// Time at runner sizes: the op after a reset of its in-place tensors (a device-to-device copy from
// a pristine copy, timed alone and subtracted), warm and with L2 flushed before each call. Two
// batches per size: every slot decoding with K drafts (the most candidates), and a random mix of
// slot kinds (new requests: the batch-mean start; opted-out and stopped slots; coarse estimates).
void print_timings(const harness::Stream& stream) {
  const bench::Flusher fl;
  std::printf("%6s %4s %8s %12s %12s\n", "B", "K", "batch", "warm us", "cold us");
  for (int mixed = 0; mixed < 2; ++mixed) {
    for (int64_t B : {64, 256, 1024}) {
      const int64_t K = 5;
      harness::Rng r(B * 31 + K + mixed);
      Case c = random_case(r, B, K);
      for (int64_t b = 0; b < B && !mixed; ++b) {  // every slot decoding with K drafts
        c.stop[b] = 0;
        c.enc[b] = 0;
        c.dec[b] = 100;
        c.slt[b] = static_cast<int32_t>(K + 1);
        c.opt_out[b] = 0;
      }
      c.table.assign(2048, 0);
      for (int64_t i = 0; i < 2048; ++i)
        c.table[i] = 6000000 + std::max<int64_t>(0, i - 200) * 27000 + i * 2000;
      const DevCase pristine(c), d(c);
      const Params p = device_params(c, d);
      auto reset = [&](cudaStream_t s) {
        cudaError_t e =
            cudaMemcpyAsync(d.slt.ptr(), pristine.slt.ptr(), B * 4, cudaMemcpyDeviceToDevice, s);
        if (e == cudaSuccess)
          e = cudaMemcpyAsync(d.draft_len.ptr(), pristine.draft_len.ptr(), B * 4,
                              cudaMemcpyDeviceToDevice, s);
        if (e == cudaSuccess)
          e = cudaMemcpyAsync(d.ewma.ptr(), pristine.ewma.ptr(), B * K * 4,
                              cudaMemcpyDeviceToDevice, s);
        if (e == cudaSuccess)
          e = cudaMemcpyAsync(d.probe.ptr(), pristine.probe.ptr(), B * 8, cudaMemcpyDeviceToDevice,
                              s);
        return e;
      };
      auto call = [&](cudaStream_t s) {
        const cudaError_t e = reset(s);
        return e != cudaSuccess ? e : fdspec::speculate_draft_length_policy_gpu(p, s);
      };
      auto flush_reset = [&](cudaStream_t s) {
        const cudaError_t e = fl.run(s);
        return e != cudaSuccess ? e : reset(s);
      };
      auto flush_call = [&](cudaStream_t s) {
        const cudaError_t e = flush_reset(s);
        return e != cudaSuccess ? e : fdspec::speculate_draft_length_policy_gpu(p, s);
      };
      const cudaStream_t st = stream.get();
      const double warm =
          bench::graph_us(st, 20, 10, 15, call) - bench::graph_us(st, 20, 10, 15, reset);
      const double cold =
          bench::graph_us(st, 20, 3, 15, flush_call) - bench::graph_us(st, 20, 3, 15, flush_reset);
      std::printf("%6lld %4lld %8s %12.2f %12.2f\n", (long long)B, (long long)K,
                  mixed ? "mixed" : "decoding", warm, cold);
    }
  }
}

void body(harness::Tally& t, bool quick) {
  const harness::Stream stream;
  const std::vector<int64_t> batches =
      quick ? std::vector<int64_t>{0, 1, 7, 130, 300}
            : std::vector<int64_t>{0, 1, 3, 7, 33, 130, 256, 257, 512, 513, 1000, 2100};
  const std::vector<int64_t> drafts =
      quick ? std::vector<int64_t>{0, 1, 5} : std::vector<int64_t>{0, 1, 3, 5, 8, 64};
  const int seeds = quick ? 2 : 8, steps = quick ? 3 : 6;
  for (int64_t B : batches) {
    for (int64_t K : drafts) {
      for (int seed = 0; seed < seeds; ++seed) {
        for (int graph = 0; graph < 2; ++graph) {
          harness::Rng r(B * 1000003 + K * 1009 + seed * 17 + graph);
          Case cpu = random_case(r, B, K);
          DevCase d(cpu);
          for (int step = 0; step < steps; ++step) {
            const Case before = cpu;
            const Params pc = host_params(cpu);
            fdspec::speculate_draft_length_policy_cpu(pc);
            const Params pg = device_params(before, d);
            harness::run_case(
                t, stream,
                [&](cudaStream_t s) {
                  harness::launch_once(s, graph, [&](cudaStream_t x) { return launch(pg, x); });
                },
                [&] {
                  const std::string dd = diff(cpu, d);
                  if (dd.empty()) return dd;
                  char what[256];
                  std::snprintf(what, sizeof(what), "B=%lld K=%lld seed=%d graph=%d step=%d: %s",
                                (long long)B, (long long)K, seed, graph, step, dd.c_str());
                  return std::string(what);
                });
            count_coverage(t, before, cpu);
            // Next step: new drafts and the acceptance of the kept ones, on both sides; the device
            // takes the CPU's state (a mismatch is reported once, not carried forward).
            propose(r, cpu);
            d.upload(cpu);
          }
        }
      }
    }
  }
  if (!quick && !harness::selftest().host_backend) print_timings(stream);
}

}  // namespace

int main(int argc, char** argv) {
  return harness::run_main(argc, argv, "draft_length_policy_vs_cpu", body);
}
