// suffix_cache: CUDA implementation (docs/contract/suffix.md, "The global cache"). No Paddle include.
//
// Insert: one block hands out request numbers in slot order (a block scan), then one block per slot
// copies its new tokens and their keys into its row.
//
// Query, per step, for all slots at once:
// 1. suffix_match's local search (suffix_search_gpu).
// 2. prep: per querying slot, the key of its context's last G tokens; histograms cleared.
// 3. scan: one warp per cached row, one lane per position; each position's key is looked up in a
//    shared-memory table of the querying slots' keys (built by every block), and each hit is verified
//    against the stored tokens, which also gives its match length l against the slot's context. Hits
//    with l >= G are counted per (slot, l) and stored as candidates (up to M per slot). The cost is
//    one 4-byte key read per cached token, independent of the batch, plus the verified hits.
// 4. prep2: a slot with more than M hits takes the shortest match length L whose suffix occurs at
//    most M times (from its histogram), and the scan runs again for those slots only, storing the
//    hits with l >= L (at most M). No slot overflowed: the second scan exits at once.
// 5. search, one block per querying slot: suffix_match's greedy paths over the candidates. Small
//    sets (<= 32 occurrences: the long matches) take the warp path with every continuation token
//    preloaded into shared memory (one load round for all match lengths); larger sets take the block
//    path (a shared hash table of next tokens), longest first, skipping a match length whose longest
//    possible draft cannot beat the best score so far (each probability is at most 1, so a draft of
//    n tokens scores at most n: an exact bound). The winner against the local draft is written.
// 6. suffix_match's budget walk.
//
// Determinism: every result is a count or a minimum (atomicAdd / atomicMin); candidate order in the
// buffer never matters, so every rank with the same tokens computes the same drafts.
#include "suffix_cache/suffix_cache.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kScanThreads = 1024;
constexpr int kWarpSet = 32;
constexpr int kTable = 1024;  // next-token table of the block path: holds <= M distinct tokens
constexpr unsigned kFull = 0xffffffffu;
static_assert(kTable >= kMaxSuffixCacheOccurrences, "the table must hold every distinct next token");

__device__ __forceinline__ int32_t* stat_row(const SuffixCacheQueryParams& q, int64_t b) {
  return q.stat + b * kSuffixStatCols;
}
__device__ __forceinline__ int32_t* overflow_flag(const SuffixCacheQueryParams& q) {
  return q.stat + q.m.batch * kSuffixStatCols;
}

// ---- insert -------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kScanThreads) insert_states_kernel(SuffixCacheInsertParams p) {
  using Scan = cub::BlockScan<int64_t, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int64_t base;
  if (threadIdx.x == 0) base = *p.counter;
  __syncthreads();
  const int64_t R = p.cache.num_rows;
  for (int64_t start = 0; start < p.batch; start += kScanThreads) {
    const int64_t b = start + threadIdx.x;
    int64_t need = 0;
    if (b < p.batch) {
      if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) {
        p.slots[b] = kSuffixSlotFree;
      } else if (p.slots[b] == kSuffixSlotFree) {
        need = 1;
      }
    }
    int64_t offset = 0, total = 0;
    Scan(tmp).ExclusiveSum(need, offset, total);
    if (need) {
      const int64_t q = base + offset;
      p.slots[b] = q;
      // Of the requests begun in this chunk, only the last one of each row takes it (the CPU's
      // sequential overwrites).
      if (q + R > base + total - 1) {
        p.cache.rows[2 * (q % R)] = q;
        p.cache.rows[2 * (q % R) + 1] = 0;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) base += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) *p.counter = base;
}

