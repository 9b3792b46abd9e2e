// suffix_cache's CUDA launchers (insert, finish, evict, query) against their CPU implementation, at
// the kernel layer (no Paddle), bit for bit: random request streams (slots that prefill, decode a
// few accepted tokens per step, finish through the finish op or not, and empty), responses copied
// from a shared pool of phrases over vocabularies of 1 .. 8 tokens (some ids past 2^31: hashed keys
// beside exact ones when G = 1), rings of 1 .. 12 rows (evictions, slots
// evicted while active), key lengths 1 .. 4, occurrence caps 32 .. 64 with long single-token runs
// (the scan's overflow path), slots whose contexts end alike (one group of hits, its candidate list
// shared), every suffix parameter varied. After every step the cache state (rows, tokens, keys,
// counts, pair counts, line filter, slots, counter) and every query output are compared; some cases
// run each step as one CUDA graph (insert + query captured once, inputs copied into the captured
// buffers before each replay). A request's slot may close: empty for one step with its row still
// holding the request and the tokens accepted at its last step, which the insert adds. Some cases
// corrupt their state now and then (a row's length or request number, the counter, a slot's state:
// corrupt_state), after which the state must still agree bit for bit, and every access stay inside
// the buffers (memcheck). Usage and exit status: tests/cuda/harness.cuh.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "harness.cuh"
#include "suffix_params.cuh"
#include "suffix_cache/suffix_cache_state.h"

namespace {

using harness::DevVec;
using harness::Rng;

struct Config {
  int64_t B, W, K, R, width, M;
  int G, depth, steps, vocab;
  int64_t counted;     // V: the cache counts tokens 0 .. V - 1 (some of the stream's, all, or none)
  int64_t pair_vocab;  // F: and the pairs of tokens 0 .. F - 1 (none, some, all)
  int64_t line_planes;  // P: the bits of a line's filter (0: none; 32: nearly every line passes)
  int64_t threshold;    // the batch budget
  int64_t
      base;  // token ids are base .. base + vocab - 1: 0, or straddling 2^31 (G = 1 keys hashed)
  float factor, offset, min_prob;
  bool pad, graph;
};

// The step inputs of a stream (host), in the layout of the ops.
// clang-format off
#define STEP_INPUTS(X)                                                               \
  X(int64_t, ids) X(int64_t, P) X(int64_t, s) X(int64_t, drafts) X(int64_t, mdl)     \
  X(int32_t, enc) X(int32_t, dec) X(int32_t, dtn) X(int32_t, slt) X(int32_t, finished)
// clang-format on
struct StepIn {
  HARNESS_VECTORS(STEP_INPUTS)
};

struct Stream {
  struct Req {
    std::vector<int64_t> prompt, answer;
    int64_t done = 0;
    bool prefilled = false;
  };
  Rng& r;
  const Config& cfg;
  std::vector<std::vector<int64_t>> pool;
  std::vector<Req> reqs;
  std::vector<bool> active;
  std::vector<int64_t> ids;

  Stream(Rng& rng, const Config& c)
      : r(rng), cfg(c), reqs(c.B), active(c.B, false), ids(c.B * c.W, -1) {
    for (int i = 0; i < 6; ++i) {
      std::vector<int64_t> ph(r.uni(2, 10));
      for (auto& t : ph) t = token();
      pool.push_back(ph);
    }
    if (r.chance(0.3)) pool.push_back(std::vector<int64_t>(r.uni(40, 90), cfg.base));  // a long run
  }

  int64_t token() { return cfg.base + r.uni(0, cfg.vocab - 1); }

  std::vector<int64_t> text(int64_t n) {
    std::vector<int64_t> out;
    while (static_cast<int64_t>(out.size()) < n) {
      if (r.chance(0.6)) {
        const auto& ph = pool[r.uni(0, pool.size() - 1)];
        out.insert(out.end(), ph.begin(), ph.end());
      } else {
        out.push_back(token());
      }
    }
    out.resize(n);
    return out;
  }

