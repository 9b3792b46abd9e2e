// speculate_draft_length_policy: kernel layer (CPU implementation and CUDA launcher). No Paddle
// include. Contract: docs/contract/policy.md; how it decides: docs/design/draft_length_policy.md.
//
// Run after a proposer wrote its drafts (seq_lens_this_time = 1 + drafts) and before verification:
// it learns from the previous step's verification, then cuts each decoding slot's drafts to the k
// (0 .. its drafts) that maximises the batch's expected output tokens per unit of step time.
//
// All arithmetic is integer (fixed point), so the CPU and the GPU compute the same bits:
//   acceptance  accept_ewma[b, i] in Q16 (65536 = 1): the estimated probability that draft i + 1 is
//               accepted given drafts 1..i were; an exponentially weighted mean of that request's
//               own verifications, starting from the batch's mean (the prior in an empty batch).
//   learning    d = draft_len[b] (the drafts verified last step), a = clamp(accept_num[b] - 1, 0,
//   d):
//               positions 1..a observed accepted; position a + 1 observed too: rejected when
//               a < d, and when a = d from the probe, the draft the proposer had at position d + 1
//               but the policy cut (draft_probe[b], -1: none): accepted if it equals the token the
//               target gave there, the bonus token, which the step update left in draft_tokens[b,
//               0]. Each observed position: p <- (p * (65536 - alpha) + obs * 65536 * alpha) >> 16;
//               the others keep their estimate. (The probe makes k = 0 keep learning for free.)
//   gains       c_0 = 65536, c_j = (c_{j-1} * p_j) >> 16 (the probability that drafts 1..j are all
//               accepted, non-increasing in j); gain_j = c_j >> 6, an integer in 0 .. 1024 (Q10):
//               the expected accepted tokens that the j-th draft adds.
//   cost        T(n) = cost_table[n - 1] for 1 <= n <= L, extrapolated along the last segment past
//   L,
//               0 for n <= 0; the step time of m extra drafts is
//               D(m) = max(1, T(N0 + m) + C * seq_cost_ns + step_cost_ns), in ns,
//               N0 = the tokens of the step without drafts (1 per decoding slot, seq_lens_this_time
//               of a prefill slot), C = the scheduled slots.
//   decision    all candidate drafts (b, j) ordered by gain descending, ties by slot then position
//               (a prefix of each slot's drafts, since gains do not grow with j); the first m of
//               them give A(m) = 1024 * C + their gains. m* = the m in 0 .. M maximising
//               floor((A(m) << 20) / D(m)), the smallest m on ties; slot b keeps its drafts among
//               the first m*. That is the exact optimum of the ratio over every choice of per-slot
//               k (for a given number of drafts, the top gains are the best).
// Slots (speculate_slot.h):
//   decoding, scheduled: learns; k as above (0 when opt_out[b]); seq_lens_this_time = 1 + k,
//                        draft_len = k, draft_probe = draft_tokens[b, k + 1] (k < its drafts) or
//                        -1.
//   prefill (a new request): accept_ewma row = the mean of the decoding slots' rows after their
//                        learning (per position, floored; the prior when none decodes),
//                        draft_len = 0, draft_probe = -1; seq_lens_this_time kept.
//   empty or unscheduled: draft_len = 0, draft_probe = -1; nothing else written.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "speculate_common/speculate_slot.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

constexpr int32_t kPolicyOne = 65536;  // Q16 one: acceptance estimates and EWMA weights
constexpr int kPolicyGainShift = 6;    // Q16 -> Q10 gains: 1025 levels, one histogram bin each
constexpr int32_t kPolicyGainLevels = (kPolicyOne >> kPolicyGainShift) + 1;
constexpr int kPolicyRatioShift = 20;  // A(m) << 20 stays below 2^63 while A(m) < 2^43
// The most drafts per slot (positions of accept_ewma): a slot's gains are a loop over them.
constexpr int64_t kPolicyMaxDrafts = 64;
// B * (K + 1) bound: A(m) <= 1024 * B * (K + 1) < 2^39 keeps A(m) << 20 below 2^63.
constexpr int64_t kPolicyMaxCandidates = int64_t{1} << 29;
// Every time (table entry, per-slot and per-step cost) is below 2^32 ns (4.3 s), so that D(m), a
// sum of three terms each below 2^61, fits in int64.
constexpr int64_t kPolicyMaxNs = (int64_t{1} << 32) - 1;

