// suffix_match: CPU implementation, the definition of docs/contract/suffix.md written with sets of
// positions. An occurrence of the matched suffix s = C[-L:] is named by its last position i; the
// occurrences of s.d (d the draft so far, k tokens) are the i with H[i+1 .. i+k] == d.
#include <algorithm>
#include <utility>
#include <vector>

#include "suffix_match/suffix_greedy_cpu.h"
#include "suffix_match/suffix_match.h"

namespace fdspec {
namespace {

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

SuffixDraft suffix_draft(const SuffixMatchParams& p, const SuffixSlot& v) {
  SuffixDraft best;
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
    // Occurrence i (a position of H) is followed k + 1 places on by H[i + k + 1].
    SuffixDraft d = suffix_greedy_path(occ, L, p.max_tree_depth, limit, p.min_token_prob, buf,
                                       [&](int64_t i, int64_t k, int64_t* token) {
                                         if (i + k + 1 > v.n - 1) return false;
                                         *token = v.row[i + k + 1];
                                         return true;
                                       });
    suffix_keep_best(best, std::move(d), L);
  }
  return best;
}

}  // namespace

void suffix_search_cpu(const SuffixMatchParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) {
    if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) continue;
    suffix_store_draft(p, b, suffix_draft(p, suffix_slot(p, b)));
  }
}

void suffix_walk_cpu(const SuffixMatchParams& p) {
  const int64_t K = p.draft_stride - 1;
  const int32_t* enc = p.seq_lens_encoder;
  const int32_t* dec = p.seq_lens_decoder;
  int32_t* slt = p.seq_lens_this_time;
  // The batch budget walk of docs/contract/ngram.md, a prefill slot's length counted as max(slt,
  // 0).
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