  StepIn step() {
    const int64_t B = cfg.B, W = cfg.W, K = cfg.K;
    StepIn in;
    in.P.assign(B, 0);
    in.s.assign(B, 0);
    in.enc.assign(B, 0);
    in.dec.assign(B, 0);
    in.finished.assign(B, 0);
    in.dtn.assign(B, static_cast<int32_t>(K));
    in.slt.assign(B, 1);
    in.mdl.assign(B, 1 << 20);
    for (int64_t b = 0; b < B; ++b) {
      Req& q = reqs[b];
      bool closing = false;
      if (active[b] && q.prefilled && q.done >= static_cast<int64_t>(q.answer.size())) {
        active[b] = false;
        closing = true;
      }
      if (!active[b]) {
        if (closing && r.chance(0.5)) {
          // The runner's update after the request's last step: the slot is empty while its row
          // holds the request with the tokens accepted at that step (a few more): the insert adds
          // them (a closing slot).
          const int64_t P = static_cast<int64_t>(q.prompt.size());
          const int64_t extra =
              std::max<int64_t>(0, std::min<int64_t>(r.uni(0, K + 1), W - P - q.done));
          for (int64_t j = 0; j < extra; ++j) ids[b * W + P + q.done + j] = token();
          in.P[b] = P;
          in.s[b] = q.done + extra;
          continue;
        }
        if (r.chance(0.5)) {
          const int64_t p_len = r.uni(1, 10);
          const int64_t a_len = r.uni(1, std::max<int64_t>(1, W - p_len - K - 2));
          q = Req{text(p_len), text(a_len), 0, false};
          active[b] = true;
          std::fill(ids.begin() + b * W, ids.begin() + (b + 1) * W, -1);
          std::copy(q.prompt.begin(), q.prompt.end(), ids.begin() + b * W);
          in.enc[b] = static_cast<int32_t>(p_len);
          in.slt[b] = static_cast<int32_t>(p_len);
          in.P[b] = p_len;
        }
        continue;
      }
      in.P[b] = static_cast<int64_t>(q.prompt.size());
      if (!q.prefilled) {
        q.prefilled = true;
        q.done = 1;
      } else {
        q.done = std::min<int64_t>(q.answer.size(), q.done + r.uni(0, K + 1));
      }
      std::copy(q.answer.begin(), q.answer.begin() + q.done, ids.begin() + b * W + in.P[b]);
      in.s[b] = q.done;
      in.dec[b] = static_cast<int32_t>(in.P[b] + q.done);
      if (q.done >= static_cast<int64_t>(q.answer.size()) && r.chance(0.5)) in.finished[b] = 1;
      if (r.chance(0.1)) in.dtn[b] = static_cast<int32_t>(r.uni(0, K));
    }
    in.ids = ids;
    in.drafts.assign(B * (K + 1), -5);
    return in;
  }
};

// Host memory with DevVec's interface: the reference side, stepped with the CPU implementation.
template <class T>
class HostVec {
 public:
  explicit HostVec(const std::vector<T>& v) : v_(v) {}
  T* ptr() const { return const_cast<T*>(v_.data()); }
  T* data() const { return ptr(); }  // as DevVec's, for the buffer-set helpers
  void upload(const std::vector<T>& v) { v_ = v; }
  std::vector<T> download() const { return v_; }

 private:
  std::vector<T> v_;
};

// The elements of one part of the cache's state, from the layout the ops use
// (suffix_cache_state.h): the harness gives each part an allocation of its own, of that size, so
// that memcheck sees a part's overrun (inside the ops' one workspace it would land in the next).
template <class T>
std::vector<T> part(const Config& c, fdspec::SuffixCachePart p, T fill) {
  const fdspec::SuffixCacheConfig cfg{c.R, c.width,   c.B,          c.G,
                                      c.M, c.counted, c.pair_vocab, c.line_planes};
  const int64_t n = fdspec::suffix_cache_layout(cfg).bytes[p] / static_cast<int64_t>(sizeof(T));
  return std::vector<T>(std::max<int64_t>(n, 1), fill);
}

// One side's buffers: DevVec (device, or host memory in the self-test) or HostVec (the reference).
template <template <class> class V>
struct Side {
  V<int64_t> ids, P, s, drafts, mdl, stoks, tokens, rows, slots, counter, cand;
  V<int32_t> enc, dec, dtn, slt, smeta, source, keys, stat, finished, counts, pairs;
  V<uint32_t> lines, line_mask;
  V<float> sprobs;

