// FastDeploy's decode-step ops (verify_draft_tokens, unified_update_model_status,
// naive_update_model_status, top_p_candidates): their CUDA launchers against their CPU
// implementations, at the kernel layer (no Paddle), bit for bit on every tensor they touch. Random
// steps of every strategy (B up to 1500: past upstream's one-block limits), verify + update run
// eagerly and as one captured CUDA graph; a captured TOPP step replayed twice draws different
// tokens, each equal to the CPU's with the same counters. Usage and exit status:
// tests/cuda/harness.cuh.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "harness.cuh"
#include "naive_update_model_status/naive_update_model_status.h"
#include "top_p_candidates/top_p_candidates.h"
#include "unified_update_model_status/unified_update_model_status.h"
#include "verify_draft_tokens/verify_draft_tokens.h"

namespace {

using harness::DevVec;

// Host arrays of one step (R rows, B slots, W columns, T packed rows, C candidates); bools as
// uint8_t.
// clang-format off
#define STEP_ARRAYS(X)                                                                         \
  X(int64_t, out_ids) X(int64_t, in_ids) X(int64_t, target) X(int64_t, cand_ids)               \
  X(int64_t, ends) X(int64_t, max_dec) X(int64_t, step) X(int64_t, seeds) X(int64_t, ids_all)  \
  X(int64_t, prompt) X(float, scores) X(float, topp) X(int32_t, out_len) X(int32_t, cand_lens) \
  X(int32_t, enc) X(int32_t, dec) X(int32_t, slt) X(int32_t, cu) X(int32_t, reasoning)         \
  X(uint8_t, stop) X(uint8_t, block) X(uint8_t, paused) X(uint8_t, running)
// clang-format on
struct Step {
  int64_t R = 0, B = 0, W = 1, T = 0, C = 1, L = 1;
  int strategy = 1;
  bool reject_all = false, accept_all = false;
  HARNESS_VECTORS(STEP_ARRAYS)
};

Step random_step(std::mt19937_64& rng, int64_t B, int64_t K, int strategy) {
  auto u = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Step s;
  s.B = B;
  s.R = B + u(0, 2);
  s.W = K + 1;
  s.C = u(1, 4);
  s.L = u(4, 40);
  s.strategy = strategy;
  s.reject_all = u(0, 9) == 0;
  s.accept_all = !s.reject_all && u(0, 9) == 0;
  const int64_t vocab = u(2, 5);
  s.cu.push_back(0);
  for (int64_t b = 0; b < B; ++b) {
    s.slt.push_back(u(0, 9) == 0 ? static_cast<int32_t>(u(-1, 0))
                                 : static_cast<int32_t>(u(1, s.W)));
    s.cu.push_back(s.cu.back() + std::max<int32_t>(s.slt.back(), 0));
  }
  s.T = s.cu.back();
  s.cu.resize(B + u(0, 1));
  for (int64_t i = 0; i < s.R * s.W; ++i) {
    s.in_ids.push_back(u(0, vocab - 1));
    s.out_ids.push_back(u(0, vocab - 1));
  }
  for (int64_t r = 0; r < s.T; ++r) {
    s.target.push_back(u(0, vocab - 1));
    s.cand_lens.push_back(static_cast<int32_t>(u(0, s.C + 1)));
    float total = 0;
    for (int64_t c = 0; c < s.C; ++c) {
      s.cand_ids.push_back(u(0, vocab - 1));
      s.scores.push_back(static_cast<float>(u(1, 100)));
      total += s.scores.back();
    }
    for (int64_t c = 0; c < s.C; ++c) s.scores[r * s.C + c] /= total;
  }
  for (int64_t b = 0; b < B; ++b) {  // drafts that agree for a random prefix
    const int64_t agree = u(0, s.W);
    for (int64_t i = 0; i + 1 < std::min<int64_t>(agree, s.slt[b]); ++i) {
      const int64_t r = s.cu[b] + i, d = s.in_ids[b * s.W + i + 1];
      s.target[r] = d;
      s.cand_ids[r * s.C + u(0, s.C - 1)] = d;
    }
  }
  for (int64_t b = 0; b < s.R; ++b) {
    s.out_len.push_back(static_cast<int32_t>(u(-1, s.W + 1)));
    s.topp.push_back(static_cast<float>(u(30, 100)) / 100.0f);
    s.stop.push_back(u(0, 9) == 0);
    s.block.push_back(u(0, 9) == 0);
    s.paused.push_back(u(0, 9) == 0);
    s.enc.push_back(u(0, 5) == 0 ? static_cast<int32_t>(u(1, 20)) : 0);
    const int32_t decs[] = {0, 3, 17, 2147483646};
    s.dec.push_back(decs[u(0, 3)]);
    s.reasoning.push_back(static_cast<int32_t>(u(0, 9) == 0 ? 1 : u(0, 2)));
    s.step.push_back(u(0, s.L));
    s.max_dec.push_back(s.step.back() + u(-1, s.W + 1));
    s.seeds.push_back(static_cast<int64_t>(rng()));
    s.prompt.push_back(u(-1, s.L));
    for (int64_t l = 0; l < s.L; ++l) s.ids_all.push_back(u(0, vocab - 1));
  }
  for (int64_t e = u(0, 2); e > 0; --e) s.ends.push_back(u(0, vocab));
  s.running.push_back(u(0, 1));
  return s;
}

struct DeviceStep {
  HARNESS_MIRROR(DeviceStep, Step, STEP_ARRAYS)
};

// The params of both ops over one set of arrays (host or device pointers of the same layout).
template <class A>
void params_of(const Step& s, A& a, fdspec::VerifyDraftTokensParams* v,
               fdspec::UnifiedUpdateModelStatusParams* up, bool with_seeds) {
  const bool topp = s.strategy == 0;
  *v = {};
  v->step_output_ids = a.out_ids;
  v->step_output_len = a.out_len;
  v->step_input_ids = a.in_ids;
  v->target_tokens = topp ? nullptr : a.target;
  v->candidate_ids = topp ? a.cand_ids : nullptr;
  v->candidate_scores = topp ? a.scores : nullptr;
  v->candidate_lens = topp ? a.cand_lens : nullptr;
  v->topp = a.topp;
  v->stop_flags = reinterpret_cast<const bool*>(a.stop);
  v->seq_lens_encoder = a.enc;
  v->seq_lens_this_time = a.slt;
  v->end_tokens = a.ends;
  v->num_end_tokens = static_cast<int64_t>(s.ends.size());
  v->is_block_step = reinterpret_cast<const bool*>(a.block);
  v->cu_seqlens_q_output = a.cu;
  v->reasoning_status = a.reasoning;
  v->max_dec_len = a.max_dec;
  v->step_idx = a.step;
  v->seeds = with_seeds ? a.seeds : nullptr;
  v->rows = s.R;
  v->batch = s.B;
  v->width = s.W;
  v->token_rows = s.T;
  v->num_candidates = topp ? s.C : 1;
  v->strategy = static_cast<fdspec::VerifyStrategy>(s.strategy);
  v->reject_all = s.reject_all;
  v->accept_all = s.accept_all;
  *up = {};
  up->seq_lens_encoder = a.enc;
  up->seq_lens_decoder = a.dec;
  up->has_running_seqs = reinterpret_cast<bool*>(a.running);
  up->step_input_ids = a.in_ids;
  up->step_output_ids = a.out_ids;
  up->step_output_len = a.out_len;
  up->stop_flags = reinterpret_cast<bool*>(a.stop);
  up->seq_lens_this_time = a.slt;
  up->is_paused = reinterpret_cast<const bool*>(a.paused);
  up->token_ids_all = a.ids_all;
  up->token_ids_stride = s.L;
  up->prompt_lens = a.prompt;
  up->step_idx = a.step;
  up->end_tokens = a.ends;
  up->num_end_tokens = static_cast<int64_t>(s.ends.size());
  up->max_dec_len = a.max_dec;
  up->rows = s.R;
  up->batch = s.B;
  up->width = s.W;
}

struct HostPtrs {
  int64_t *out_ids, *in_ids, *target, *cand_ids, *ends, *max_dec, *step, *seeds, *ids_all, *prompt;
  float *scores, *topp;
  int32_t *out_len, *cand_lens, *enc, *dec, *slt, *cu, *reasoning;
  uint8_t *stop, *block, *paused, *running;
};
// The pointers of a Step (host) or a DeviceStep (device).
#define STEP_DATA_(T, n) s.n.data(),
template <class S>
HostPtrs ptrs(S& s) {
  return {STEP_ARRAYS(STEP_DATA_)};
}

void run_cpu(Step& s, bool with_seeds) {
  HostPtrs h = ptrs(s);
  fdspec::VerifyDraftTokensParams v;
  fdspec::UnifiedUpdateModelStatusParams up;
  params_of(s, h, &v, &up, with_seeds);
  fdspec::verify_draft_tokens_cpu(v);
  fdspec::unified_update_model_status_cpu(up);
}

cudaError_t launch(const fdspec::VerifyDraftTokensParams& v,
                   const fdspec::UnifiedUpdateModelStatusParams& up, cudaStream_t stream,
                   fdspec::UpdateForm form = fdspec::UpdateForm::kAuto) {
  auto& st = harness::selftest();
  if (!st.host_backend) {
    const cudaError_t e = fdspec::verify_draft_tokens_gpu(v, stream);
    return e != cudaSuccess ? e : fdspec::unified_update_model_status_gpu(up, stream, form);
  }
  fdspec::verify_draft_tokens_cpu(v);
  fdspec::unified_update_model_status_cpu(up);
  if (up.rows > 0) harness::perturb(up.step_output_len[up.rows - 1], up.step_idx[up.rows - 1]);
  return cudaSuccess;
}

bool same(const Step& a, const Step& b) {
  return a.out_ids == b.out_ids && a.out_len == b.out_len && a.in_ids == b.in_ids &&
         a.step == b.step && a.ids_all == b.ids_all && a.enc == b.enc && a.dec == b.dec &&
         a.slt == b.slt && a.stop == b.stop && a.running == b.running;
}

std::string describe(const char* what, int64_t B, int64_t K, int strategy, int seed, int graph) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s B=%ld K=%ld strategy=%d seed=%d graph=%d", what, (long)B,
                (long)K, strategy, seed, graph);
  return buf;
}

