// suffix_match: CUDA implementation (docs/contract/suffix.md). No Paddle include.
//
// Kernel 1, one block per decoding slot, computes the slot's draft exactly as the CPU does, without
// a suffix tree and without a vocabulary-sized histogram: one pass over the history computes each
// position's match length against the context and compacts the matches into a candidate list in
// shared memory; everything after touches the candidates only (suffix_draft.cuh, the core shared
// with the global cache). More candidates than kCandCap take a slow path that rescans the history.
// Kernel 2 is the batch budget walk of ngram_common/ngram_walk.cuh; when the threshold cannot bind,
// kernel 1 writes each slot's outcome itself and kernel 2 is not launched.
// Bit-identity with the CPU: integer counts, every float step one correctly rounded operation in
// the CPU's order, ties decided by positions. Design: docs/design/suffix_match.md.
#include "suffix_match/suffix_match.h"

#include <cstdio>

#include <cub/block/block_reduce.cuh>

#include "common/cuda_utils.cuh"
#include "suffix_match/suffix_draft.cuh"
#include "suffix_match/suffix_walk.cuh"

namespace fdspec {
namespace {

using suffix_gpu::Best;
using suffix_gpu::CoreArgs;
using suffix_gpu::DraftBuf;
using suffix_gpu::kFull;
using suffix_gpu::kThreads;

constexpr int kWarpSet = suffix_gpu::kWarpSet;
constexpr int kUnroll =
    8;  // history positions in flight per thread in history_pass (the fallback passes)

template <int kCandCap>
struct SearchShared {
  int64_t ctx[kMaxSuffixTreeDepth];
  int32_t hist[kMaxSuffixTreeDepth];
  suffix_gpu::CoreShared<kCandCap> core;
  uint32_t key2[kCandCap];  // the second list: positions with l >= 2 (< kMaxSuffixHistory)
  uint8_t len2[kCandCap];
  uint16_t
      idx2[kCandCap];  // the second list's entry's index in the first (kNoIndex: past kCandCap)
  int n_cand;          // candidates appended (may exceed kCandCap: then the second list or pass)
  int n_cand2;
  int l0;         // shortest match length held in the candidate list
  int short_end;  // shortest match length with n_L <= 32 (c: none)
  int last_l;     // the longest match length with n_L >= 2 (0: none)
  int overflow;
  unsigned members;
  unsigned long long step_best;
};

// The occurrences of the slot's own history: key = the position i of an occurrence's last token.
struct HistorySource {
  const int64_t* row;
  int64_t n;
  __device__ int64_t token(int, unsigned long long key, int k, bool* has) const {
    const int64_t at = static_cast<int64_t>(key) + k + 1;
    *has = at <= n - 1;
    return *has ? row[at] : 0;
  }
  __device__ int avail(int, unsigned long long key, int window) const {
    return static_cast<int>(clamp_to<int64_t>(n - 1 - static_cast<int64_t>(key), 0, window));
  }
};

// l(i), the match length of H[0 .. i] against the context (capped at c - 1), given H[i] and, when
// `have_prev`, H[i - 1] (a neighbour lane's token): the common l <= 1 needs no load. The rarer
// longer matches compare kMatchChunk positions per round of loads: a serial chain of up to c - 1
// dependent loads was the longest latency of the pass.
constexpr int kMatchChunk = 8;

// The match length of a position known to have l >= 2 (lim = min(c - 1, i + 1) > 1). Out of line,
// like history_pass, its only caller: see there.
__device__ __noinline__ int extend_match(const int64_t* row, const int64_t* ctx, int c, int64_t i) {
  const int lim = static_cast<int>(min_of<int64_t>(c - 1, i + 1));
  int l = 2;
  while (l < lim) {
    int64_t t[kMatchChunk];
#pragma unroll
    for (int u = 0; u < kMatchChunk; ++u) t[u] = l + u < lim ? row[i - l - u] : 0;
#pragma unroll
    for (int u = 0; u < kMatchChunk; ++u) {
      if (l + u >= lim || t[u] != ctx[c - 1 - l - u]) return l + u;
    }
    l += kMatchChunk;
  }
  return l;
}

__device__ __forceinline__ int match_len(const int64_t* row, const int64_t* ctx, int c, int64_t i,
                                         int64_t tok, int64_t prev, bool have_prev) {
  if (tok != ctx[c - 1]) return 0;
  const int lim = static_cast<int>(min_of<int64_t>(c - 1, i + 1));  // l < c - 1 and i - l >= 0
  if (lim <= 1) return 1;
  if ((have_prev ? prev : row[i - 1]) != ctx[c - 2]) return 1;
  return extend_match(row, ctx, c, i);
}

// Appends (key, l) at `at` of a list of capacity kCandCap (positions past it are counted only).
template <int kCandCap, class Key>
__device__ __forceinline__ void store_candidate(Key* keys, uint8_t* lens, int at, int64_t i,
                                                int l) {
  if (at < kCandCap) {
    keys[at] = static_cast<Key>(i);
    lens[at] = static_cast<uint8_t>(l);
  }
}

// Lane 0 reserves n1 entries of the candidate list and n2 of the second list for its warp; every
// lane gets both bases. Warp-uniform call.
template <int kCandCap>
__device__ __forceinline__ int2 reserve_entries(SearchShared<kCandCap>& sh, int n1, int n2) {
  int at = 0, at2 = 0;
  if ((threadIdx.x & 31) == 0) {
    at = atomicAdd(&sh.n_cand, n1);
    if (n2 > 0) at2 = atomicAdd(&sh.n_cand2, n2);
  }
  return make_int2(__shfl_sync(kFull, at, 0), __shfl_sync(kFull, at2, 0));
}

// One pass over the history. Pass 0 appends every l >= 1 to the candidate list, every l >= 2 also
// to the second list (what the search needs when the first overflows, unless n_2 > kCandCap too),
// and counts the l >= 2 in the histogram (n_1 is the number appended); pass 1 appends the positions
// with l >= l0 only. Appends are warp-aggregated over the kUnroll positions of a round (one shared
// atomic per warp and list); the lists count past kCandCap.
//
// It runs only as a fallback (history_pass0 is the common pass 0): pass 0 again when the second
// list overflowed, pass 1 when the first did and l0 > 2. So it is out of line, and extend_match
// with it: inlined at both calls, their kUnroll copies of extend_match put about 1900 instructions
// (30 KB) of rarely run code among the kernel's common paths. Out of line (no spills) every
// suffix_match row of benchmarks/kernels/bench_suffix_kernels.cu measured faster.
template <int kCandCap>
__device__ __noinline__ void history_pass(SearchShared<kCandCap>& sh, const int64_t* row, int64_t n,
                                          int c, int pass, int l0) {
  const int lane = threadIdx.x & 31;
  const unsigned below = (1u << lane) - 1u;
  const int want = pass == 0 ? 1 : l0;
  for (int64_t base = 0; base < n; base += int64_t{kThreads} * kUnroll) {
    int64_t tok[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads + threadIdx.x;
      tok[u] = i < n ? row[i] : 0;
    }
    int len[kUnroll];
    unsigned ballot[kUnroll];
    int total = 0, total2 = 0;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads + threadIdx.x;
      const int64_t prev = __shfl_up_sync(kFull, tok[u], 1);  // H[i - 1], but on lane 0
      len[u] = i < n ? match_len(row, sh.ctx, c, i, tok[u], prev, lane > 0) : 0;
      ballot[u] = __ballot_sync(kFull, len[u] >= want);
      total += __popc(ballot[u]);
      if (pass == 0) total2 += __popc(__ballot_sync(kFull, len[u] >= 2));
    }
    if (total == 0) continue;  // warp-uniform
    const int2 bases = reserve_entries(sh, total, total2);
    int at = bases.x, at2 = bases.y;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads + threadIdx.x;
      if (len[u] >= want)
        store_candidate<kCandCap>(sh.core.key, sh.core.len, at + __popc(ballot[u] & below), i,
                                  len[u]);
      at += __popc(ballot[u]);
      if (pass == 0) {
        const unsigned two = __ballot_sync(kFull, len[u] >= 2);
        if (two != 0) {  // warp-uniform; rare: the histogram and the second list
          if (len[u] >= 2)
            store_candidate<kCandCap>(sh.key2, sh.len2, at2 + __popc(two & below), i, len[u]);
          at2 += __popc(two);
          const unsigned group = __match_any_sync(kFull, len[u] >= 2 ? len[u] : 0);
          if (len[u] >= 2 && lane == __ffs(group) - 1) atomicAdd(&sh.hist[len[u]], __popc(group));
        }
      }
    }
  }
}