  explicit Side(const Config& c)
      : ids(std::vector<int64_t>(c.B * c.W)),
        P(std::vector<int64_t>(c.B)),
        s(std::vector<int64_t>(c.B)),
        drafts(std::vector<int64_t>(c.B * (c.K + 1))),
        mdl(std::vector<int64_t>(c.B)),
        stoks(std::vector<int64_t>(c.B * c.K, -7)),
        tokens(part<int64_t>(c, fdspec::kSuffixPartTokens, -1)),
        rows(init_rows(c.R)),
        slots(part<int64_t>(c, fdspec::kSuffixPartSlots, fdspec::kSuffixSlotFree)),
        counter(part<int64_t>(c, fdspec::kSuffixPartCounter, 0)),
        cand(part<int64_t>(c, fdspec::kSuffixPartCand, 0)),
        enc(std::vector<int32_t>(c.B)),
        dec(std::vector<int32_t>(c.B)),
        dtn(std::vector<int32_t>(c.B)),
        slt(std::vector<int32_t>(c.B)),
        smeta(std::vector<int32_t>(c.B * 2, -7)),
        source(std::vector<int32_t>(c.B, -7)),
        keys(part<int32_t>(c, fdspec::kSuffixPartKeys, 0)),
        stat(part<int32_t>(c, fdspec::kSuffixPartStat, 0)),
        finished(std::vector<int32_t>(c.B)),
        counts(part<int32_t>(c, fdspec::kSuffixPartCounts, 0)),
        pairs(part<int32_t>(c, fdspec::kSuffixPartPairs, 0)),
        lines(part<uint32_t>(c, fdspec::kSuffixPartLines, 0)),
        line_mask(part<uint32_t>(c, fdspec::kSuffixPartLineMask, 0)),
        sprobs(std::vector<float>(c.B * c.K, -7.0f)) {
    if (init_rows(c.R).size() != part<int64_t>(c, fdspec::kSuffixPartRows, 0).size()) {
      std::fprintf(stderr, "the rows' part of suffix_cache_layout is not [R, 2]\n");
      std::exit(2);
    }
  }

  static std::vector<int64_t> init_rows(int64_t R) {
    std::vector<int64_t> v(2 * R, 0);
    for (int64_t r = 0; r < R; ++r) v[2 * r] = -1;
    return v;
  }

  // Inputs of the step; the outputs start from the same sentinels on both sides.
  void upload(const StepIn& h, const Config& c) {
    HARNESS_UPLOAD_FROM(STEP_INPUTS)
    stoks.upload(std::vector<int64_t>(c.B * c.K, -7));
    sprobs.upload(std::vector<float>(c.B * c.K, -7.0f));
    smeta.upload(std::vector<int32_t>(c.B * 2, -7));
    source.upload(std::vector<int32_t>(c.B, -7));
  }

  fdspec::SuffixCache cache(const Config& c) const {
    return fdspec::SuffixCache{tokens.ptr(), keys.ptr(),   rows.ptr(),   c.R,
                               c.width,      c.G,          counts.ptr(), c.counted,
                               pairs.ptr(),  c.pair_vocab, lines.ptr(),  c.line_planes};
  }

  fdspec::SuffixMatchParams match_params(const Config& c) const {
    return suffix_match_params_of(*this, {c.W, c.K, c.B, c.depth, c.factor, c.offset, c.min_prob,
                                          static_cast<int>(c.K), c.pad, c.threshold});
  }

