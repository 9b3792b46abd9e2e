// suffix_cache: CPU implementation (docs/contract/suffix.md, "The global cache"). Sequential; the
// GPU kernels reproduce it exactly. The query scans the keys of the occupied positions, verifies
// each hit against the stored tokens, and runs the greedy paths on sorted candidate lists.
#include <algorithm>
#include <vector>

#include "suffix_cache/suffix_cache.h"
#include "suffix_match/suffix_greedy_cpu.h"

namespace fdspec {
namespace {

// The slot's history as suffix_match reads it (clamped P and s).
struct SlotHistory {
  const int64_t* row;
  int64_t prompt;  // P
  int64_t steps;   // s
};

SlotHistory slot_history(const int64_t* ids, int64_t W, const int64_t* prompt_lens,
                         const int64_t* step_idx, int64_t b) {
  const int64_t P = clamp_to<int64_t>(prompt_lens[b], 0, W);
  const int64_t s = clamp_to<int64_t>(step_idx[b], 0, W - P);
  return SlotHistory{ids + b * W, P, s};
}

// Row r's request number and cached length as the ops read them (suffix_cache.h).
int64_t row_req(const SuffixCache& cache, int64_t r) { return suffix_row_req(cache.rows[2 * r]); }
int64_t row_len(const SuffixCache& cache, int64_t r) {
  return suffix_row_len(row_req(cache, r), cache.rows[2 * r + 1], cache.width);
}

SuffixDraft global_draft(const SuffixCacheQueryParams& q, const int64_t* ctx, int c, int64_t cap) {
  const SuffixCache& cache = q.cache;
  const SuffixMatchParams& p = q.m;
  const int G = cache.key_len;
  SuffixDraft best;
  if (c < G + 1 || cap == 0) return best;
  const int32_t want = suffix_cache_key(ctx + c - G, G);
  std::vector<int64_t> cands;
  std::vector<int64_t> at_least(c + 1, 0);  // n_L after the suffix sum
  for (int64_t r = 0; r < cache.num_rows; ++r) {
    const int64_t q_id = suffix_row_req(cache.rows[2 * r]);
    const int64_t len = suffix_row_len(q_id, cache.rows[2 * r + 1], cache.width);
    if (q_id < 0) continue;
    const int64_t* t = cache.tokens + r * cache.width;
    const int32_t* keys = cache.keys + r * cache.width;
    for (int64_t off = G - 1; off < len; ++off) {
      if (keys[off] != want) continue;
      int l = 0;
      while (l < c - 1 && off - l >= 0 && t[off - l] == ctx[c - 1 - l]) ++l;
      if (l < G) continue;
      cands.push_back(suffix_cand_pack(q_id, off, l));
      ++at_least[l];
    }
  }
  for (int L = c - 1; L >= 1; --L) at_least[L - 1] += at_least[L];
  std::sort(cands.begin(), cands.end());
  std::vector<int64_t> occ;
  std::vector<std::pair<int64_t, int64_t>> buf;
  for (int L = G; L < c; ++L) {
    if (at_least[L] == 0) break;  // longer suffixes of C do not occur either
    if (at_least[L] > q.max_occurrences) continue;
    occ.clear();
    for (int64_t e : cands) {
      if (suffix_cand_len(e) >= L) occ.push_back(e);
    }
    const int64_t limit = suffix_spec_limit(L, p.max_spec_factor, p.max_spec_offset, cap);
    // Candidate c (request, offset) is followed k + 1 places on by that row's token off + k + 1.
    SuffixDraft d = suffix_greedy_path(occ, L, p.max_tree_depth, limit, p.min_token_prob, buf,
                                       [&](int64_t c, int64_t k, int64_t* token) {
                                         const int64_t r = suffix_cand_req(c) % cache.num_rows;
                                         const int64_t off = suffix_cand_off(c);
                                         if (off + k + 1 >= row_len(cache, r)) return false;
                                         *token = cache.tokens[r * cache.width + off + k + 1];
                                         return true;
                                       });
    suffix_keep_best(best, std::move(d), L);
  }
  return best;
}

// Adds `delta` to the counts of the keys of row r's positions [from, to), and to the pair counts of
// the pairs ending there (modulo 2^32, as the GPU's atomics: a count a caller left at a limit
// wraps).
void count_keys(const SuffixCache& cache, int64_t r, int64_t from, int64_t to, int32_t delta) {
  const int64_t* t = cache.tokens + r * cache.width;
  auto add = [delta](int32_t& n) {
    n = static_cast<int32_t>(static_cast<uint32_t>(n) + static_cast<uint32_t>(delta));
  };
  for (int64_t off = from; off < to; ++off) {
    const int64_t at = suffix_count_index(cache.keys[r * cache.width + off], cache);
    if (at >= 0) add(cache.counts[at]);
    const int64_t pair = off >= 1 ? suffix_pair_index(t[off - 1], t[off], cache) : -1;
    if (pair >= 0) add(cache.pairs[pair]);
  }
}

// Sets the line filter's bits of row r's positions [from, to) (their tokens and keys written).
void mark_lines(const SuffixCache& cache, int64_t r, int64_t from, int64_t to) {
  if (cache.line_planes == 0) return;
  for (int64_t off = from; off < to; ++off) {
    suffix_mark_position(cache, r, off, [&](int64_t w, uint32_t bit) { cache.lines[w] |= bit; });
  }
}
// Clears every bit of row r's lines (an eviction).
void clear_lines(const SuffixCache& cache, int64_t r) {
  const int64_t words = suffix_line_words(cache.num_rows, cache.width);
  for (int64_t p = 0; p < cache.line_planes; ++p) {
    suffix_row_line_masks(r, cache.width,
                          [&](int64_t w, uint32_t m) { cache.lines[p * words + w] &= m; });
  }
}

}  // namespace

void suffix_cache_insert_cpu(const SuffixCacheInsertParams& p) {
  const SuffixCache& cache = p.cache;
  const int64_t R = cache.num_rows;
  // 1. State changes and new responses, in slot order: request numbers are handed out in that
  // order.
  const int64_t base = suffix_counter_base(*p.counter);
  int64_t next = base;
  for (int64_t b = 0; b < p.batch; ++b) {
    if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) {
      // A closing slot keeps its request until step 2 has added its last tokens.
      if (!suffix_is_closing(p.seq_lens_encoder[b], p.seq_lens_decoder[b], p.slots[b])) {
        p.slots[b] = kSuffixSlotFree;
      }
      continue;
    }
    // A state >= base (a number not handed out yet: no op writes one) begins a request too, as on
    // the GPU.
    if (p.slots[b] != kSuffixSlotFree && p.slots[b] < base) continue;
    const int64_t q = next++;
    p.slots[b] = q;
    count_keys(cache, q % R, 0, row_len(cache, q % R), -1);  // an empty row's length reads as 0
    clear_lines(cache, q % R);    // as the GPU: an empty row has none set, unless a caller set them
    cache.rows[2 * (q % R)] = q;  // evicts request q - R
    cache.rows[2 * (q % R) + 1] = 0;
  }
  *p.counter = next;
  // 2. Appends: tokens the slot generated since the last call, up to the row's width; a closing
  // slot adds its last ones, then is free.
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t q = p.slots[b];
    const bool closing = suffix_is_closing(p.seq_lens_encoder[b], p.seq_lens_decoder[b], q);
    if (q < 0 || !(closing || suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])))
      continue;
    const int64_t r = q % R;
    // Evicted while active; or a closing slot whose state is a number this call handed out (a state
    // >= the counter as read: no op writes one), now another slot's new request: nothing to close.
    if (row_req(cache, r) != q || (closing && q >= base && q < next)) {
      p.slots[b] = closing ? kSuffixSlotFree : kSuffixSlotDetached;
      continue;
    }
    const SlotHistory h =
        slot_history(p.token_ids_all, p.token_ids_stride, p.prompt_lens, p.step_idx, b);
    const int64_t have = row_len(cache, r);
    const int64_t upto = min_of<int64_t>(h.steps, cache.width);
    const int64_t* resp = h.row + h.prompt;
    for (int64_t off = have; off < upto; ++off) {
      cache.tokens[r * cache.width + off] = resp[off];
      cache.keys[r * cache.width + off] =
          off >= cache.key_len - 1 ? suffix_cache_key(resp + off - cache.key_len + 1, cache.key_len)
                                   : 0;
    }
    count_keys(cache, r, have, upto, 1);
    mark_lines(cache, r, have, upto);
    if (upto > have) cache.rows[2 * r + 1] = upto;
    if (closing) p.slots[b] = kSuffixSlotFree;
  }
}