constexpr uint16_t kNoIndex = 0xffff;
constexpr int kPairs = 16;        // 16-byte loads per lane and tile, all in flight
constexpr int kExtendChunk = 16;  // a lane's first round of loads when it extends an l >= 2

// Extends the match lengths of second-list entries [from, to) (< kCandCap) of the calling warp to
// their full length, fixes both lists and counts the histogram. Each lane compares kExtendChunk
// positions of its own entry, all loads in flight; the few entries still matching after that (the
// long matches, up to c - 1) continue one after another with the whole warp, 64 positions per round
// of loads. The newest occurrence, n - 1, is the context itself: l = c - 1, nothing to load.
template <int kCandCap>
__device__ void extend_entries(SearchShared<kCandCap>& sh, const int64_t* row, int64_t n, int c,
                               int from, int to) {
  const int lane = threadIdx.x & 31;
  for (int j0 = from; j0 < to; j0 += 32) {  // warp-uniform
    const int j = j0 + lane;
    const bool mine = j < to;
    const int64_t i = mine ? sh.key2[j] : 0;
    const int lim = static_cast<int>(min_of<int64_t>(c - 1, i + 1));
    int l = 2;
    bool more = false;
    if (mine && i == n - 1) {
      l = lim;
    } else if (mine) {
      int64_t t[kExtendChunk];
#pragma unroll
      for (int u = 0; u < kExtendChunk; ++u) t[u] = l + u < lim ? row[i - l - u] : 0;
      int stop = kExtendChunk;
#pragma unroll
      for (int u = kExtendChunk - 1; u >= 0; --u) {
        if (l + u >= lim || t[u] != sh.ctx[c - 1 - l - u]) stop = u;
      }
      l += stop;
      more = stop == kExtendChunk && l < lim;
    }
    for (unsigned pend = __ballot_sync(kFull, more); pend != 0; pend &= pend - 1) {
      const int src = __ffs(pend) - 1;
      const int64_t pi = __shfl_sync(kFull, i, src);
      const int plim = __shfl_sync(kFull, lim, src);
      int pl = __shfl_sync(kFull, l, src);
      while (pl < plim) {
        const int k0 = pl + lane, k1 = pl + 32 + lane;
        const int64_t t0 = k0 < plim ? row[pi - k0] : 0;
        const int64_t t1 = k1 < plim ? row[pi - k1] : 0;
        const unsigned stop0 = __ballot_sync(kFull, k0 >= plim || t0 != sh.ctx[c - 1 - k0]);
        const unsigned stop1 = __ballot_sync(kFull, k1 >= plim || t1 != sh.ctx[c - 1 - k1]);
        if (stop0 != 0) {
          pl += __ffs(stop0) - 1;
          break;
        }
        if (stop1 != 0) {
          pl += 32 + __ffs(stop1) - 1;
          break;
        }
        pl += 64;
      }
      if (lane == src) l = pl;
    }
    if (mine) {
      sh.len2[j] = static_cast<uint8_t>(l);
      if (sh.idx2[j] != kNoIndex) sh.core.len[sh.idx2[j]] = static_cast<uint8_t>(l);
      atomicAdd(&sh.hist[l], 1);
    }
  }
}

