// suffix_cache: the query's prep (each slot's key, group and counted frequency) and the line
// filter's blocks beside it.
// Part of suffix_cache.cu's one translation unit (included there, and only there: the kernels
// keep internal linkage and the profiler's per-unit tables). Design: docs/design/suffix_cache.md.
#pragma once

#include "suffix_cache/suffix_cache_device.cuh"

namespace fdspec {
namespace {

// What the scans need to know of a decoding slot, from the step's inputs and the cache's counts.
struct SlotDesc {
  bool query;   // c >= G + 1 and a cap: the slot searches the cache
  int c;        // |C|
  int32_t key;  // the key of its last G tokens
  int kind;     // kSuffixKind*
  int32_t n1,
      n2;  // n_1 from the counts (-1: not counted), n_2 from the pair counts (-1: not counted)
  int64_t prev;   // with c >= G + 2, the token before the last G, else 0
  int32_t prev2;  // kSuffixKindPairFrequent: C[-3]
};
// Its part that the step's inputs give (prep reads it before its wait for the insert, which does
// not write them): the context's tokens are read together (its last G, the one before them, C[-3]).
struct SlotContext {
  bool query;
  int c;
  int32_t key;
  int64_t prev;
  int64_t t3;  // C[-3] with c >= 3, else -1
};
__device__ __forceinline__ SlotContext slot_context(const SuffixCacheQueryParams& q, int64_t b) {
  const SuffixMatchParams& p = q.m;
  const SuffixSlot v = suffix_slot(p, b);
  const int G = q.cache.key_len;
  SlotContext x;
  x.c = static_cast<int>(min_of<int64_t>(p.max_tree_depth, v.n));
  x.query = x.c >= G + 1 && v.cap > 0;
  x.key = x.query ? suffix_cache_key(v.row + v.n - G, G) : 0;
  x.prev = x.query && x.c >= G + 2 ? v.row[v.n - 1 - G] : 0;  // a member's
  x.t3 = x.query && x.c >= 3 ? v.row[v.n - 3] : -1;
  return x;
}
// A decoding slot's context, or none (not querying).
__device__ __forceinline__ SlotContext decoding_context(const SuffixCacheQueryParams& q,
                                                        int64_t b) {
  if (suffix_is_decoding(q.m.seq_lens_encoder[b], q.m.seq_lens_decoder[b]))
    return slot_context(q, b);
  SlotContext x{};
  return x;
}
// Then its part that the cache's counts give (after the insert's end): n_1 and n_2 read together
// (n_2 whether or not it is needed), one round trip where each read waited for the one before.
__device__ __forceinline__ SlotDesc describe_slot(const SuffixCacheQueryParams& q,
                                                  const SlotContext& x) {
  const int G = q.cache.key_len;
  SlotDesc d;
  d.c = x.c;
  d.query = x.query;
  d.key = x.key;
  d.prev = x.prev;
  const int64_t t3 = x.t3;
  // n_1 when the cache counts the context's last token (G = 1): the scan then knows before it
  // starts whether that token's hits are the candidates (n_1 <= M) or need a longer match; and
  // with n_1 > M, n_2 when the cache counts the last two tokens' pair: with n_2 > M only the hits
  // that also match the token before them can be candidates.
  const int M = q.max_occurrences;
  const int64_t at = d.query ? suffix_count_index(d.key, q.cache) : -1;
  const int64_t pair = at >= 0 && d.c >= G + 2 ? suffix_pair_index(d.prev, d.key, q.cache) : -1;
  d.n1 = at >= 0 ? q.cache.counts[at] : -1;
  const int32_t n2 = pair >= 0 ? q.cache.pairs[pair] : -1;
  d.kind = d.n1 < 0 ? kSuffixKindScanned : (d.n1 <= M ? kSuffixKindRare : kSuffixKindFrequent);
  d.n2 = -1;
  d.prev2 = 0;
  if (d.kind == kSuffixKindFrequent && pair >= 0) {
    d.n2 = n2;
    // Three-token probes compare C[-3] with the cached positions' keys, which are the tokens
    // themselves only for ids in [0, 2^31): any other C[-3] keeps the two-token probe.
    if (d.n2 > M && t3 >= 0 && t3 <= INT32_MAX) {
      d.kind = kSuffixKindPairFrequent;
      d.prev2 = static_cast<int32_t>(t3);
    }
  }
  return d;
}

// The first scan's part in a querying slot's hits: the rep of a scanned or rare group puts its key
// in the groups' table (`tabled`: every slot of such a group, its rep alone is tabled), a member
// (c >= G + 2, not rare) is found by its token before the G (through its group, or by its last two
// tokens, or three when its last two are frequent); the one string through which its hits are
// found is its line filter item (suffix_line_items).
struct ScanRole {
  bool tabled, member;
  uint64_t item;
};
__device__ __forceinline__ ScanRole scan_role(int c, int kind, int32_t key, int64_t prev,
                                              int32_t prev2, int G) {
  ScanRole r;
  r.tabled = c > 0 && kind <= kSuffixKindRare;
  // A pair-frequent slot's shortest usable match length is 3 or more: c >= 4.
  r.member = c >= G + 2 + (kind == kSuffixKindPairFrequent) && kind != kSuffixKindRare;
  r.item = kind == kSuffixKindFrequent       ? suffix_item2(prev, key)
           : kind == kSuffixKindPairFrequent ? suffix_item3(prev2, prev, key)
                                             : suffix_item1(key);
  return r;
}

// The line mask (q.line_mask, a bit per line of the cache: the lines the scans read), block f of
// the filter: a line is read when, for some querying slot's item, all kSuffixLineHashes planes of
// the filter have its bit; the filter never misses a line that holds an item (suffix_cache.h), so
// the skipped lines hold no hit of any slot. A block per 32 words of the mask (1024 lines), a lane
// per word, the warps share out the items: each (item, plane) is one 128-byte read per block. The
// block works the items out from the inputs itself (describe_slot), beside prep's blocks.
__device__ void filter_lines(const SuffixCacheQueryParams& q, int64_t f, uint64_t* items) {
  __shared__ int count;
  __shared__ uint32_t part[kWarps][32];
  const SuffixCache& c = q.cache;
  const SuffixMatchParams& p = q.m;
  const int64_t first = threadIdx.x;
  // Inputs only before the wait: ordering rule O3a (docs/design/suffix_cache.md).
  const SlotContext x0 = first < p.batch ? decoding_context(q, first) : SlotContext{};
  wait_for_primary_grid();
  allow_dependent_launch();
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  for (int64_t b = first; b < p.batch; b += kThreads) {
    const SlotContext x = b == first ? x0 : decoding_context(q, b);
    if (!x.query) continue;
    const SlotDesc d = describe_slot(q, x);
    const ScanRole role = scan_role(d.c, d.kind, d.key, d.prev, d.prev2, c.key_len);
    if (role.tabled || role.member) items[atomicAdd(&count, 1)] = role.item;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int64_t words = suffix_line_words(c.num_rows, c.width);
  const int64_t w = f * 32 + lane;
  uint32_t read = 0;
  if (w < words) {
    // Unrolled: the planes of four items in flight at once, where each item's waited for the
    // last's.
#pragma unroll 4
    for (int i = warp; i < count; i += kWarps) {
      uint32_t may = ~0u;
#pragma unroll
      for (int j = 0; j < kSuffixLineHashes; ++j) {
        may &= __ldg(&c.lines[suffix_item_plane(items[i], j, c.line_planes) * words + w]);
      }
      read |= may;
    }
  }
  part[warp][lane] = read;
  __syncthreads();
  if (warp == 0 && w < words) {
#pragma unroll
    for (int k = 1; k < kWarps; ++k) read |= part[k][lane];
    q.line_mask[w] = read;
  }
}

// Blocks 0 .. B - 1, per querying slot: its descriptor, counters cleared, and its group: the least
// querying slot whose context ends with the same G tokens (from the inputs: no other block's output
// is read). A group's slots share the occurrences of those tokens (n_G) and, while n_G <= M, one
// candidate list. With the line filter, blocks B .. are the filter's (filter_lines).
// After the insert (after_insert) the contexts and groups are worked out from the step's inputs
// before the wait, the cache's counts after it; alone, prep waits first (ordering rules O1-O3,
// docs/design/suffix_cache.md).
__global__ void __launch_bounds__(kThreads)
    query_prep_kernel(SuffixCacheQueryParams q, bool after_insert) {
  extern __shared__ uint64_t filter_items[];   // [B], the filter's blocks only
  if (!after_insert) wait_for_primary_grid();  // the later waits then return at once
  const SuffixMatchParams& p = q.m;
  if (blockIdx.x >= p.batch) {
    filter_lines(q, blockIdx.x - p.batch, filter_items);  // waits after its contexts
    return;
  }
  const int64_t b = blockIdx.x;
  int32_t* st = stat_row(q, b);
  if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) {
    wait_for_primary_grid();
    allow_dependent_launch();
    if (b == 0 && threadIdx.x == 0) *store_flag(q) = 0;
    if (threadIdx.x == 0) st[kSuffixStatCtx] = 0;
    return;
  }
  const SuffixSlot v = suffix_slot(p, b);
  const int G = q.cache.key_len;
  const int D = p.max_tree_depth;
  __shared__ int32_t rep;
  __shared__ bool query;
  SlotContext x{};  // thread 0's
  for (int j = threadIdx.x; j < 256; j += kThreads) st[kSuffixStatHist + j] = 0;
  if (threadIdx.x == 0) {
    rep = static_cast<int32_t>(b);
    x = slot_context(q, b);
    query = x.query;
  }
  __syncthreads();
  if (query) {  // uniform over the block
    const int64_t* mine = v.row + v.n - G;
    for (int64_t o = threadIdx.x; o < b; o += kThreads) {
      if (!suffix_is_decoding(p.seq_lens_encoder[o], p.seq_lens_decoder[o])) continue;
      const SuffixSlot w = suffix_slot(p, o);
      if (min_of<int64_t>(D, w.n) < G + 1 || w.cap <= 0) continue;  // not querying
      const int64_t* theirs = w.row + w.n - G;
      bool same = true;
      for (int j = 0; j < G && same; ++j) same = mine[j] == theirs[j];
      if (same) atomicMin(&rep, static_cast<int32_t>(o));
    }
  }
  wait_for_primary_grid();
  allow_dependent_launch();
  __syncthreads();  // the group's rep
  if (threadIdx.x == 0) {
    if (b == 0) *store_flag(q) = 0;
    q.source[b] = 0;
    const SlotDesc d = describe_slot(q, x);
    st[kSuffixStatCtx] = d.query ? d.c : 0;
    st[kSuffixStatKey] = d.key;
    st[kSuffixStatKind] = d.kind;
    st[kSuffixStatCount] = d.n1;
    st[kSuffixStatPairCount] = d.n2;
    st[kSuffixStatPrev2] = d.prev2;
    st[kSuffixStatN] = static_cast<int32_t>(v.n);
    st[kSuffixStatPrev] = static_cast<int32_t>(d.prev);
    st[kSuffixStatPrev + 1] = static_cast<int32_t>(static_cast<uint64_t>(d.prev) >> 32);
    st[kSuffixStatHits] = 0;
    st[kSuffixStatList] = -1;
    for (int j = 0; j < kSuffixCandLists; ++j) st[kSuffixStatStored + j] = 0;
    st[kSuffixStatLmin] = G;
    st[kSuffixStatGroup] = 0;
    if (d.query) st[kSuffixStatRep] = rep;
  }
}

}  // namespace
}  // namespace fdspec