  // The insert reads the query's step inputs.
  fdspec::SuffixCacheInsertParams insert_params(const Config& c) const {
    const fdspec::SuffixMatchParams m = match_params(c);
    return {m.token_ids_all,    m.token_ids_stride, m.prompt_lens, m.step_idx, m.seq_lens_encoder,
            m.seq_lens_decoder, slots.ptr(),        counter.ptr(), c.B,        cache(c)};
  }

  fdspec::SuffixCacheQueryParams query_params(const Config& c) const {
    return {match_params(c), cache(c),        source.ptr(),         cand.ptr(),
            stat.ptr(),      line_mask.ptr(), static_cast<int>(c.M)};
  }
};

using DevSide = Side<DevVec>;
using RefSide = Side<HostVec>;

// Whether the step's drafts are compared (not after a corrupt_state that makes them undefined):
// the self-test perturbs only the state when they are not; and whether its counter and slot states
// are (not after a counter with its bits 40 and up set): it perturbs only the rows when they are
// not.
bool g_drafts_compared = true;
bool g_counter_compared = true;

// The device step (insert, query, finish), or in the self-test the CPU implementation with one
// output value perturbed now and then.
cudaError_t launch_step(const Config& c, const DevSide& d, cudaStream_t stream,
                        int64_t evict_keep = -1) {
  const auto ins = d.insert_params(c);
  const auto qry = d.query_params(c);
  auto& st = harness::selftest();
  if (!st.host_backend) {
    // The step as one call (the query's first reads beside the insert) and as two, turn about.
    static unsigned steps = 0;
    cudaError_t err = cudaSuccess;
    if (++steps % 2 == 0) {
      err = fdspec::suffix_cache_step_gpu(ins, qry, stream);
    } else {
      err = fdspec::suffix_cache_insert_gpu(ins, stream);
      if (err == cudaSuccess) err = fdspec::suffix_cache_query_gpu(qry, stream);
    }
    if (err == cudaSuccess)
      err = fdspec::suffix_cache_finish_gpu(d.finished.ptr(), d.slots.ptr(), c.B, stream);
    if (err == cudaSuccess && evict_keep >= 0) {
      err = fdspec::suffix_cache_evict_gpu(ins.cache, ins.counter, evict_keep, stream);
    }
    return err;
  }
  fdspec::suffix_cache_insert_cpu(ins);
  fdspec::suffix_cache_query_cpu(qry);
  fdspec::suffix_cache_finish_cpu(d.finished.ptr(), d.slots.ptr(), c.B);
  if (evict_keep >= 0) fdspec::suffix_cache_evict_cpu(ins.cache, ins.counter, evict_keep);
  if (st.perturb && c.B > 0) {
    static int turn = 0;
    ++turn;
    if (!g_drafts_compared && turn % 2 == 0) ++turn;   // the state's perturbations: 1 and 3
    if (!g_counter_compared) turn = turn / 4 * 4 + 1;  // the rows' perturbation
    switch (turn % 4) {
      case 0:
        qry.source[0] ^= 1;
        break;
      case 1:
        ins.cache.rows[1] += 1;
        break;
      case 2:
        qry.m.suffix_meta[0] += 1;
        break;
      default:
        ins.counter[0] += 1;
        break;
    }
    st.perturbed = true;
  }
  return cudaSuccess;
}

template <class T>
bool same(const DevVec<T>& a, const HostVec<T>& b, const char* name, std::string& what) {
  const auto va = a.download(), vb = b.download();
  const int64_t i = harness::first_diff(va, vb);
  if (i < 0) return true;
  what += std::string(" ") + name + "[" + std::to_string(i) + "]";
  return false;
}
// Each (device, reference, name) triple compared (every mismatch named, in order); all equal?
inline bool all_same(std::string&) { return true; }
template <class T, class... Rest>
bool all_same(std::string& what, const DevVec<T>& a, const HostVec<T>& b, const char* name,
              const Rest&... rest) {
  const bool ok = same(a, b, name, what);
  return all_same(what, rest...) && ok;
}

Config make_config(Rng& r, bool quick) {
  Config c;
  c.B = r.uni(1, quick ? 4 : 12);
  c.K = r.pick<int64_t>({1, 3, 5, 8});
  c.W = r.uni(24, quick ? 80 : 200);
  c.R = r.uni(1, 12);
  c.width = r.uni(4, 120);
  c.M = r.pick<int64_t>({32, 48, 64});
  c.G = static_cast<int>(r.uni(1, 4));
  c.depth = r.pick<int>({2, 3, 8, 24, 64, 200});
  c.steps = quick ? 25 : 80;
  c.vocab = static_cast<int>(r.uni(1, 8));
  c.base = r.chance(0.3) ? int64_t{INT32_MAX} - 3 : 0;
  c.counted = r.pick<int64_t>({1, 3, 64});
  c.pair_vocab = r.pick<int64_t>({0, 2, 5, 64});
  c.line_planes = r.pick<int64_t>({0, 32, 256, 2048});
  // A budget that never binds (the search blocks write the outcomes, no walk kernel), one far from
  // the batch's drafts, and one that truncates them.
  c.threshold = r.pick<int64_t>({INT64_MAX, 1 << 20, 4});
  c.factor = r.pick<float>({0.5f, 1.0f, 4.0f});
  c.offset = r.pick<float>({-1.0f, 0.0f, 2.0f});
  c.min_prob = r.pick<float>({0.0f, 0.1f, 0.4f});
  c.pad = r.chance(0.3);
  c.graph = r.chance(0.3);
  return c;
}

// fast_divmod (common/fdspec_common.h: the kernels' row and line divisions) against `/` and `%`:
// the divisors the kernels use (rows up to 2^30, lines per row) and the bound's ends, dividends at
// the edges of each quotient and up to 2^63 - 1 (a request number fits 40 bits).
__global__ void fast_divmod_kernel(const int64_t* n, int64_t count, fdspec::FastDivisor f,
                                   int64_t* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t rem = -1;
    out[2 * i] = fdspec::fast_divmod(n[i], f, &rem);
    out[2 * i + 1] = rem;
  }
}