template <int kCandCap>
__device__ void history_pass0(SearchShared<kCandCap>& sh, const int64_t* row, int64_t n, int c) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  // The context (one token per thread) and its last two tokens are loaded with the first tile: the
  // block waits for the context and the caller's counters in shared memory once those are in
  // flight.
  static_assert(kMaxSuffixTreeDepth <= kThreads, "one context token per thread");
  const int64_t ctx_tok = threadIdx.x < c ? row[n - c + threadIdx.x] : 0;
  const long long c1 = __ldg(row + n - 1);
  const long long c2 = c >= 3 ? __ldg(row + n - 2) : 0;  // c = 2: lim <= 1, every l <= 1
  // Pairs start at 16-byte addresses: position -1 is a virtual one when the row is not so aligned.
  const int64_t origin = -static_cast<int64_t>((reinterpret_cast<uintptr_t>(row) >> 3) & 1);
  // As few tiles as kPairs allows, the positions spread evenly over the warps of each (a warp's
  // span: a multiple of 64 positions, at most kPairs * 64).
  constexpr int64_t kWarpsPerBlock = kThreads / 32;
  const int64_t tiles =
      (n - origin + kWarpsPerBlock * kPairs * 64 - 1) / (kWarpsPerBlock * kPairs * 64);
  const int64_t unit = tiles * kWarpsPerBlock * 64;  // each warp of each tile: 64 more positions
  const int span = static_cast<int>((n - origin + unit - 1) / unit * 64);
  const int64_t tile_len = int64_t{span} * kWarpsPerBlock;
  // The pairs of 64 positions a span holds: past them every position is out of range, and running
  // them anyway (a short history's span is a few of the kPairs) was most of the pass's
  // instructions.
  const int pairs = span / 64;
  for (int64_t tile = origin; tile < n; tile += tile_len) {
    const int64_t start = tile + int64_t{warp} * span;
    const int64_t end = min_of<int64_t>(max_of<int64_t>(start + span, start), n);  // [start, end)
    longlong2 t[kPairs];
#pragma unroll
    for (int u = 0; u < kPairs; ++u) {
      if (u >= pairs) break;  // uniform over the block
      const int64_t i = start + u * 64 + 2 * lane;
      if (i + 1 < end && i >= 0) {
        t[u] = __ldg(reinterpret_cast<const longlong2*>(row + i));
      } else {
        t[u].x = i >= 0 && i < end ? row[i] : 0;
        t[u].y = i + 1 >= 0 && i + 1 < end ? row[i + 1] : 0;
      }
    }
    const long long before = lane == 0 && start >= 1 && start < n ? row[start - 1] : 0;
    if (tile == origin) {  // block-uniform
      if (threadIdx.x < c) sh.ctx[threadIdx.x] = ctx_tok;
      __syncthreads();
    }
    if (start >= n) continue;  // warp-uniform; no other block barrier in the loop
    unsigned m1 = 0, m2 = 0;   // bit 2u + h: position start + 64u + 2 lane + h has l >= 1 / l >= 2
#pragma unroll
    for (int u = 0; u < kPairs; ++u) {
      if (u >= pairs) break;  // uniform over the block
      const int64_t i = start + u * 64 + 2 * lane;
      // H[i - 1]: lane - 1's second token; lane 0's is lane 31's of the previous pair (or
      // `before`).
      const long long sent = lane == 31 && u > 0 ? t[u > 0 ? u - 1 : 0].y : t[u].y;
      const long long got = __shfl_sync(kFull, sent, (lane + 31) & 31);
      const long long prev = lane > 0 || u > 0 ? got : before;
      const bool a0 = i >= 0 && i < end && t[u].x == c1;
      const bool a1 = i + 1 >= 0 && i + 1 < end && t[u].y == c1;
      const bool b0 = a0 && c >= 3 && i >= 1 && prev == c2;
      const bool b1 = a1 && c >= 3 && i >= 0 && t[u].x == c2;
      m1 |= (static_cast<unsigned>(a0) | static_cast<unsigned>(a1) << 1) << (2 * u);
      m2 |= (static_cast<unsigned>(b0) | static_cast<unsigned>(b1) << 1) << (2 * u);
    }
    // One warp scan of both counts (each <= 32 * 32, packed in 16 bits), one atomic per list.
    const int mine = __popc(m1) | __popc(m2) << 16;
    int incl = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(kFull, incl, o);
      if (lane >= o) incl += v;
    }
    const int total = __shfl_sync(kFull, incl, 31);
    if (total == 0) continue;  // warp-uniform
    const int total1 = total & 0xffff, total2 = total >> 16;
    const int2 bases = reserve_entries(sh, total1, total2);
    const int at2 = bases.y;
    int o1 = bases.x + ((incl - mine) & 0xffff), o2 = at2 + ((incl - mine) >> 16);
    for (unsigned m = m1; m != 0; m &= m - 1) {
      const int e = __ffs(m) - 1;
      const int64_t i = start + (e >> 1) * 64 + 2 * lane + (e & 1);
      const bool two = (m2 >> e) & 1u;
      if (o1 < kCandCap) {
        sh.core.key[o1] = static_cast<unsigned long long>(i);
        sh.core.len[o1] = two ? 2 : 1;
      }
      if (two) {
        if (o2 < kCandCap) {
          sh.key2[o2] = static_cast<uint32_t>(i);
          sh.idx2[o2] = o1 < kCandCap ? static_cast<uint16_t>(o1) : kNoIndex;
        }
        ++o2;
      }
      ++o1;
    }
    if (total2 == 0) continue;  // warp-uniform
    __syncwarp();
    extend_entries(sh, row, n, c, at2, min(at2 + total2, kCandCap));
  }
}

