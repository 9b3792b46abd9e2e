// suffix_match: CPU implementation, the definition of docs/contract/suffix.md written with sets of
// positions. An occurrence of the matched suffix s = C[-L:] is named by its last position i; the
// occurrences of s.d (d the draft so far, k tokens) are the i with H[i+1 .. i+k] == d.
#include <algorithm>
#include <utility>
#include <vector>

#include "suffix_match/suffix_match.h"

namespace fdspec {
namespace {

struct Draft {
  std::vector<int64_t> tokens;
  std::vector<float> probs;
  float score = 0.0f;
  int match_len = 0;
};

// l(i) for every position: the longest common suffix of H[0 .. i] and H, capped at `cap`.
std::vector<int32_t> match_lengths(const int64_t* h, int64_t n, int cap) {
  std::vector<int32_t> ell(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    int l = 0;
    while (l < cap && i - l >= 0 && h[i - l] == h[n - 1 - l]) ++l;
    ell[i] = l;
  }
  return ell;
}

// The greedy path from the occurrences `occ` (last positions, any order) of the matched suffix.
Draft greedy_path(const int64_t* h, int64_t n, std::vector<int64_t> occ, int L, int depth,
                  int64_t limit, float min_prob, std::vector<std::pair<int64_t, int64_t>>& buf) {
  Draft d;
  float prob = 1.0f;
  for (int64_t k = 0; k < limit && L + k < depth; ++k) {
    buf.clear();
    for (int64_t i : occ) {
      if (i + k + 1 <= n - 1) buf.emplace_back(h[i + k + 1], i);
    }
    if (buf.empty()) break;
    std::sort(buf.begin(), buf.end());
    // Highest count, then the earliest first occurrence (a run's first element has the least i).
    int64_t best_count = 0, best_pos = 0, best_tok = 0;
    for (size_t a = 0; a < buf.size();) {
      size_t e = a;
      while (e < buf.size() && buf[e].first == buf[a].first) ++e;
      const int64_t count = static_cast<int64_t>(e - a);
      if (count > best_count || (count == best_count && buf[a].second < best_pos)) {
        best_count = count;
        best_pos = buf[a].second;
        best_tok = buf[a].first;
      }
      a = e;
    }
    const float next = suffix_fmul(prob, suffix_ratio(best_count, static_cast<int64_t>(occ.size())));
    if (!(next >= min_prob)) break;
    prob = next;
    d.tokens.push_back(best_tok);
    d.probs.push_back(prob);
    d.score = suffix_fadd(d.score, prob);
    std::vector<int64_t> kept;
    kept.reserve(best_count);
    for (const auto& e : buf) {
      if (e.first == best_tok) kept.push_back(e.second);
    }
    occ = std::move(kept);
  }
  return d;
}

Draft suffix_draft(const SuffixMatchParams& p, const SuffixSlot& v) {
  Draft best;
  const int64_t c = min_of<int64_t>(p.max_tree_depth, v.n);
  if (c <= 1) return best;
  const std::vector<int32_t> ell = match_lengths(v.row, v.n, static_cast<int>(c - 1));
  std::vector<std::pair<int64_t, int64_t>> buf;
  std::vector<int64_t> occ;
  for (int L = 1; L < c; ++L) {
    occ.clear();
    for (int64_t i = 0; i < v.n; ++i) {
      if (ell[i] >= L) occ.push_back(i);
    }
    const int64_t limit = suffix_spec_limit(L, p.max_spec_factor, p.max_spec_offset, v.cap);
    Draft d = greedy_path(v.row, v.n, occ, L, p.max_tree_depth, limit, p.min_token_prob, buf);
    if (d.score >= best.score) {  // a later (longer) match wins ties
      best = std::move(d);
      best.match_len = L;
    }
  }
  return best;
}

}  // namespace

void suffix_search_cpu(const SuffixMatchParams& p) {
  const int64_t K = p.draft_stride - 1;
  for (int64_t b = 0; b < p.batch; ++b) {
    if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) continue;
    const Draft d = suffix_draft(p, suffix_slot(p, b));
    const int64_t m = static_cast<int64_t>(d.tokens.size());
    for (int64_t k = 0; k < K; ++k) {
      p.suffix_tokens[b * K + k] = k < m ? d.tokens[k] : -1;
      p.suffix_probs[b * K + k] = k < m ? d.probs[k] : 0.0f;
    }
    p.suffix_meta[2 * b] = static_cast<int32_t>(m);
    p.suffix_meta[2 * b + 1] = d.match_len;
  }
}

void suffix_walk_cpu(const SuffixMatchParams& p) {
  const int64_t K = p.draft_stride - 1;
  const int32_t* enc = p.seq_lens_encoder;
  const int32_t* dec = p.seq_lens_decoder;
  int32_t* slt = p.seq_lens_this_time;
  // The batch budget walk of docs/contract/ngram.md, a prefill slot's length counted as max(slt, 0).
  int64_t unprocessed = 0;
  for (int64_t b = 0; b < p.batch; ++b) unprocessed += suffix_is_counted(enc[b], dec[b]);
  int64_t total = 0;  // final lengths of the slots before b
  for (int64_t b = 0; b < p.batch; ++b) {
    if (enc[b] > 0) {  // a fixed length, clamped to >= 0 (written back so, as the shared walk does)
      slt[b] = max_of<int32_t>(slt[b], 0);
      total += slt[b];
      continue;
    }
    if (dec[b] == 0) {
      slt[b] = 0;
      continue;
    }
    --unprocessed;
    const int64_t G = total + 1 + unprocessed;
    const int64_t untruncated = clamp_to<int64_t>(p.suffix_meta[2 * b], 0, K);
    const int64_t kept = G >= p.threshold - 1 ? 0 : min_of<int64_t>(untruncated, p.threshold - G);
    int64_t* drafts = p.draft_tokens + b * p.draft_stride;
    for (int64_t k = 0; k < kept; ++k) drafts[1 + k] = p.suffix_tokens[b * K + k];
    slt[b] = static_cast<int32_t>(1 + kept);
    total += 1 + kept;
    if (p.pad_to_max) {
      for (int64_t k = kept + 1; k <= p.max_draft_tokens; ++k) drafts[k] = drafts[kept];
      slt[b] = p.max_draft_tokens + 1;
    }
  }
}

void suffix_match_cpu(const SuffixMatchParams& p) {
  suffix_search_cpu(p);
  suffix_walk_cpu(p);
}

}  // namespace fdspec