struct SpeculateDraftLengthPolicyParams {
  const int32_t* accept_num;  // [B] int32: tokens accepted by the previous verification
  const int64_t*
      draft_tokens;      // [>= B, K + 1] int64: column 0 the last accepted token, then drafts
  int32_t* draft_len;    // [B] int32, in place: drafts verified last step -> this step's k
  int64_t* draft_probe;  // [B] int64, in place: the first cut draft (-1: none)
  int32_t* accept_ewma;  // [B, K] int32 Q16, in place: per-position acceptance estimate
  const bool* opt_out;   // [B] bool: the request drafts nothing (k = 0)
  int32_t* seq_lens_this_time;      // [B] int32, in place: 1 + drafts -> 1 + k on decoding slots
  const int32_t* seq_lens_encoder;  // [B] int32
  const int32_t* seq_lens_decoder;  // [B] int32
  const bool* stop_flags;           // [B] bool
  const int64_t* cost_table;        // [L] int64: ns of a step verifying n = 1 .. L tokens
  int64_t table_len;                // L (>= 1)
  int64_t max_drafts;               // K: columns of accept_ewma (0 .. kPolicyMaxDrafts)
  int32_t alpha;                    // Q16 weight of a new observation (0 .. 65536)
  int32_t prior;         // Q16 estimate of a new request when no slot decodes (0 .. 65536)
  int64_t seq_cost_ns;   // ns per scheduled slot per step (attention over its cache), >= 0
  int64_t step_cost_ns;  // ns per step (drafting ops, launch overheads), >= 0
  int64_t batch;         // B (0: no-op)
};

// What the op does with slot b.
enum class PolicySlot : int { kIdle = 0, kPrefill = 1, kDecoding = 2, kOptedOut = 3 };

FDSPEC_HD PolicySlot policy_slot(const SpeculateDraftLengthPolicyParams& p, int64_t b) {
  const SlotKind kind = slot_kind(p.stop_flags[b], p.seq_lens_encoder[b], p.seq_lens_decoder[b]);
  if (kind == SlotKind::kEmpty || p.seq_lens_this_time[b] <= 0) return PolicySlot::kIdle;
  if (kind == SlotKind::kPrefill) return PolicySlot::kPrefill;
  return p.opt_out[b] ? PolicySlot::kOptedOut : PolicySlot::kDecoding;
}

// The drafts the proposer left slot b (0 .. K).
FDSPEC_HD int64_t policy_avail(const SpeculateDraftLengthPolicyParams& p, int64_t b) {
  return clamp_to<int64_t>(int64_t{p.seq_lens_this_time[b]} - 1, 0, p.max_drafts);
}

FDSPEC_HD int32_t policy_q16(int32_t v) { return clamp_to<int32_t>(v, 0, kPolicyOne); }

// (p * (1 - w) + target * w) in Q16, floored; every operand in 0 .. 65536.
FDSPEC_HD int32_t policy_blend(int32_t p, int32_t target, int32_t w) {
  const uint64_t mix = uint64_t(uint32_t(p)) * uint64_t(uint32_t(kPolicyOne - w)) +
                       uint64_t(uint32_t(target)) * uint64_t(uint32_t(w));
  return static_cast<int32_t>(mix >> 16);
}

// Learns from the previous step: rewrites slot b's row of accept_ewma (decoding slots, opted out
// or not: an opted-out request keeps learning from its probes, for when it opts back in).
FDSPEC_HD void policy_learn(const SpeculateDraftLengthPolicyParams& p, int64_t b) {
  const int64_t K = p.max_drafts;
  const int64_t d = clamp_to<int64_t>(p.draft_len[b], 0, K);
  const int64_t a = clamp_to<int64_t>(int64_t{p.accept_num[b]} - 1, 0, d);
  const int32_t alpha = policy_q16(p.alpha);
  int32_t* row = p.accept_ewma + b * K;
  for (int64_t i = 0; i < a; ++i) row[i] = policy_blend(policy_q16(row[i]), kPolicyOne, alpha);
  if (a >= K) return;
  bool seen = a < d, accepted = false;  // position a + 1: a verified rejection ...
  if (!seen) {                          // ... or the probe against the bonus token
    const int64_t probe = p.draft_probe[b];
    seen = probe >= 0;
    accepted = seen && probe == p.draft_tokens[b * (K + 1)];
  }
  if (seen) row[a] = policy_blend(policy_q16(row[a]), accepted ? kPolicyOne : 0, alpha);
}