// Warp 0: n_L, the number of positions with l >= L (n_cand for L = 1, else a suffix sum of the
// histogram: lane q owns match lengths 8q .. 8q + 7), then the bounds the search needs, each a min
// or max over L as n_L never grows with L: last_l, the longest L with n_L >= 2 (0: none);
// short_end, the shortest with n_L <= kWarpSet (c: none); l0, the shortest held by the candidate
// list (1 unless it overflowed: then the shortest with n_L <= kCandCap, c: none; the list is reset
// for the second pass).
template <int kCandCap>
__device__ void match_length_bounds(SearchShared<kCandCap>& sh, int c) {
  constexpr int kPer = kMaxSuffixTreeDepth / 32;
  const int lane = threadIdx.x;
  int h[kPer];
  int total = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int L = lane * kPer + j;
    h[j] = L >= 1 && L < c ? sh.hist[L] : 0;
    total += h[j];
  }
  int incl = total;  // this lane's and the lanes above it
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int v = __shfl_down_sync(kFull, incl, o);
    if (lane + o < 32) incl += v;
  }
  const int above = incl - total;
  unsigned last_l = 0, short_end = c, l0 = c;
  int at_least = above;
#pragma unroll
  for (int j = kPer - 1; j >= 0; --j) {
    const int L = lane * kPer + j;
    at_least += h[j];
    if (L == 1) at_least = sh.n_cand;  // every l >= 1 was appended (hist counts l >= 2 only)
    if (L < 1 || L >= c) continue;
    if (at_least >= 2) last_l = max(last_l, static_cast<unsigned>(L));
    if (at_least <= kWarpSet) short_end = min(short_end, static_cast<unsigned>(L));
    if (at_least <= kCandCap) l0 = min(l0, static_cast<unsigned>(L));
  }
  last_l = __reduce_max_sync(kFull, last_l);
  short_end = __reduce_min_sync(kFull, short_end);
  l0 = __reduce_min_sync(kFull, l0);
  if (lane == 0) {
    sh.short_end = static_cast<int>(short_end);
    sh.last_l = static_cast<int>(last_l);
    sh.l0 = sh.n_cand > kCandCap ? static_cast<int>(l0) : 1;
    if (sh.n_cand > kCandCap) sh.n_cand = 0;
  }
}

