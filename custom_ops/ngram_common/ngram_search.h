// The n-gram search shared by ngram_match and hybrid_mtp_ngram (host side).
//
// A slot's search looks for the pattern (the last n tokens of what the slot generated) in two
// haystacks, the prompt first, then the generated tokens, for n from the largest size down, and
// takes the leftmost match that has a continuation. This file holds that search written exactly as
// docs/contract/ngram.md#ngram_match states it; the CUDA kernel (ngram_search.cuh) computes the
// same answer in one parallel pass.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"

namespace fdspec {

// The GPU search passes its result through an int32 with the haystack in bit 30, so haystacks must
// be shorter than 2^30 tokens; it holds the pattern in shared memory, hence the n-gram size limit.
// The bindings check both, for the CPU path too, so that both paths accept the same calls.
constexpr int64_t kMaxHaystackLen = int64_t{1} << 30;
constexpr int kMaxNgramSize = 64;

// Where a slot searches. Pattern token k of an n-gram (k = 0 is the oldest) is
// pattern_last[k - n + 1]: the pattern always ends at pattern_last.
struct NgramHaystacks {
  const int64_t* seg0;  // the prompt
  int64_t len0;
  const int64_t* seg1;  // generated tokens (ngram_match) or the draft model's pre_ids (hybrid)
  int64_t len1;
  const int64_t* pattern_last;  // newest generated token
  int64_t pattern_avail;        // tokens available for the pattern (s): sizes n > s are skipped
};

// The continuation of the first productive match: `count` tokens starting at `src` (count 0: none).
struct NgramMatch {
  const int64_t* src = nullptr;
  int64_t count = 0;
};

inline bool ngram_equal(const int64_t* a, const int64_t* b, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    if (a[k] != b[k]) return false;
  }
  return true;
}

// Leftmost i in [0, len - n] whose window equals the pattern and whose continuation
// [i + n, min(i + n + budget, len)) is non-empty.
inline NgramMatch ngram_scan(const int64_t* hay, int64_t len, const int64_t* pattern, int64_t n,
                             int64_t budget) {
  NgramMatch m;
  for (int64_t i = 0; i + n <= len; ++i) {
    if (!ngram_equal(hay + i, pattern, n)) continue;
    const int64_t start = i + n;
    const int64_t end = min_of(start + budget, len);
    if (start < end) {
      m.src = hay + start;
      m.count = end - start;
      return m;
    }
  }
  return m;
}

// The search of docs/contract/ngram.md for n = max_n down to min_n. O((len0 + len1) * n) per size.
inline NgramMatch ngram_search_host(const NgramHaystacks& h, int64_t max_n, int64_t min_n,
                                    int64_t budget) {
  for (int64_t n = max_n; n >= min_n && n >= 1; --n) {
    if (h.pattern_avail < n) continue;
    const int64_t* pattern = h.pattern_last - n + 1;
    NgramMatch m = ngram_scan(h.seg0, h.len0, pattern, n, budget);
    if (m.count == 0) m = ngram_scan(h.seg1, h.len1, pattern, n, budget);
    if (m.count > 0) return m;
  }
  return NgramMatch{};
}

}  // namespace fdspec