void check_fast_divisor(harness::Tally& t, Rng& r) {
  harness::Stream s;
  const int64_t top = INT64_MAX;
  for (const int64_t d :
       {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{12}, int64_t{2047}, int64_t{3000},
        int64_t{65537}, (int64_t{1} << 24) - 1, int64_t{1} << 24, (int64_t{1} << 30) - 1,
        int64_t{1} << 30, (int64_t{1} << 62) - 1, int64_t{1} << 62}) {
    std::vector<int64_t> n = {0, top, top - 1, (int64_t{1} << 40) - 1, int64_t{1} << 40};
    for (const int64_t q :
         {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{1000}, top / d - 1, top / d}) {
      if (q > top / d) continue;  // q d <= top below
      for (const int64_t k : {int64_t{-1}, int64_t{0}, int64_t{1}, d - 1}) {
        if (k < 0 ? q > 0 : k <= top - q * d) n.push_back(q * d + k);
      }
    }
    for (int i = 0; i < 64; ++i) n.push_back(r.uni(0, i % 2 ? (int64_t{1} << 40) : top));
    std::vector<int64_t> want(2 * n.size());
    for (size_t i = 0; i < n.size(); ++i) {
      want[2 * i] = n[i] / d;
      want[2 * i + 1] = n[i] % d;
    }
    const fdspec::FastDivisor f = fdspec::fast_divisor(d);
    DevVec<int64_t> dn(n), dout(std::vector<int64_t>(want.size(), -1));
    harness::run_case(
        t, s,
        [&](cudaStream_t st) {
          if (harness::selftest().host_backend) {
            std::vector<int64_t> got(want.size());
            for (size_t i = 0; i < n.size(); ++i)
              got[2 * i] = fdspec::fast_divmod(n[i], f, &got[2 * i + 1]);
            dout.upload(got);
          } else {
            fast_divmod_kernel<<<1, 128, 0, st>>>(dn.ptr(), static_cast<int64_t>(n.size()), f,
                                                  dout.ptr());
            CHECK(cudaGetLastError());
          }
        },
        [&]() {
          const int64_t at = harness::first_diff(dout.download(), want);
          return at < 0 ? std::string()
                        : "fast_divmod d=" + std::to_string(d) + " n=" + std::to_string(n[at / 2]);
        });
    t.count("fast_divisor_cases");
  }
}