// ---- slow path: match lengths with more than kCandCap occurrences
// --------------------------------

// l(i) >= want? (want <= the cap, so this is the CPU's l(i) compared with want.)
__device__ __forceinline__ bool ends_match(const int64_t* row, const int64_t* ctx, int c, int64_t i,
                                           int want) {
  if (i - want + 1 < 0) return false;
  for (int j = 0; j < want; ++j) {
    if (row[i - j] != ctx[c - 1 - j]) return false;
  }
  return true;
}

// Is position i in S_k for match length L and the draft so far (k tokens in core.cur)?
template <int kCandCap>
__device__ __forceinline__ bool slow_member(const SearchShared<kCandCap>& sh, const int64_t* row,
                                            int64_t n, int c, int L, int k, int64_t i) {
  if (i + k > n - 1 || !ends_match(row, sh.ctx, c, i, L)) return false;
  for (int j = 0; j < k; ++j) {
    if (row[i + 1 + j] != sh.core.cur.tokens[j]) return false;
  }
  return true;
}

// Counts next token row[i + k + 1] of member i in the table (tab_idx: least member position + 1
// with the entry's token, tab_cnt: count); false if the table is full.
template <int kCandCap>
__device__ __forceinline__ bool slow_table_add(SearchShared<kCandCap>& sh, const int64_t* row,
                                               int k, int64_t i, int64_t tok, uint64_t h) {
  const uint32_t me = static_cast<uint32_t>(i) + 1;
  uint32_t slot = static_cast<uint32_t>(h) & (kCandCap - 1);
  for (int probe = 0; probe < kCandCap; ++probe) {
    uint32_t o = atomicCAS(&sh.core.tab[0].c.idx[slot], 0u, me);
    if (o == 0) {
      atomicAdd(&sh.core.tab[0].c.cnt[slot], 1u);
      return true;
    }
    // Any value read is a member with this entry's token (atomicMin keeps it one).
    if (row[static_cast<int64_t>(o) - 1 + k + 1] == tok) {
      atomicMin(&sh.core.tab[0].c.idx[slot], me);
      atomicAdd(&sh.core.tab[0].c.cnt[slot], 1u);
      return true;
    }
    slot = (slot + 1) & (kCandCap - 1);
  }
  return false;
}

struct StepResult {
  unsigned members;  // |S_k|
  int64_t count;     // count of the winner (0: no member has a next token)
  int64_t pos;       // the winner's least member position
};