void suffix_cache_finish_cpu(const int32_t* finished, int64_t* slots, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    if (finished[b] != 0) slots[b] = kSuffixSlotDetached;
  }
}

void suffix_cache_evict_cpu(const SuffixCache& cache, const int64_t* counter, int64_t keep) {
  const int64_t below = suffix_counter_base(*counter) - keep;  // no overflow: keep >= 0
  for (int64_t r = 0; r < cache.num_rows; ++r) {
    const int64_t q = row_req(cache, r);
    if (q >= 0 && q < below) {
      count_keys(cache, r, 0, row_len(cache, r), -1);
      clear_lines(cache, r);
      cache.rows[2 * r] = -1;
      cache.rows[2 * r + 1] = 0;
    }
  }
}

void suffix_cache_query_cpu(const SuffixCacheQueryParams& q) {
  const SuffixMatchParams& p = q.m;
  const int64_t K = p.draft_stride - 1;
  suffix_search_cpu(p);
  for (int64_t b = 0; b < p.batch; ++b) {
    if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) continue;
    q.source[b] = 0;
    const SuffixSlot v = suffix_slot(p, b);
    const int c = static_cast<int>(min_of<int64_t>(p.max_tree_depth, v.n));
    const SuffixDraft g = global_draft(q, v.row + v.n - c, c, v.cap);
    float local = 0.0f;
    const int64_t m_local = clamp_to<int64_t>(p.suffix_meta[2 * b], 0, K);
    for (int64_t k = 0; k < m_local; ++k) local = fadd_rn(local, p.suffix_probs[b * K + k]);
    if (!(g.score > local)) continue;
    suffix_store_draft(p, b, g);
    q.source[b] = 1;
  }
  suffix_walk_cpu(p);
}

void suffix_cache_step_cpu(const SuffixCacheInsertParams& ins, const SuffixCacheQueryParams& q) {
  suffix_cache_insert_cpu(ins);
  suffix_cache_query_cpu(q);
}

}  // namespace fdspec