__global__ void __launch_bounds__(128) insert_append_kernel(SuffixCacheInsertParams p) {
  const int64_t b = blockIdx.x;
  if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) return;
  const int64_t q = p.slots[b];
  if (q < 0) return;
  const SuffixCache& c = p.cache;
  const int64_t r = q % c.num_rows;
  if (c.rows[2 * r] != q) {  // evicted while active
    __syncthreads();
    if (threadIdx.x == 0) p.slots[b] = kSuffixSlotDetached;
    return;
  }
  const int64_t W = p.token_ids_stride;
  const int64_t P = clamp_to<int64_t>(p.prompt_lens[b], 0, W);
  const int64_t s = clamp_to<int64_t>(p.step_idx[b], 0, W - P);
  const int64_t* resp = p.token_ids_all + b * W + P;
  const int64_t have = c.rows[2 * r + 1];
  const int64_t upto = min_of<int64_t>(s, c.width);
  for (int64_t off = have + threadIdx.x; off < upto; off += blockDim.x) {
    c.tokens[r * c.width + off] = resp[off];
    c.keys[r * c.width + off] =
        off >= c.key_len - 1 ? suffix_cache_key(resp + off - c.key_len + 1, c.key_len) : 0;
  }
  __syncthreads();  // every thread has read `have`
  if (threadIdx.x == 0 && upto > have) c.rows[2 * r + 1] = upto;
}

__global__ void finish_kernel(const int32_t* finished, int64_t* slots, int64_t batch) {
  const int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (b < batch && finished[b] != 0) slots[b] = kSuffixSlotDetached;
}

__global__ void evict_kernel(SuffixCache cache, const int64_t* counter, int64_t keep) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= cache.num_rows) return;
  const int64_t q = cache.rows[2 * r];
  if (q >= 0 && q < *counter - keep) {
    cache.rows[2 * r] = -1;
    cache.rows[2 * r + 1] = 0;
  }
}

// ---- query: prep and scans ----------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads) query_prep_kernel(SuffixCacheQueryParams q) {
  const int64_t b = blockIdx.x;
  const SuffixMatchParams& p = q.m;
  int32_t* st = stat_row(q, b);
  if (b == 0 && threadIdx.x == 0) *overflow_flag(q) = 0;
  if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) {
    if (threadIdx.x == 0) st[kSuffixStatCtx] = 0;
    return;
  }
  const SuffixSlot v = suffix_slot(p, b);
  const int G = q.cache.key_len;
  const int c = static_cast<int>(min_of<int64_t>(p.max_tree_depth, v.n));
  for (int j = threadIdx.x; j < 256; j += kThreads) st[kSuffixStatHist + j] = 0;
  if (threadIdx.x == 0) {
    q.source[b] = 0;
    const bool query = c >= G + 1 && v.cap > 0;
    st[kSuffixStatCtx] = query ? c : 0;
    st[kSuffixStatKey] = query ? suffix_cache_key(v.row + v.n - G, G) : 0;
    st[kSuffixStatN] = static_cast<int32_t>(v.n);
    st[kSuffixStatHits] = 0;
    st[kSuffixStatStored] = 0;
    st[kSuffixStatLmin] = G;
  }
}

__device__ __forceinline__ uint32_t table_hash(int32_t key, uint32_t mask) {
  return static_cast<uint32_t>(suffix_mix64(static_cast<uint32_t>(key))) & mask;
}

// Pass 1 aggregates the counts of short matches (the frequent ones: a common last token hits many
// positions) per block in shared memory when the batch is at most kAggSlots, and flushes them once.
constexpr int kAggSlots = 256;
constexpr int kAggLen = 8;