// Step k of match length L over the whole history. Uniform call; ends with a barrier.
template <int kCandCap>
__device__ StepResult slow_step(SearchShared<kCandCap>& sh, const int64_t* row, int64_t n, int c,
                                int L, int k) {
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  FDSPEC_PROF_ADD(12, 1);
  if (threadIdx.x == 0) sh.members = 0;
  uint64_t lo = 0;
  int width_log = 64;  // the hash range [lo, lo + 2^width_log) of this pass
  bool counted = false;
  unsigned long long best = 0;  // thread 0's running best (count << 32 | ~position)
  while (true) {
    for (int j = threadIdx.x; j < kCandCap; j += kThreads) {
      sh.core.tab[0].c.idx[j] = 0;
      sh.core.tab[0].c.cnt[j] = 0;
    }
    if (threadIdx.x == 0) sh.overflow = 0;
    __syncthreads();
    unsigned members = 0;
    bool full = false;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      if (!slow_member(sh, row, n, c, L, k, i)) continue;
      ++members;
      if (i + k + 1 > n - 1) continue;
      const int64_t tok = row[i + k + 1];
      const uint64_t h = suffix_mix64(static_cast<uint64_t>(tok));
      if (width_log < 64 && (h >> width_log) != (lo >> width_log)) continue;
      if (!full) full = !slow_table_add(sh, row, k, i, tok, h);
    }
    if (!counted && members) atomicAdd(&sh.members, members);
    counted = true;
    if (full) atomicExch(&sh.overflow, 1);
    __syncthreads();
    const int overflow = sh.overflow;
    __syncthreads();  // everyone has read the flag before thread 0 clears it
    if (overflow) {
      --width_log;
      continue;
    }
    unsigned long long key = 0;
    for (int j = threadIdx.x; j < kCandCap; j += kThreads) {
      const uint32_t o = sh.core.tab[0].c.idx[j];
      if (o == 0) continue;
      const unsigned long long e =
          (static_cast<unsigned long long>(sh.core.tab[0].c.cnt[j]) << 32) |
          (0xffffffffull - (o - 1));
      key = key > e ? key : e;
    }
    key = Reduce(sh.core.reduce.l).Reduce(key, [](unsigned long long a, unsigned long long b) {
      return a > b ? a : b;
    });
    __syncthreads();  // the reduction's storage and the table are free again
    if (threadIdx.x == 0 && key > best) best = key;
    if (width_log == 64) break;
    lo += uint64_t{1} << width_log;
    if (lo == 0) break;  // wrapped: the whole range is done
  }
  if (threadIdx.x == 0) sh.step_best = best;
  __syncthreads();
  StepResult r;
  r.members = sh.members;
  r.count = static_cast<int64_t>(sh.step_best >> 32);
  r.pos = static_cast<int64_t>(0xffffffffull - (sh.step_best & 0xffffffffull));
  __syncthreads();  // the next step resets members and step_best
  return r;
}

// Walks match length L with slow_step; the draft goes to core.cur. Every thread holds the same
// score and m.
template <int kCandCap>
__device__ float slow_walk(const SuffixMatchParams& p, SearchShared<kCandCap>& sh,
                           const int64_t* row, int64_t n, int c, int L, int64_t limit, int* m_out) {
  float prob = 1.0f, score = 0.0f;
  int m = 0;
  while (m < limit && L + m < p.max_tree_depth) {
    const StepResult r = slow_step(sh, row, n, c, L, m);
    if (r.count == 0) break;
    const float next = fmul_rn(prob, suffix_ratio(r.count, r.members));
    if (!(next >= p.min_token_prob)) break;
    prob = next;
    if (threadIdx.x == 0) {
      sh.core.cur.tokens[m] = row[r.pos + m + 1];
      sh.core.cur.probs[m] = prob;
    }
    score = fadd_rn(score, prob);
    ++m;
    __syncthreads();
  }
  *m_out = m;
  return score;
}

// ---- the search kernel --------------------------------------------------------------------------

__device__ void write_draft(const SuffixMatchParams& p, int64_t b, const DraftBuf* src, int m,
                            int L) {
  const int64_t K = p.draft_stride - 1;
  for (int64_t j = threadIdx.x; j < K; j += kThreads) {
    p.suffix_tokens[b * K + j] = j < m ? src->tokens[j] : -1;
    p.suffix_probs[b * K + j] = j < m ? src->probs[j] : 0.0f;
  }
  if (threadIdx.x == 0) {
    p.suffix_meta[2 * b] = m;
    p.suffix_meta[2 * b + 1] = L;
  }
}

template <int kCandCap>
constexpr size_t kSearchSmem = sizeof(SearchShared<kCandCap>);