// The update's launch forms in turn (each one it can take this batch in; the automatic choice
// otherwise), so that every form meets every batch and width of the grid.
const char* const form_names[] = {"update auto", "update one-block", "update cluster",
                                  "update grid"};
fdspec::UpdateForm update_form_for(const fdspec::UnifiedUpdateModelStatusParams& up, int turn) {
  if (harness::selftest().host_backend) return fdspec::UpdateForm::kAuto;
  const auto form = static_cast<fdspec::UpdateForm>(turn % 4);
  bool fits = false;
  return fdspec::unified_update_form_fits(up, form, &fits) == cudaSuccess && fits
             ? form
             : fdspec::UpdateForm::kAuto;
}

void verify_and_update(harness::Tally& t, const harness::Stream& stream, bool quick) {
  const std::vector<int64_t> batches =
      quick ? std::vector<int64_t>{0, 1, 7, 1025}
            : std::vector<int64_t>{0, 1, 3, 33, 512, 700, 1025, 1500};
  const std::vector<int64_t> ks =
      quick ? std::vector<int64_t>{0, 4} : std::vector<int64_t>{0, 1, 4, 40};
  const int seeds = quick ? 2 : 8;
  for (int64_t B : batches) {
    for (int64_t K : ks) {
      for (int strategy = 0; strategy < 3; ++strategy) {
        for (int seed = 0; seed < seeds; ++seed) {
          std::mt19937_64 rng(B * 1000003 + K * 1009 + strategy * 101 + seed);
          const Step input = random_step(rng, B, K, strategy);
          const bool with_seeds = seed % 2;
          Step cpu = input;
          run_cpu(cpu, with_seeds);
          for (int graph = 0; graph < 2; ++graph) {
            const DeviceStep d(input);
            HostPtrs dp = ptrs(d);
            fdspec::VerifyDraftTokensParams v;
            fdspec::UnifiedUpdateModelStatusParams up;
            params_of(input, dp, &v, &up, with_seeds);
            const fdspec::UpdateForm form = update_form_for(up, seed * 2 + graph);
            harness::run_case(
                t, stream,
                [&](cudaStream_t s) {
                  harness::launch_once(s, graph,
                                       [&](cudaStream_t x) { return launch(v, up, x, form); });
                },
                [&] {
                  Step got = input;
                  got = d.download(got);
                  return same(cpu, got) ? std::string()
                                        : describe("verify+update", B, K, strategy, seed, graph);
                });
            t.count(B > 1024 ? "B>1024" : "B<=1024");
            t.count(form_names[static_cast<int>(form)]);
          }
        }
      }
    }
  }
}