// A new request's estimate of one position: the mean of the decoding slots' estimates after this
// step's learning (`sum` over `n` slots, floored), the prior when no slot decodes.
FDSPEC_HD int32_t policy_start(const SpeculateDraftLengthPolicyParams& p, int64_t sum, int64_t n) {
  return n > 0 ? static_cast<int32_t>(sum / n) : policy_q16(p.prior);
}

// Slot b's probe for the next step: the draft at position k + 1 when it was cut, else -1.
FDSPEC_HD int64_t policy_probe(const SpeculateDraftLengthPolicyParams& p, int64_t b, int64_t k) {
  return k < policy_avail(p, b) ? p.draft_tokens[b * (p.max_drafts + 1) + k + 1] : -1;
}

// Walks slot b's gains for j = 1 .. n (non-increasing), calling f(gain) for each.
template <class F>
FDSPEC_HD void policy_gains(const SpeculateDraftLengthPolicyParams& p, int64_t b, int64_t n,
                            F&& f) {
  const int32_t* row = p.accept_ewma + b * p.max_drafts;
  uint64_t c = kPolicyOne;
  for (int64_t j = 0; j < n; ++j) {
    c = (c * uint64_t(uint32_t(policy_q16(row[j])))) >> 16;
    f(static_cast<int32_t>(c >> kPolicyGainShift));
  }
}

// A table entry clamped to 0 .. kPolicyMaxNs (the table is device data the host cannot check).
FDSPEC_HD int64_t policy_entry(const SpeculateDraftLengthPolicyParams& p, int64_t i) {
  return clamp_to<int64_t>(p.cost_table[i], 0, kPolicyMaxNs);
}

// T(n) in ns (see the header comment), in 0 .. 2^61 for n < 2^29.
FDSPEC_HD int64_t policy_cost(const SpeculateDraftLengthPolicyParams& p, int64_t n) {
  if (n <= 0) return 0;
  const int64_t L = p.table_len;
  if (n <= L) return policy_entry(p, n - 1);
  const int64_t last = policy_entry(p, L - 1);
  const int64_t slope = L >= 2 ? max_of<int64_t>(last - policy_entry(p, L - 2), 0) : 0;
  return last + slope * (n - L);
}

// The objective for m extra drafts of gain sum s: floor((A(m) << 20) / D(m)).
FDSPEC_HD int64_t policy_score(const SpeculateDraftLengthPolicyParams& p, int64_t scheduled,
                               int64_t base_tokens, int64_t m, int64_t gain_sum) {
  const int64_t A = int64_t{kPolicyGainLevels - 1} * scheduled + gain_sum;
  const int64_t D = max_of<int64_t>(
      policy_cost(p, base_tokens + m) + scheduled * p.seq_cost_ns + p.step_cost_ns, 1);
  return (A << kPolicyRatioShift) / D;
}

// Sequential reference on the host. O(B * K + 1025).
void speculate_draft_length_policy_cpu(const SpeculateDraftLengthPolicyParams& p);

#ifdef FDSPEC_WITH_CUDA
// One block, a thread per slot (256 threads up to B = 256, else 512): learning and a histogram of
// the gains, a scan of the histogram, the objective at every m, its arg-max, a scan over the slots
// of the gains tied with the cut when some are cut. One kernel on `stream`, no allocation, no host
// synchronisation (CUDA-graph capturable), any B. Returns the launch status.
cudaError_t speculate_draft_length_policy_gpu(const SpeculateDraftLengthPolicyParams& p,
                                              cudaStream_t stream);
#endif

}  // namespace fdspec