// Slot b's search (block-uniform returns): the length of the draft it writes, whose tokens are in
// sh.core.best.
template <int kCandCap>
__device__ int search_slot(const SuffixMatchParams& p, SearchShared<kCandCap>& sh, int64_t b) {
  if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) return 0;
  const SuffixSlot v = suffix_slot(p, b);
  const int64_t* row = v.row;
  const int64_t n = v.n;
  const int c = static_cast<int>(min_of<int64_t>(p.max_tree_depth, n));
  if (c <= 1 || v.cap == 0) {  // no match length, or every draft is empty: the last L wins
    write_draft(p, b, nullptr, 0, c > 1 ? c - 1 : 0);
    return 0;
  }

  // 1. Match lengths, their histogram and the candidate list.
  for (int j = threadIdx.x; j < c; j += kThreads) sh.hist[j] = 0;
  if (threadIdx.x == 0) {
    sh.n_cand = 0;
    sh.n_cand2 = 0;
  }
  FDSPEC_PROF_SET(1, clock64());
  history_pass0(sh, row, n, c);  // also loads the context
  __syncthreads();
  if (sh.n_cand2 > kCandCap) {  // the second list overflowed: its lengths are incomplete
    __syncthreads();            // everyone has read n_cand2
    for (int j = threadIdx.x; j < c; j += kThreads) sh.hist[j] = 0;
    if (threadIdx.x == 0) {
      sh.n_cand = 0;
      sh.n_cand2 = 0;
    }
    __syncthreads();
    history_pass(sh, row, n, c, 0, 1);
    __syncthreads();
  }
  FDSPEC_PROF_SET(2, clock64());
  if (threadIdx.x < 32) match_length_bounds(sh, c);
  __syncthreads();
  FDSPEC_PROF_SET(3, clock64());
  const int last_l = sh.last_l;
  const int l0 = sh.l0;
  if (last_l == 0) {  // every occurrence set is the newest one alone: every draft is empty
    write_draft(p, b, nullptr, 0, c - 1);
    return 0;
  }
  // l0 > 1: the list overflowed; keep the occurrences of C[-l0:] (at most kCandCap): for l0 = 2 the
  // second list (n_2 <= kCandCap), for l0 = c none (no match length fits), else a second pass.
  int n_list = 0;
  if (l0 == 1) {
    n_list = sh.n_cand;
  } else if (l0 == 2) {
    n_list = sh.n_cand2;
    for (int j = threadIdx.x; j < n_list; j += kThreads) {
      sh.core.key[j] = sh.key2[j];
      sh.core.len[j] = sh.len2[j];
    }
  } else if (l0 < c) {
    history_pass(sh, row, n, c, 1, l0);
    __syncthreads();
    n_list = sh.n_cand;
  }
  if (threadIdx.x == 0) sh.core.n = min(n_list, kCandCap);
  __syncthreads();
  FDSPEC_PROF_SET(4, clock64());
  FDSPEC_PROF_SET(13, sh.core.n);
  FDSPEC_PROF_SET(14, sh.short_end);
  FDSPEC_PROF_SET(15, l0 * 1000 + last_l);

  // 2. The core over the candidates: match lengths l0 .. last_l.
  const CoreArgs a = suffix_gpu::core_args(p, v.cap, l0, sh.short_end, last_l, 0.0f);
  suffix_gpu::core_search(sh.core, HistorySource{row, n}, a);

  // 3. The slow path: match lengths below l0, longest first, under the same bound.
  for (int L = min_of<int>(l0, last_l + 1) - 1; L >= 1; --L) {
    const int64_t limit = suffix_spec_limit(L, p.max_spec_factor, p.max_spec_offset, v.cap);
    if (!suffix_gpu::worth_walking(sh.core, L, limit, p.max_tree_depth, 0.0f)) continue;
    int m = 0;
    const float score = slow_walk(p, sh, row, n, c, L, limit, &m);
    suffix_gpu::keep_block_draft(sh.core, score, L, m);
  }
  FDSPEC_PROF_SET(7, clock64());
  suffix_gpu::core_finish(sh.core, a);
  FDSPEC_PROF_SET(8, clock64());

  // 4. The best (score, L); match lengths past last_l draft nothing and score 0.
  Best best = sh.core.best_info;
  if (best.score == 0.0f && c - 1 > best.L) best = Best{0.0f, c - 1, 0};
  write_draft(p, b, &sh.core.best, best.m, best.L);
  return best.m;
}

// `finish`: the batch budget cannot bind (budget_never_binds), so every slot's outcome is its own
// and the block writes it as the walk would (ngram_walk_finish with every draft kept): no walk
// kernel.
template <int kCandCap>
__global__ void __launch_bounds__(kThreads, 2)
    suffix_search_kernel(SuffixMatchParams p, bool finish) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  SearchShared<kCandCap>& sh = *reinterpret_cast<SearchShared<kCandCap>*>(smem_raw);
  const int64_t b = blockIdx.x;
#ifdef FDSPEC_PROFILE
  for (int k = 1; k < profiler::kSlots; ++k) FDSPEC_PROF_SET(k, 0);
  FDSPEC_PROF_SET(0, clock64());
#endif
  // Launched as a programmatic dependent (launch_search): it waits for the work before it first,
  // then lets its own dependents launch (the walk, or the global cache's first scan, both of which
  // wait for this grid's end before they read what it writes).
  wait_for_primary_grid();
  allow_dependent_launch();
  const int drafted = search_slot(p, sh, b);
  FDSPEC_PROF_SET(9, clock64());
  if (finish)
    suffix_finish_slot(p, b, p.seq_lens_encoder[b], p.seq_lens_decoder[b], drafted,
                       sh.core.best.tokens);
}

}  // namespace