// One TOPP step captured once and replayed twice: the update advances step_idx, so the second
// replay draws from new counters; each replay equals the CPU run from the same state.
void topp_replays(harness::Tally& t, const harness::Stream& stream) {
  std::mt19937_64 rng(77);
  Step s = random_step(rng, 256, 3, 0);
  for (int64_t b = 0; b < s.R; ++b) {  // every slot runs and draws; nothing ends
    s.stop[b] = s.block[b] = s.paused[b] = 0;
    s.enc[b] = 0;
    s.reasoning[b] = 0;
    s.max_dec[b] = 1 << 30;
    s.topp[b] = 1.0f;
  }
  for (int64_t r = 0; r < s.T; ++r) s.cand_lens[r] = static_cast<int32_t>(s.C);
  s.ends.clear();
  s.reject_all = true;  // every row emits exactly one drawn token
  s.accept_all = false;
  s.L = 4096;
  s.ids_all.assign(s.R * s.L, 0);
  for (int64_t r = 0; r < s.T; ++r) {
    for (int64_t c = 0; c < s.C; ++c) s.cand_ids[r * s.C + c] = 1000 + c;  // the draw is visible
  }
  const DeviceStep d(s);
  HostPtrs dp = ptrs(d);
  fdspec::VerifyDraftTokensParams v;
  fdspec::UnifiedUpdateModelStatusParams up;
  params_of(s, dp, &v, &up, true);
  const harness::Graph graph(stream.get(), [&](cudaStream_t x) { return launch(v, up, x); });
  Step cpu = s;
  std::vector<int64_t> first;
  for (int replay = 0; replay < 2; ++replay) {
    harness::run_case(
        t, stream, [&](cudaStream_t x) { graph.replay(x); },
        [&] {
          run_cpu(cpu, true);
          Step got = s;
          got = d.download(got);
          if (replay == 0) first = got.out_ids;
          const bool fresh = replay == 0 || got.out_ids != first;
          return same(cpu, got) && fresh ? std::string()
                                         : describe("topp replay", s.B, 3, 0, replay, 1);
        });
  }
}