// One pass over the occupied positions. pass 1: every slot, hits with l >= G; pass 2: only the slots
// that overflowed in pass 1, hits with l >= their L_min.
__global__ void __launch_bounds__(kThreads) query_scan_kernel(SuffixCacheQueryParams q, int pass,
                                                              uint32_t table_size) {
  extern __shared__ int32_t table[];  // [table_size] keys, [table_size] slots (-1: free), then
                                      // pass 1's aggregates: [kAggSlots][kAggLen] hist, [kAggSlots] hits
  int32_t* tkey = table;
  int32_t* tslot = table + table_size;
  int32_t* agg_hist = tslot + table_size;
  int32_t* agg_hits = agg_hist + kAggSlots * kAggLen;
  if (pass == 2 && *overflow_flag(q) == 0) return;
  const bool agg = pass == 1 && q.m.batch <= kAggSlots;
  if (agg) {
    for (int j = threadIdx.x; j < kAggSlots * kAggLen; j += kThreads) agg_hist[j] = 0;
    for (int j = threadIdx.x; j < kAggSlots; j += kThreads) agg_hits[j] = 0;
  }
  const SuffixMatchParams& p = q.m;
  const SuffixCache& c = q.cache;
  const int G = c.key_len;
  const int M = q.max_occurrences;
  const uint32_t mask = table_size - 1;
  for (uint32_t j = threadIdx.x; j < table_size; j += kThreads) tslot[j] = -1;
  __syncthreads();
  for (int64_t b = threadIdx.x; b < p.batch; b += kThreads) {
    const int32_t* st = stat_row(q, b);
    if (st[kSuffixStatCtx] == 0) continue;
    if (pass == 2 && st[kSuffixStatHits] <= M) continue;
    const int32_t key = st[kSuffixStatKey];
    uint32_t h = table_hash(key, mask);
    while (atomicCAS(&tslot[h], -1, static_cast<int32_t>(b)) != -1) h = (h + 1) & mask;
    tkey[h] = key;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t r = blockIdx.x * kWarps + threadIdx.x / 32; r < c.num_rows; r += warps) {
    const int64_t req = c.rows[2 * r];
    const int64_t len = c.rows[2 * r + 1];
    if (req < 0) continue;
    const int64_t* toks = c.tokens + r * c.width;
    const int32_t* keys = c.keys + r * c.width;
    for (int64_t off = G - 1 + lane; off < len; off += 32) {
      const int32_t key = keys[off];
      for (uint32_t h = table_hash(key, mask); tslot[h] != -1; h = (h + 1) & mask) {
        if (tkey[h] != key) continue;
        const int64_t b = tslot[h];
        int32_t* st = stat_row(q, b);
        const int ctx_len = st[kSuffixStatCtx];
        const int64_t* ctx = p.token_ids_all + b * p.token_ids_stride + st[kSuffixStatN] - ctx_len;
        int l = 0;
        while (l < ctx_len - 1 && off - l >= 0 && toks[off - l] == ctx[ctx_len - 1 - l]) ++l;
        if (pass == 1) {
          if (l < G) continue;
          if (agg && l < kAggLen) {
            atomicAdd(&agg_hist[b * kAggLen + l], 1);
          } else {
            atomicAdd(&st[kSuffixStatHist + l], 1);
          }
          // While the slot has fewer than M hits a hit takes a global index; after that the slot has
          // overflowed whatever else happens (the count only grows), and only the count matters.
          if (*reinterpret_cast<volatile int32_t*>(&st[kSuffixStatHits]) < M) {
            const int at = atomicAdd(&st[kSuffixStatHits], 1);
            if (at < M) q.cand[b * M + at] = suffix_cand_pack(req, off, l);
          } else if (agg) {
            atomicAdd(&agg_hits[b], 1);
          } else {
            atomicAdd(&st[kSuffixStatHits], 1);
          }
        } else {
          if (l < st[kSuffixStatLmin]) continue;
          const int at = atomicAdd(&st[kSuffixStatStored], 1);
          if (at < M) q.cand[b * M + at] = suffix_cand_pack(req, off, l);  // at < M always
        }
      }
    }
  }
  if (!agg) return;
  __syncthreads();
  for (int64_t j = threadIdx.x; j < q.m.batch * kAggLen; j += kThreads) {
    if (agg_hist[j] != 0) atomicAdd(&stat_row(q, j / kAggLen)[kSuffixStatHist + j % kAggLen], agg_hist[j]);
  }
  for (int64_t b = threadIdx.x; b < q.m.batch; b += kThreads) {
    if (agg_hits[b] != 0) atomicAdd(&stat_row(q, b)[kSuffixStatHits], agg_hits[b]);
  }
}

// A slot with more than M hits: the shortest match length with at most M occurrences.
__global__ void query_prep2_kernel(SuffixCacheQueryParams q) {
  const int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (b >= q.m.batch) return;
  int32_t* st = stat_row(q, b);
  const int c = st[kSuffixStatCtx];
  if (c == 0 || st[kSuffixStatHits] <= q.max_occurrences) return;
  const int G = q.cache.key_len;
  int64_t at_least = 0;
  int lmin = c;  // none
  for (int L = c - 1; L >= G; --L) {
    at_least += st[kSuffixStatHist + L];
    if (at_least > q.max_occurrences) break;
    lmin = L;
  }
  st[kSuffixStatLmin] = lmin;
  st[kSuffixStatStored] = 0;
  *overflow_flag(q) = 1;
}