#ifdef FDSPEC_PROFILE
// Prints the stage profile of the last search launch over `blocks` slots (bench-only build).
void suffix_profile_print(int64_t blocks, double clock_khz) {
  static long long h[profiler::kBlocks][profiler::kSlots];
  if (cudaMemcpyFromSymbol(h, profiler::g_block, sizeof(h)) != cudaSuccess) return;
  const char* names[10] = {"entry", "setup", "pass0", "hist",   "pass1",
                           "warp",  "block", "slow",  "finish", "write"};
  const int64_t nb = blocks < profiler::kBlocks ? blocks : profiler::kBlocks;
  double sum[10] = {}, mx[10] = {};
  for (int64_t b = 0; b < nb; ++b) {
    long long last = h[b][0];
    for (int k = 1; k < 10; ++k) {
      if (h[b][k] == 0) continue;
      const double us = (h[b][k] - last) / clock_khz * 1e3;
      last = h[b][k];
      sum[k] += us;
      mx[k] = us > mx[k] ? us : mx[k];
    }
    if (b < 4 || (h[b][9] - h[b][0]) / clock_khz * 1e3 > 3.0)
      std::printf(
          "  slot %lld: total %.2f us cand=%lld warp_lo=%lld l0=%lld last_l=%lld walks=%lld "
          "steps=%lld "
          "slow=%lld\n",
          (long long)b, (h[b][9] - h[b][0]) / clock_khz * 1e3, h[b][13], h[b][14], h[b][15] / 1000,
          h[b][15] % 1000, h[b][10], h[b][11], h[b][12]);
  }
  std::printf("  stage (us, mean / max over %lld blocks):", (long long)nb);
  for (int k = 1; k < 10; ++k) std::printf(" %s %.2f/%.2f", names[k], sum[k] / nb, mx[k]);
  std::printf("\n");
}
#endif

namespace {

template <int kCandCap>
cudaError_t launch_search_as(const SuffixMatchParams& p, bool finish, cudaStream_t stream) {
  // More than the default 48 KB of dynamic shared memory: a host-side attribute (no stream work),
  // fine under graph capture.
  cudaError_t err = allow_dynamic_smem(suffix_search_kernel<kCandCap>, kSearchSmem<kCandCap>);
  if (err != cudaSuccess) return err;
  return launch_dependent_smem(suffix_search_kernel<kCandCap>, dim3(static_cast<unsigned>(p.batch)),
                               dim3(kThreads), kSearchSmem<kCandCap>, stream, p, finish);
}

// The form whose shared memory fits the device (suffix_match_search_forms).
cudaError_t launch_search(const SuffixMatchParams& p, bool finish, cudaStream_t stream) {
  DeviceFacts dev;
  const cudaError_t err = current_device_facts(&dev);
  if (err != cudaSuccess) return err;
  switch (suffix_search_cand_cap(suffix_match_search_forms(), dev)) {
    case suffix_gpu::kCandCapLarge:
      return launch_search_as<suffix_gpu::kCandCapLarge>(p, finish, stream);
    case suffix_gpu::kCandCapSmall:
      return launch_search_as<suffix_gpu::kCandCapSmall>(p, finish, stream);
    default:
      return cudaErrorInvalidConfiguration;  // below 66 KB per block: no supported GPU
  }
}

}  // namespace

// The walk keeps every draft when even the longest possible batch stays under the threshold: the
// walk state G of a slot plus its drafts is at most the sum over all slots of their longest length
// (a fixed one <= 2^31 - 1, a decoding one <= K + 1) and one per slot still counted, so
// T > B (2^31 + K + 2) + 1 gives G < T - 1 and G + u <= T for every slot (docs/contract/ngram.md).
SuffixSearchForms suffix_match_search_forms() {
  return {suffix_gpu::kCandCapLarge, kSearchSmem<suffix_gpu::kCandCapLarge>,
          suffix_gpu::kCandCapSmall, kSearchSmem<suffix_gpu::kCandCapSmall>};
}

bool suffix_budget_never_binds(const SuffixMatchParams& p) {
  if (p.batch > (int64_t{1} << 30)) return false;
  return p.threshold > p.batch * ((int64_t{1} << 31) + (p.draft_stride - 1) + 2) + 1;
}

cudaError_t suffix_search_gpu(const SuffixMatchParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  return launch_search(p, false, stream);
}

cudaError_t suffix_walk_gpu(const SuffixMatchParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  return launch_ngram_walk(SuffixWalk{p}, stream);
}

cudaError_t suffix_match_gpu(const SuffixMatchParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const bool alone = suffix_budget_never_binds(p);
  cudaError_t err = launch_search(p, alone, stream);
  if (err != cudaSuccess) return err;
  if (!alone) {
    err = suffix_walk_gpu(p, stream);
    if (err != cudaSuccess) return err;
  }
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