void naive_update(harness::Tally& t, const harness::Stream& stream, bool quick) {
  for (int64_t B : {0, 1, 7, 1025, 1500}) {
    for (int seed = 0; seed < (quick ? 2 : 6); ++seed) {
      std::mt19937_64 rng(B * 31 + seed);
      auto u = [&](int64_t lo, int64_t hi) {
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
      };
      const int64_t W = u(1, 3);
      std::vector<int32_t> slt, cu{0}, num;
      std::vector<int64_t> acc, next;
      for (int64_t b = 0; b < B; ++b) {
        slt.push_back(static_cast<int32_t>(u(0, 4) == 0 ? 0 : u(1, 3)));
        cu.push_back(cu.back() + slt.back());
      }
      for (int64_t i = 0; i < cu.back() - u(0, 1); ++i) next.push_back(u(0, 9));
      for (int64_t b = 0; b < (B + 1) * W; ++b) acc.push_back(-1);
      num.assign(B + 1, 7);
      std::vector<int64_t> acc_c = acc;
      std::vector<int32_t> num_c = num, slt_c = slt;
      fdspec::NaiveUpdateModelStatusParams pc{acc_c.data(), W,
                                              num_c.data(), slt_c.data(),
                                              next.data(),  static_cast<int64_t>(next.size()),
                                              cu.data(),    B};
      fdspec::naive_update_model_status_cpu(pc);
      DevVec<int64_t> dacc(acc), dnext(next);
      DevVec<int32_t> dnum(num), dslt(slt), dcu(cu);
      fdspec::NaiveUpdateModelStatusParams pg{
          dacc.ptr(), W, dnum.ptr(), dslt.ptr(), dnext.ptr(), static_cast<int64_t>(next.size()),
          dcu.ptr(),  B};
      harness::run_case(
          t, stream,
          [&](cudaStream_t x) {
            CHECK(harness::launch_or_emulate(pg, x, fdspec::naive_update_model_status_gpu,
                                             fdspec::naive_update_model_status_cpu,
                                             [&](const auto& p) {
                                               if (p.batch == 0) return false;
                                               p.accept_num[0] ^= 1;
                                               return true;
                                             }));
          },
          [&] {
            const bool ok =
                dacc.download() == acc_c && dnum.download() == num_c && dslt.download() == slt_c;
            return ok ? std::string() : describe("naive", B, 0, 0, seed, 0);
          });
    }
  }
}