// A state no op writes (docs/contract/suffix.md, "A state the ops did not write"), the same on both
// sides before a step: a row's length or request number, the counter (its bits 40 and up clear, so
// that the GPU's new count is defined) or a slot's state. Returns whether the rows no longer agree
// with the counts and the line filter, which steer the GPU's scan: its drafts are then not defined,
// and only the state is compared (every access stays inside the buffers: memcheck's quick run).
// A counter with any of its bits 40 and up set (negative, or 2^40 and more: the GPU insert counts
// its blocks there) leaves the call's new state undefined on the GPU (the contract's exception,
// docs/contract/suffix.md): *counter_defined is then false, and the step still compares the rows,
// the drafts (and the slot states where no request can lose its row: B <= R), which come out
// defined unless a block finishes counting before another reads the counter: with the corrupting
// cases' few slots (at most 12, all resident at once) that does not happen.
bool corrupt_state(Rng& r, const Config& c, DevSide& dev, RefSide& ref, harness::Tally& t,
                   int* turn, bool* counter_defined) {
  const int kind = (*turn)++ % 5;  // every kind in turn (the quick run, memcheck's, sees each)
  if (kind <= 1) {
    auto rows = ref.rows.download();
    const int64_t row = r.uni(0, c.R - 1);
    if (kind == 0) {
      rows[2 * row + 1] =
          r.pick<int64_t>({-1, -5, c.width + 1, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN});
    } else {
      rows[2 * row] = r.pick<int64_t>({-5, INT64_MIN, int64_t{1} << 39, INT64_MAX});
    }
    dev.rows.upload(rows);
    ref.rows.upload(rows);
    t.count(kind == 0 ? "corrupt_length_steps" : "corrupt_request_steps");
    return true;
  }
  if (kind == 2 || kind == 4) {
    std::vector<int64_t> counter = {
        kind == 2
            ? r.pick<int64_t>({int64_t{1} << 38, (int64_t{1} << 40) - 1, (int64_t{1} << 39) + 3})
            : r.pick<int64_t>({-1, -7, INT32_MIN, INT64_MIN, (int64_t{1} << 40) + 3})};
    // Kind 2 sets the counter to a closing slot's request number instead (closing one decoding
    // slot this step, on both sides, if none is): the call hands that number to a new request
    // (when a slot begins one), and the closing slot must leave the new request's row alone (the
    // contract's rule for a slot state the call hands out).
    const auto enc = ref.enc.download();
    auto dec = ref.dec.download();
    const auto slots = ref.slots.download();
    int64_t closing = -1;
    for (int64_t b = 0; b < c.B; ++b) {
      if (fdspec::suffix_is_closing(enc[b], dec[b], slots[b]) &&
          (closing < 0 || slots[b] < closing))
        closing = slots[b];
    }
    for (int64_t b = 0; kind == 2 && closing < 0 && b < c.B; ++b) {
      if (fdspec::suffix_is_decoding(enc[b], dec[b]) && slots[b] >= 0) {
        dec[b] = 0;
        dev.dec.upload(dec);
        ref.dec.upload(dec);
        closing = slots[b];
      }
    }
    if (kind == 2 && closing >= 0 && closing < fdspec::kSuffixCounterLimit) {
      counter[0] = closing;
      for (int64_t b = 0; b < c.B; ++b) {
        if (fdspec::suffix_is_decoding(enc[b], dec[b]) &&
            (slots[b] == fdspec::kSuffixSlotFree || slots[b] >= closing)) {
          t.count("counter_collision_steps");  // a new request takes the closing slot's number
          break;
        }
      }
    }
    dev.counter.upload(counter);
    ref.counter.upload(counter);
    *counter_defined = kind == 2;
    t.count(kind == 2 ? "corrupt_counter_steps" : "corrupt_counter_high_steps");
    return false;
  }
  auto slots = ref.slots.download();
  slots[r.uni(0, c.B - 1)] =
      r.pick<int64_t>({INT64_MAX, ref.counter.download()[0] + 2, -3, INT64_MIN});
  dev.slots.upload(slots);
  ref.slots.upload(slots);
  t.count("corrupt_slot_steps");
  return false;
}

