// suffix_cache: prep2, each querying slot's shortest usable match length and its list.
// Part of suffix_cache.cu's one translation unit (included there, and only there: the kernels
// keep internal linkage and the profiler's per-unit tables). Design: docs/design/suffix_cache.md.
#pragma once

#include "suffix_cache/suffix_cache_device.cuh"

namespace fdspec {
namespace {

// Per querying slot, a warp each: n_G from its group, the hits with l == G (n_G minus the longer
// ones), with n_G > M the shortest match length L_min with at most M occurrences (suffix sums of
// the histogram over the lanes, 32 match lengths at a time from the longest), and the list the
// search reads: its group's (n_G <= M), its own list L_min - G, or, with L_min beyond the lists,
// its last list refilled by the second scan (then flagged to run).
__global__ void __launch_bounds__(kThreads) query_prep2_kernel(SuffixCacheQueryParams q) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  const bool slot = b < q.m.batch;  // uniform over the warp
  int32_t* st = stat_row(q, slot ? b : 0);
  // Prep's fields of the slot before the wait: ordering rules O1, O3b
  // (docs/design/suffix_cache.md).
  const int c = slot ? st[kSuffixStatCtx] : 0;
  const int kind = st[kSuffixStatKind];
  const int rep = c > 0 ? st[kSuffixStatRep] : 0;
  const int count = st[kSuffixStatCount];
  const int pair_count = st[kSuffixStatPairCount];
  wait_for_primary_grid();
  allow_dependent_launch();
  if (!slot) return;
  // Then the first scan's output in one round trip: the slot's histogram, its group's count and
  // list length, and its own lists' lengths (volatile: ordering rule O4).
  const volatile int32_t* const vst = st;
  const volatile int32_t* const rep_row = stat_row(q, rep);
  int32_t hist[kMaxSuffixTreeDepth / 32];  // lane's match lengths lane + 32 i
#pragma unroll
  for (int i = 0; i < kMaxSuffixTreeDepth / 32; ++i) hist[i] = st[kSuffixStatHist + lane + 32 * i];
  const int32_t group_hits = rep_row[kSuffixStatGroup];
  const int32_t group_stored = rep_row[kSuffixStatStored];
  int32_t stored[kSuffixMemberLists + 1];
#pragma unroll
  for (int j = 0; j <= kSuffixMemberLists; ++j) stored[j] = vst[kSuffixStatStored + j];
  if (c == 0) return;
  const int G = q.cache.key_len;
  const int J = kSuffixMemberLists;
  const int64_t n = count >= 0 ? count : group_hits;  // counted: n_1
  // The lists the first scan filled are complete: the search learns its list's length here, with
  // its statistics, instead of a round trip of its own (a list the second scan refills: -1).
  const int M = q.max_occurrences;
  const int group_list = min_of<int>(group_stored, M);
  int64_t longer = 0;
#pragma unroll
  for (int i = 0; i < kMaxSuffixTreeDepth / 32; ++i) {
    const int L = lane + 32 * i;
    if (L > G && L < c) longer += hist[i];
  }
  for (int o = 16; o > 0; o >>= 1) longer += __shfl_xor_sync(kFull, longer, o);
  __syncwarp();  // every lane has read the histogram before lane 0 writes to it
  if (kind == kSuffixKindPairFrequent) {
    // The scan counted the hits with l >= 3; those with l == 2 are the rest of n_2's.
    const int64_t n2 = pair_count;
    if (lane == 0) st[kSuffixStatHist + 2] = static_cast<int32_t>(n2 - longer);
    longer = n2;
    __syncwarp();
  }
  const int64_t at_g = n - longer;  // the hits with l == G
  if (lane == 0) {
    st[kSuffixStatHits] = static_cast<int32_t>(n);
    st[kSuffixStatHist + G] = static_cast<int32_t>(at_g);
    if (n <= M) {
      st[kSuffixStatList] = 0;
      st[kSuffixStatRead] = group_list;
    }
  }
  if (n <= M) return;
  // n_L = sum over l >= L is non-increasing in L: L_min is the least L >= G with n_L <= M (c:
  // none).
  int lmin = c;
  int64_t above = 0;  // n_{top + 1}
  for (int top = c - 1; top >= G; top -= 32) {
    const int L = top - lane;
    const int64_t v = L < G ? 0 : (L == G ? at_g : st[kSuffixStatHist + L]);
    int64_t s = v;  // inclusive sum over lanes 0 .. lane: n_L - above
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t u = __shfl_up_sync(kFull, s, o);
      if (lane >= o) s += u;
    }
    const bool ok = L >= G && above + s <= M;
    const unsigned okb = __ballot_sync(kFull, ok);  // a prefix of the lanes (n_L grows with lane)
    const int k = __popc(okb);
    if (k > 0) lmin = top - (k - 1);
    above += __shfl_sync(kFull, s, 31);
    if (k < 32) break;  // some L in this chunk has n_L > M (or the chunk ends below G)
  }
  if (lane != 0) return;
  st[kSuffixStatLmin] = lmin;
  if (lmin >= c) return;  // no match length has at most M occurrences: no global draft
  if (lmin <= G + J) {
    st[kSuffixStatList] = lmin - G;  // complete: n_{L_min} <= M entries were offered to it
    int32_t s = 0;  // stored[lmin - G], unrolled: an indexed array went to local memory
#pragma unroll
    for (int j = 0; j <= kSuffixMemberLists; ++j) s = j == lmin - G ? stored[j] : s;
    st[kSuffixStatRead] = min_of<int>(s, M);
  } else {
    st[kSuffixStatList] = J;
    st[kSuffixStatRead] = -1;
    st[kSuffixStatStored + J] = 0;
    *store_flag(q) = 1;
  }
}

}  // namespace
}  // namespace fdspec