// ---- query: the search --------------------------------------------------------------------------

struct DraftBuf {
  int64_t tokens[kMaxSuffixSpecTokens];
  float probs[kMaxSuffixSpecTokens];
};

struct Best {
  float score;
  int L;
  int m;
};

struct SearchShared {
  int64_t cand[kMaxSuffixCacheOccurrences];
  union {
    int64_t cont[kWarpSet][kMaxSuffixSpecTokens];  // warp path: continuation tokens
    struct {
      uint32_t idx[kTable];  // candidate index + 1 of an entry's token (0: free)
      uint32_t cnt[kTable];
      unsigned long long least[kTable];  // least candidate (= earliest occurrence) with the token
    } tab;                               // block path
  } u;
  uint8_t alive[kMaxSuffixCacheOccurrences];
  int32_t small_idx[kWarpSet];
  int64_t sorted[kWarpSet];
  int32_t avail[kWarpSet];
  DraftBuf warp_cur[kWarps];
  DraftBuf warp_best[kWarps];
  Best warp_best_info[kWarps];
  DraftBuf block_cur;
  DraftBuf block_best;
  Best best_info;
  int small_n;
  int short_end;
  int last_l;
  int n_total;
  uint32_t members;
};

__device__ __forceinline__ int64_t cont_token(const SuffixCache& c, int64_t cand, int64_t k,
                                              bool* has) {
  const int64_t r = suffix_cand_req(cand) % c.num_rows;
  const int64_t pos = suffix_cand_off(cand) + k + 1;
  *has = pos < c.rows[2 * r + 1];
  return *has ? c.tokens[r * c.width + pos] : 0;
}

// Match length L over the <= 32 sorted occurrences with preloaded continuations; lane 0 writes.
__device__ float warp_walk(const SuffixMatchParams& p, const SearchShared& sh, int L, int64_t limit,
                           DraftBuf& out, int* m_out) {
  const int lane = threadIdx.x & 31;
  const bool valid = lane < sh.small_n && suffix_cand_len(sh.sorted[lane]) >= L;
  unsigned alive = __ballot_sync(kFull, valid);
  float prob = 1.0f, score = 0.0f;
  int m = 0;
  while (m < limit && L + m < p.max_tree_depth) {
    const int members = __popc(alive);
    const bool has = ((alive >> lane) & 1u) && m < sh.avail[lane];
    const int64_t tok = has ? sh.u.cont[lane][m] : 0;
    const unsigned with_next = __ballot_sync(kFull, has);
    if (with_next == 0) break;
    const unsigned group = __match_any_sync(kFull, static_cast<unsigned long long>(tok)) & with_next;
    const unsigned key = has ? (static_cast<unsigned>(__popc(group)) << 6) |
                                   static_cast<unsigned>(63 - (__ffs(group) - 1))
                             : 0u;
    const unsigned best = __reduce_max_sync(kFull, key);
    const int count = static_cast<int>(best >> 6);
    const int winner = 63 - static_cast<int>(best & 63u);
    const float next = suffix_fmul(prob, suffix_ratio(count, members));
    if (!(next >= p.min_token_prob)) break;
    prob = next;
    const int64_t t = __shfl_sync(kFull, tok, winner);
    alive = __shfl_sync(kFull, group, winner);
    if (lane == 0) {
      out.tokens[m] = t;
      out.probs[m] = prob;
    }
    score = suffix_fadd(score, prob);
    ++m;
  }
  __syncwarp();
  *m_out = m;
  return score;
}

