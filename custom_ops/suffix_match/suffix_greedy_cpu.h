// The greedy draft path of suffix decoding on the CPU (docs/contract/suffix.md), written once for
// the local search (suffix_match: occurrences are positions of the slot's own history) and the
// global one (suffix_cache: occurrences are packed (request, offset) candidates of the cache). Host
// code only.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "suffix_match/suffix_match.h"

namespace fdspec {

struct SuffixDraft {
  std::vector<int64_t> tokens;
  std::vector<float> probs;
  float score = 0.0f;
  int match_len = 0;
};

// The greedy path from the occurrences `occ` (ascending) of the matched suffix of length L: at step
// k, `next(o, k, &token)` gives the token that follows occurrence o k + 1 places on (false: past
// its end). The most frequent next token wins, ties to the least occurrence (a sorted run's first
// element); the path stops at `limit` tokens, at depth, or when the probability falls below
// `min_prob`. `buf` is scratch, reused across calls.
template <class Next>
SuffixDraft suffix_greedy_path(std::vector<int64_t> occ, int L, int depth, int64_t limit,
                               float min_prob, std::vector<std::pair<int64_t, int64_t>>& buf,
                               const Next& next) {
  SuffixDraft d;
  float prob = 1.0f;
  for (int64_t k = 0; k < limit && L + k < depth; ++k) {
    buf.clear();
    for (int64_t o : occ) {
      int64_t token;
      if (next(o, k, &token)) buf.emplace_back(token, o);
    }
    if (buf.empty()) break;
    std::sort(buf.begin(), buf.end());
    int64_t best_count = 0, best_occ = 0, best_tok = 0;
    for (size_t a = 0; a < buf.size();) {
      size_t e = a;
      while (e < buf.size() && buf[e].first == buf[a].first) ++e;
      const int64_t count = static_cast<int64_t>(e - a);
      if (count > best_count || (count == best_count && buf[a].second < best_occ)) {
        best_count = count;
        best_occ = buf[a].second;
        best_tok = buf[a].first;
      }
      a = e;
    }
    const float p_next = fmul_rn(prob, suffix_ratio(best_count, static_cast<int64_t>(occ.size())));
    if (!(p_next >= min_prob)) break;
    prob = p_next;
    d.tokens.push_back(best_tok);
    d.probs.push_back(prob);
    d.score = fadd_rn(d.score, prob);
    std::vector<int64_t> kept;
    kept.reserve(best_count);
    for (const auto& e : buf) {
      if (e.first == best_tok) kept.push_back(e.second);
    }
    occ = std::move(kept);  // still ascending: buf was sorted by (token, occurrence)
  }
  return d;
}

// The draft of match length L, `d`, replaces `best` if it scores at least as well (the lengths are
// tried in increasing order: a later, longer, match wins ties).
inline void suffix_keep_best(SuffixDraft& best, SuffixDraft d, int L) {
  if (d.score >= best.score) {
    best = std::move(d);
    best.match_len = L;
  }
}

// Writes `d` as slot b's row of suffix_tokens, suffix_probs (-1 / 0 past its length) and
// suffix_meta.
inline void suffix_store_draft(const SuffixMatchParams& p, int64_t b, const SuffixDraft& d) {
  const int64_t K = p.draft_stride - 1;
  const int64_t m = static_cast<int64_t>(d.tokens.size());
  for (int64_t k = 0; k < K; ++k) {
    p.suffix_tokens[b * K + k] = k < m ? d.tokens[k] : -1;
    p.suffix_probs[b * K + k] = k < m ? d.probs[k] : 0.0f;
  }
  p.suffix_meta[2 * b] = static_cast<int32_t>(m);
  p.suffix_meta[2 * b + 1] = d.match_len;
}

}  // namespace fdspec
