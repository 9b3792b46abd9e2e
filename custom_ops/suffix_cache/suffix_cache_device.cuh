// suffix_cache: what every stage's kernels share: the block size, the query's scratch rows
// (stat, candidate lists) and the warp's match extension.
// Part of suffix_cache.cu's one translation unit (included there, and only there: the kernels
// keep internal linkage and the profiler's per-unit tables). Design: docs/design/suffix_cache.md.
#pragma once

#include "common/cuda_utils.cuh"
#include "suffix_cache/suffix_cache.h"
#include "suffix_match/suffix_draft.cuh"
#include "suffix_match/suffix_walk.cuh"

namespace fdspec {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

// Launch shape: the constants that carry measured timings (H100 / H200), each with what it
// protects. Any value is correct; only the speed depends on them. Block bounds for
// __launch_bounds__:
constexpr int kScanMinBlocks = 5;    // 48 registers, no spill: 3 fit beside a local-search block
constexpr int kSearchMinBlocks = 2;  // what its shared memory allows; unbounded, ptxas spilled
// Blocks per SM beside the local search (B <= SMs):
constexpr int kScanBesideBlocks = 4;   // the first scan: leaves the local search's blocks room
constexpr int kScan2BesideBlocks = 2;  // the second: the search's blocks resident at its start
// The rare ops' launches (grid-stride loops: any cap is correct):
constexpr int kFinishThreads = 256;
constexpr int kEvictThreads = 256;
constexpr int64_t kEvictMaxBlocks = 4096;  // keeps a rare call's launch small for 2^30 rows

__device__ __forceinline__ int32_t* stat_row(const SuffixCacheQueryParams& q, int64_t b) {
  return q.stat + b * kSuffixStatCols;
}
// Row B of the statistics: 1 when some slot needs the second scan (a match length past its lists).
__device__ __forceinline__ int32_t* store_flag(const SuffixCacheQueryParams& q) {
  return q.stat + q.m.batch * kSuffixStatCols;
}

// List j of slot b (docs in suffix_cache.h) and the count of entries offered to it.
__device__ __forceinline__ int64_t* cand_list(const SuffixCacheQueryParams& q, int64_t b, int j) {
  return q.cand + (b * kSuffixCandLists + j) * q.max_occurrences;
}
__device__ __forceinline__ int32_t* list_count(const SuffixCacheQueryParams& q, int64_t b, int j) {
  return stat_row(q, b) + kSuffixStatStored + j;
}

// How far a match goes on backwards, measured by the whole warp: the least l' >= l with l' == lim
// or x[-l'] != y[-l'], 64 positions per round trip (lane i compares l + i and l + 32 + i, both
// loads in flight). Used where one long match would otherwise hold a thread for many round trips: a
// scan's queued member hit, a search's candidate. Uniform call: every lane passes the same values.
__device__ __forceinline__ int warp_extend_match(const int64_t* x, const int64_t* y, int l,
                                                 int lim) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (;;) {
    const int k = l + lane;
    const bool in0 = k < lim, in1 = k + 32 < lim;
    const bool same0 = in0 && x[-k] == y[-k], same1 = in1 && x[-k - 32] == y[-k - 32];
    const unsigned differ = __ballot_sync(kFull, !same0);
    if (differ != 0) return min_of(l + __ffs(differ) - 1, lim);
    const unsigned differ1 = __ballot_sync(kFull, !same1);
    if (differ1 != 0) return min_of(l + 32 + __ffs(differ1) - 1, lim);
    l += 64;
  }
}

}  // namespace
}  // namespace fdspec