// Match length L over the stored candidates with the block's next-token table.
__device__ float block_walk(const SuffixCacheQueryParams& q, SearchShared& sh, int L,
                            int64_t limit, int* m_out) {
  using ReduceU = cub::BlockReduce<unsigned, kThreads>;
  using ReduceL = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ union {
    typename ReduceU::TempStorage u;
    typename ReduceL::TempStorage l;
  } tmp;
  __shared__ unsigned best_count;
  __shared__ unsigned long long best_cand;
  const SuffixCache& c = q.cache;
  const int n = sh.n_total;
  for (int j = threadIdx.x; j < n; j += kThreads) sh.alive[j] = suffix_cand_len(sh.cand[j]) >= L;
  float prob = 1.0f, score = 0.0f;
  int m = 0;
  while (m < limit && L + m < q.m.max_tree_depth) {
    for (int j = threadIdx.x; j < kTable; j += kThreads) {
      sh.u.tab.idx[j] = 0;
      sh.u.tab.cnt[j] = 0;
      sh.u.tab.least[j] = ~0ull;
    }
    if (threadIdx.x == 0) sh.members = 0;
    __syncthreads();
    unsigned members = 0;
    for (int j = threadIdx.x; j < n; j += kThreads) {
      if (!sh.alive[j]) continue;
      ++members;
      bool has = false;
      const int64_t tok = cont_token(c, sh.cand[j], m, &has);
      if (!has) continue;
      uint32_t h = static_cast<uint32_t>(suffix_mix64(static_cast<uint64_t>(tok))) & (kTable - 1);
      while (true) {
        uint32_t o = atomicCAS(&sh.u.tab.idx[h], 0u, static_cast<uint32_t>(j) + 1);
        bool same = o == 0;
        if (!same) {
          bool h2 = false;
          same = cont_token(c, sh.cand[o - 1], m, &h2) == tok;
        }
        if (same) {
          atomicAdd(&sh.u.tab.cnt[h], 1u);
          atomicMin(&sh.u.tab.least[h], static_cast<unsigned long long>(sh.cand[j]));
          break;
        }
        h = (h + 1) & (kTable - 1);
      }
    }
    if (members) atomicAdd(&sh.members, members);
    __syncthreads();
    unsigned cnt = 0;
    for (int j = threadIdx.x; j < kTable; j += kThreads) cnt = max(cnt, sh.u.tab.cnt[j]);
    cnt = ReduceU(tmp.u).Reduce(cnt, [](unsigned a, unsigned b) { return a > b ? a : b; });
    if (threadIdx.x == 0) best_count = cnt;
    __syncthreads();
    unsigned long long least = ~0ull;
    for (int j = threadIdx.x; j < kTable; j += kThreads) {
      if (sh.u.tab.cnt[j] == best_count && best_count > 0) least = min(least, sh.u.tab.least[j]);
    }
    least = ReduceL(tmp.l).Reduce(least, [](unsigned long long a, unsigned long long b) {
      return a < b ? a : b;
    });
    if (threadIdx.x == 0) best_cand = least;
    __syncthreads();
    if (best_count == 0) break;
    const float next = suffix_fmul(prob, suffix_ratio(best_count, sh.members));
    if (!(next >= q.m.min_token_prob)) break;
    prob = next;
    bool has = false;
    const int64_t t = cont_token(c, static_cast<int64_t>(best_cand), m, &has);
    if (threadIdx.x == 0) {
      sh.block_cur.tokens[m] = t;
      sh.block_cur.probs[m] = prob;
    }
    for (int j = threadIdx.x; j < n; j += kThreads) {
      if (!sh.alive[j]) continue;
      bool h2 = false;
      const int64_t tok = cont_token(c, sh.cand[j], m, &h2);
      sh.alive[j] = h2 && tok == t;
    }
    score = suffix_fadd(score, prob);
    ++m;
    __syncthreads();
  }
  *m_out = m;
  return score;
}

