// speculate_draft_length_policy: CPU implementation of the rule in speculate_draft_length_policy.h.
#include <vector>

#include "speculate_draft_length_policy/speculate_draft_length_policy.h"

namespace fdspec {

void speculate_draft_length_policy_cpu(const SpeculateDraftLengthPolicyParams& p) {
  if (p.batch <= 0) return;
  const int64_t top = kPolicyGainLevels - 1;
  // Learn, and count the candidate drafts by gain.
  std::vector<int64_t> count(kPolicyGainLevels, 0), column_sum(p.max_drafts, 0);
  int64_t scheduled = 0, base_tokens = 0, learners = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const PolicySlot kind = policy_slot(p, b);
    if (kind == PolicySlot::kIdle) continue;
    ++scheduled;
    if (kind == PolicySlot::kPrefill) {
      base_tokens += p.seq_lens_this_time[b];
      continue;
    }
    policy_learn(p, b);
    ++learners;
    for (int64_t i = 0; i < p.max_drafts; ++i)
      column_sum[i] += policy_q16(p.accept_ewma[b * p.max_drafts + i]);
    base_tokens += 1;
    if (kind == PolicySlot::kDecoding) {
      policy_gains(p, b, policy_avail(p, b), [&](int32_t g) { ++count[g]; });
    }
  }
  // The objective at every m, candidates taken by gain descending.
  int64_t best_m = 0, best = policy_score(p, scheduled, base_tokens, 0, 0);
  int64_t m = 0, sum = 0;
  for (int64_t v = top; v >= 0; --v) {
    for (int64_t t = 0; t < count[v]; ++t) {
      ++m;
      sum += v;
      const int64_t s = policy_score(p, scheduled, base_tokens, m, sum);
      if (s > best) {
        best = s;
        best_m = m;
      }
    }
  }
  // The cut: every gain above cut_level, and the first cut_take of those equal to it (slot order).
  int64_t cut_level = kPolicyGainLevels, cut_take = 0;
  if (best_m > 0) {
    int64_t above = 0;
    for (int64_t v = top; v >= 0; --v) {
      if (above + count[v] >= best_m) {
        cut_level = v;
        cut_take = best_m - above;
        break;
      }
      above += count[v];
    }
  }
  int64_t tied_before = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const PolicySlot kind = policy_slot(p, b);
    int64_t k = 0;
    if (kind == PolicySlot::kDecoding) {
      int64_t higher = 0, tied = 0;
      policy_gains(p, b, policy_avail(p, b), [&](int32_t g) {
        higher += g > cut_level;
        tied += g == cut_level;
      });
      k = higher + clamp_to<int64_t>(cut_take - tied_before, 0, tied);
      tied_before += tied;
    }
    if (kind == PolicySlot::kPrefill) {  // a new request: the batch's mean estimates
      for (int64_t i = 0; i < p.max_drafts; ++i) {
        p.accept_ewma[b * p.max_drafts + i] = policy_start(p, column_sum[i], learners);
      }
    }
    const bool drafting = kind == PolicySlot::kDecoding || kind == PolicySlot::kOptedOut;
    p.draft_probe[b] = drafting ? policy_probe(p, b, k) : -1;  // reads slt before its write
    if (drafting) p.seq_lens_this_time[b] = static_cast<int32_t>(1 + k);
    p.draft_len[b] = static_cast<int32_t>(k);
  }
}

}  // namespace fdspec