void body(harness::Tally& t, bool quick) {
  Rng r(20261124);
  check_fast_divisor(t, r);
  // Then wide batches: past the scan's shared aggregation (256 slots) and, in the full mode, past
  // 48 KB of its shared tables (1400 slots: within what an sm_86 / sm_89 block holds, 1474). The
  // last cases are sparse: one or two slots over thousands of rows, a line mask of more than 128
  // words per querying slot, where each scan warp takes its own units of lines instead of sharing
  // its block's (suffix_cache_scan_parts.cuh, kBlockUnitWordsPerSlot).
  const int narrow = quick ? 6 : 60;
  const std::vector<int64_t> wide =
      quick ? std::vector<int64_t>{300} : std::vector<int64_t>{300, 1400};
  const int sparse = quick ? 1 : 4;
  const int cases = narrow + static_cast<int>(wide.size()) + sparse;
  for (int ci = 0; ci < cases; ++ci) {
    Config c = make_config(r, quick);
    if (ci >= narrow + static_cast<int>(wide.size())) {
      c.B = r.uni(1, 2);
      c.R = r.uni(2100, 3000);  // 4 lines a row: more than 2100 / 8 > 256 mask words
      c.width = r.uni(97, 120);
      c.steps = quick ? 8 : 20;
      t.count("sparse_cases");
    } else if (ci >= narrow) {
      c.B = wide[ci - narrow];
      c.steps = quick ? 8 : 20;
      t.count("wide_cases");
    }
    Stream stream(r, c);
    DevSide dev(c);
    RefSide ref(c);
    harness::Stream s;
    std::unique_ptr<harness::Graph> graph;
    if (c.graph) {
      graph.reset(
          new harness::Graph(s.get(), [&](cudaStream_t st) { return launch_step(c, dev, st); }));
      t.count("graph_cases");
    }
    if (c.base != 0 && c.G == 1) t.count("hashed_key_cases");
    if (c.threshold == INT64_MAX)
      t.count("walkless_cases");  // each search block writes its outcome
    if (c.line_planes > 0)
      t.count("line_filter_cases");  // the scan reads only the lines it may hit
    // Some cases corrupt their state now and then, with a generator of their own (the other cases'
    // streams stay as they were).
    const bool corrupting = !graph && ci < narrow && ci % 4 == 1;
    Rng cr(7000 + ci);
    int turn = static_cast<int>(ci);  // the corruption kind next
    bool drafts_defined = true;
    if (corrupting) t.count("corrupt_state_cases");
    for (int step = 0; step < c.steps; ++step) {
      const StepIn in = stream.step();
      dev.upload(in, c);
      ref.upload(in, c);
      bool counter_defined = true;
      const bool corrupt_now = quick ? step % 3 == 2 : step % 7 == 5;
      if (corrupting && corrupt_now && corrupt_state(cr, c, dev, ref, t, &turn, &counter_defined))
        drafts_defined = false;
      g_drafts_compared = drafts_defined;
      g_counter_compared = counter_defined;
      t.begin_case();
      // Now and then (not in graph cases) an explicit eviction of all but the newest responses.
      // (None after an undefined counter: the eviction reads it.)
      int64_t evict_keep = !graph && step % 13 == 12 ? r.uni(0, c.R) : -1;
      if (!counter_defined) evict_keep = -1;
      if (evict_keep >= 0) t.count("evict_calls");
      if (graph) {
        graph->replay(s.get());
      } else {
        CHECK(launch_step(c, dev, s.get(), evict_keep));
      }
      s.sync();
      fdspec::suffix_cache_insert_cpu(ref.insert_params(c));
      fdspec::suffix_cache_query_cpu(ref.query_params(c));
      fdspec::suffix_cache_finish_cpu(ref.finished.ptr(), ref.slots.ptr(), c.B);
      if (evict_keep >= 0)
        fdspec::suffix_cache_evict_cpu(ref.cache(c), ref.counter.ptr(), evict_keep);
      std::string what = "case " + std::to_string(ci) + " step " + std::to_string(step) + ":";
      bool ok = all_same(what, dev.rows, ref.rows, "rows", dev.tokens, ref.tokens, "tokens",
                         dev.keys, ref.keys, "keys", dev.counts, ref.counts, "counts", dev.pairs,
                         ref.pairs, "pairs", dev.lines, ref.lines, "lines");
      if (counter_defined) {
        ok &= all_same(what, dev.slots, ref.slots, "slots", dev.counter, ref.counter, "counter");
      } else {  // the reference's go on
        // The slot states are defined unless a request can lose its row to a later one of the
        // call (more slots than rows): only the counter is then left uncompared.
        if (c.B <= c.R) ok &= all_same(what, dev.slots, ref.slots, "slots");
        dev.slots.upload(ref.slots.download());
        dev.counter.upload(ref.counter.download());
      }
      if (drafts_defined) {
        ok &= all_same(what, dev.drafts, ref.drafts, "draft_tokens", dev.slt, ref.slt,
                       "seq_lens_this_time", dev.stoks, ref.stoks, "suffix_tokens", dev.sprobs,
                       ref.sprobs, "suffix_probs", dev.smeta, ref.smeta, "suffix_meta", dev.source,
                       ref.source, "suffix_source");
      }
      t.record(ok, what);
      const auto src = ref.source.download();
      const auto st = dev.stat.download();
      for (int64_t b = 0; b < c.B; ++b) {
        if (src[b] == 1) t.count("global_wins");
        const int32_t* row = st.data() + b * fdspec::kSuffixStatCols;
        if (row[fdspec::kSuffixStatCtx] == 0) continue;
        if (row[fdspec::kSuffixStatHits] > c.M) t.count("overflowed_slots");
        // Slots whose last token the cache counts: its hits listed (n_1 <= M) or its members found
        // by their last two tokens (n_1 > M), or by their last three when the pair is counted and
        // frequent (n_2 > M).
        switch (row[fdspec::kSuffixStatKind]) {
          case fdspec::kSuffixKindRare:
            t.count("counted_rare_slots");
            break;
          case fdspec::kSuffixKindFrequent:
            t.count("counted_frequent_slots");
            break;
          case fdspec::kSuffixKindPairFrequent:
            t.count("pair_frequent_slots");
            break;
          default:
            break;
        }
        // The list the search read: a member's own list (filled by the first scan), or its last
        // list refilled by the second scan (a match length beyond G + kSuffixMemberLists).
        const int list = row[fdspec::kSuffixStatList];
        if (list > 0 && row[fdspec::kSuffixStatLmin] > c.G + fdspec::kSuffixMemberLists) {
          t.count("rescanned_slots");
        } else if (list > 0) {
          t.count("member_list_slots");
        }
        if (row[fdspec::kSuffixStatRep] != b) t.count("grouped_slots");  // shares a group's hits
      }
      if (ref.counter.download()[0] > c.R) t.count("evicting_steps");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return harness::run_main(argc, argv, "suffix_cache_vs_cpu", body);
}