__global__ void __launch_bounds__(kThreads) query_search_kernel(SuffixCacheQueryParams q) {
  __shared__ SearchShared sh;
  const int64_t b = blockIdx.x;
  const SuffixMatchParams& p = q.m;
  const int32_t* st = stat_row(q, b);
  const int c = st[kSuffixStatCtx];
  if (c == 0) return;
  const SuffixSlot v = suffix_slot(p, b);
  const int G = q.cache.key_len;
  const int M = q.max_occurrences;
  const int hits = st[kSuffixStatHits];
  const int lmin = hits > M ? st[kSuffixStatLmin] : G;
  const int n = hits > M ? min_of<int>(st[kSuffixStatStored], M) : hits;
  for (int j = threadIdx.x; j < n; j += kThreads) sh.cand[j] = q.cand[b * M + j];
  if (threadIdx.x == 0) {
    sh.n_total = n;
    sh.small_n = 0;
    int64_t at_least = 0;
    int short_end = c, last_l = 0;
    for (int L = c - 1; L >= lmin; --L) {
      at_least += st[kSuffixStatHist + L];
      if (at_least >= 1 && last_l == 0) last_l = L;
      if (at_least <= kWarpSet) short_end = L;
    }
    sh.short_end = short_end;
    sh.last_l = last_l;
    sh.best_info = Best{0.0f, 0, 0};
  }
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (lane == 0) sh.warp_best_info[warp] = Best{0.0f, 0, 0};
  __syncthreads();
  const int short_end = sh.short_end;
  const int last_l = sh.last_l;
  if (last_l == 0) return;  // no suffix of length >= L_min occurs: the local draft stands

  // Warp path: the <= 32 occurrences of C[-short_end:], sorted, their continuations preloaded.
  if (short_end <= last_l) {
    for (int j = threadIdx.x; j < n; j += kThreads) {
      if (suffix_cand_len(sh.cand[j]) >= short_end) sh.small_idx[atomicAdd(&sh.small_n, 1)] = j;
    }
    __syncthreads();
    const int small_n = sh.small_n;
    if (threadIdx.x < small_n) {
      const int64_t mine = sh.cand[sh.small_idx[threadIdx.x]];
      int rank = 0;
      for (int j = 0; j < small_n; ++j) rank += sh.cand[sh.small_idx[j]] < mine;
      sh.sorted[rank] = mine;
    }
    __syncthreads();
    const int window = static_cast<int>(min_of<int64_t>(v.cap, p.max_tree_depth - short_end));
    for (int e = threadIdx.x; e < small_n * kMaxSuffixSpecTokens; e += kThreads) {
      const int j = e / kMaxSuffixSpecTokens, k = e % kMaxSuffixSpecTokens;
      if (k >= window) continue;
      bool has = false;
      sh.u.cont[j][k] = cont_token(q.cache, sh.sorted[j], k, &has);
    }
    if (threadIdx.x < small_n) {
      const int64_t e = sh.sorted[threadIdx.x];
      const int64_t r = suffix_cand_req(e) % q.cache.num_rows;
      const int64_t left = q.cache.rows[2 * r + 1] - suffix_cand_off(e) - 1;
      sh.avail[threadIdx.x] = static_cast<int32_t>(clamp_to<int64_t>(left, 0, window));
    }
    __syncthreads();
    for (int L = short_end + warp; L <= last_l; L += kWarps) {
      const int64_t limit = suffix_spec_limit(L, p.max_spec_factor, p.max_spec_offset, v.cap);
      int m = 0;
      const float score = warp_walk(p, sh, L, limit, sh.warp_cur[warp], &m);
      if (score >= sh.warp_best_info[warp].score) {
        for (int j = lane; j < m; j += 32) {
          sh.warp_best[warp].tokens[j] = sh.warp_cur[warp].tokens[j];
          sh.warp_best[warp].probs[j] = sh.warp_cur[warp].probs[j];
        }
        __syncwarp();
        if (lane == 0) sh.warp_best_info[warp] = Best{score, L, m};
      }
      __syncwarp();
    }
    __syncthreads();
  }

  // The warp path's best: the highest score, the longest L on ties.
  if (threadIdx.x == 0) {
    Best best{0.0f, 0, 0};
    int from = -1;
    for (int w = 0; w < kWarps; ++w) {
      const Best& o = sh.warp_best_info[w];
      if (o.m > 0 && (o.score > best.score || (o.score == best.score && o.L > best.L))) {
        best = o;
        from = w;
      }
    }
    sh.best_info = best;
    if (from >= 0) {
      for (int j = 0; j < best.m; ++j) {
        sh.block_best.tokens[j] = sh.warp_best[from].tokens[j];
        sh.block_best.probs[j] = sh.warp_best[from].probs[j];
      }
    }
  }
  __syncthreads();

  // Block path: shorter match lengths, longest first; a shorter L must score strictly higher, and
  // the global draft matters only if it beats the local one.
  const int64_t K = p.draft_stride - 1;
  float local = 0.0f;
  const int64_t m_local = clamp_to<int64_t>(p.suffix_meta[2 * b], 0, K);
  for (int64_t k = 0; k < m_local; ++k) local = suffix_fadd(local, p.suffix_probs[b * K + k]);
  for (int L = min_of<int>(short_end, last_l + 1) - 1; L >= lmin; --L) {
    const int64_t limit = suffix_spec_limit(L, p.max_spec_factor, p.max_spec_offset, v.cap);
    const int64_t longest = min_of<int64_t>(limit, p.max_tree_depth - L);
    const float bar = sh.best_info.score > local ? sh.best_info.score : local;
    if (static_cast<float>(longest) <= bar) continue;  // cannot win: exact bound
    int m = 0;
    const float score = block_walk(q, sh, L, limit, &m);
    if (score > sh.best_info.score) {
      for (int j = threadIdx.x; j < m; j += kThreads) {
        sh.block_best.tokens[j] = sh.block_cur.tokens[j];
        sh.block_best.probs[j] = sh.block_cur.probs[j];
      }
      __syncthreads();
      if (threadIdx.x == 0) sh.best_info = Best{score, L, m};
    }
    __syncthreads();
  }

  // Local against global: the local draft stays unless the global one scores strictly higher.
  const Best best = sh.best_info;
  if (!(best.score > local)) return;
  __syncthreads();  // every thread has read the local draft
  for (int64_t j = threadIdx.x; j < K; j += kThreads) {
    p.suffix_tokens[b * K + j] = j < best.m ? sh.block_best.tokens[j] : -1;
    p.suffix_probs[b * K + j] = j < best.m ? sh.block_best.probs[j] : 0.0f;
  }
  if (threadIdx.x == 0) {
    p.suffix_meta[2 * b] = best.m;
    p.suffix_meta[2 * b + 1] = best.L;
    q.source[b] = 1;
  }
}

}  // namespace