void top_p(harness::Tally& t, const harness::Stream& stream, bool quick) {
  for (int64_t V : {1, 5, 33, 700}) {
    for (int64_t C : {1, 4, 9}) {
      for (int dtype = 0; dtype < 3; ++dtype) {
        for (int seed = 0; seed < (quick ? 1 : 3); ++seed) {
          std::mt19937_64 rng(V * 7 + C * 131 + dtype * 3 + seed);
          auto u = [&](int64_t lo, int64_t hi) {
            return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
          };
          const int64_t T = u(0, 12), B = u(1, 4);
          const auto ld = static_cast<fdspec::LogitsDType>(dtype);
          const int64_t esize = dtype == 0 ? 4 : 2;
          std::vector<uint8_t> probs(T * V * esize), top(B * 4);
          for (int64_t i = 0; i < T * V; ++i) {
            const float f = static_cast<float>(u(0, 8)) / 16.0f;  // ties on purpose
            if (dtype == 0) {
              std::memcpy(&probs[i * 4], &f, 4);
            } else {
              uint32_t bits;
              std::memcpy(&bits, &f, 4);
              // f is a multiple of 1/16 in [0, 0.5]: exact in both 16-bit formats.
              const uint16_t h =
                  dtype == 2
                      ? static_cast<uint16_t>(bits >> 16)
                      : static_cast<uint16_t>(f == 0 ? 0
                                                     : ((((bits >> 23) & 0xFF) - 112) << 10) |
                                                           ((bits >> 13) & 0x3FF));
              std::memcpy(&probs[i * 2], &h, 2);
            }
          }
          for (int64_t b = 0; b < B; ++b) {
            const float tp = static_cast<float>(u(0, 12)) / 10.0f;
            std::memcpy(&top[b * 4], &tp, 4);
          }
          std::vector<int32_t> bids;
          for (int64_t i = 0; i < T; ++i) bids.push_back(static_cast<int32_t>(u(-1, B)));
          std::vector<uint8_t> sc(T * C * esize, 0xAB), sg(T * C * esize, 0xCD);
          std::vector<int64_t> ic(T * C, 5), ig(T * C, 6);
          std::vector<int32_t> lc(T, 9), lg(T, 8);
          // The parameters over host (the CPU's) or device buffers.
          auto params = [&](const void* probs_p, const void* top_p, const int32_t* bids_p,
                            void* scores, int64_t* ids, int32_t* lens) {
            return fdspec::TopPCandidatesParams{
                probs_p, ld,     T,      V,   top_p, fdspec::LogitsDType::kFloat32,
                B,       bids_p, scores, ids, lens,  C};
          };
          const auto pc =
              params(probs.data(), top.data(), bids.data(), sc.data(), ic.data(), lc.data());
          fdspec::top_p_candidates_cpu(pc);
          DevVec<uint8_t> dprobs(probs), dtop(top), dsc(sg);
          DevVec<int32_t> dbids(bids), dl(lg);
          DevVec<int64_t> di(ig);
          const auto pg =
              params(dprobs.ptr(), dtop.ptr(), dbids.ptr(), dsc.ptr(), di.ptr(), dl.ptr());
          harness::run_case(
              t, stream,
              [&](cudaStream_t x) {
                CHECK(harness::launch_or_emulate(pg, x, fdspec::top_p_candidates_gpu,
                                                 fdspec::top_p_candidates_cpu, [&](const auto& p) {
                                                   if (p.token_rows == 0) return false;
                                                   p.lens[0] ^= 1;
                                                   return true;
                                                 }));
              },
              [&] {
                const bool ok = dsc.download() == sc && di.download() == ic && dl.download() == lc;
                return ok ? std::string() : describe("top_p_candidates", V, C, dtype, seed, 0);
              });
        }
      }
    }
  }
}

void body(harness::Tally& t, bool quick) {
  const harness::Stream stream;
  verify_and_update(t, stream, quick);
  topp_replays(t, stream);
  naive_update(t, stream, quick);
  top_p(t, stream, quick);
}

}  // namespace

int main(int argc, char** argv) {
  return harness::run_main(argc, argv, "decode_step_vs_cpu", body);
}