cudaError_t suffix_cache_insert_gpu(const SuffixCacheInsertParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  insert_states_kernel<<<1, kScanThreads, 0, stream>>>(p);
  insert_append_kernel<<<static_cast<unsigned>(p.batch), 128, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t suffix_cache_finish_gpu(const int32_t* finished, int64_t* slots, int64_t batch,
                                    cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  finish_kernel<<<static_cast<unsigned>((batch + 255) / 256), 256, 0, stream>>>(finished, slots, batch);
  return FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t suffix_cache_evict_gpu(const SuffixCache& cache, const int64_t* counter, int64_t keep,
                                   cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((cache.num_rows + 255) / 256);
  evict_kernel<<<grid, 256, 0, stream>>>(cache, counter, keep);
  return FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t suffix_cache_query_gpu(const SuffixCacheQueryParams& q, cudaStream_t stream) {
  const int64_t B = q.m.batch;
  if (B <= 0) return cudaSuccess;
  cudaError_t err = suffix_search_gpu(q.m, stream);
  if (err != cudaSuccess) return err;
  query_prep_kernel<<<static_cast<unsigned>(B), kThreads, 0, stream>>>(q);
  // The slots' key table: a power of two at least twice the batch.
  uint32_t table_size = 64;
  while (table_size < 2 * static_cast<uint64_t>(B)) table_size *= 2;
  const size_t smem = (2 * table_size + kAggSlots * (kAggLen + 1)) * sizeof(int32_t);
  const int64_t row_blocks = (q.cache.num_rows + kWarps - 1) / kWarps;
  const unsigned grid = static_cast<unsigned>(min_of<int64_t>(row_blocks, 2048));
  query_scan_kernel<<<grid, kThreads, smem, stream>>>(q, 1, table_size);
  query_prep2_kernel<<<static_cast<unsigned>((B + 255) / 256), 256, 0, stream>>>(q);
  query_scan_kernel<<<grid, kThreads, smem, stream>>>(q, 2, table_size);
  query_search_kernel<<<static_cast<unsigned>(B), kThreads, 0, stream>>>(q);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  err = suffix_walk_gpu(q.m, stream);
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
