// suffix_cache: the scans' tables, constants, shared-memory layout and candidate-list offers.
// Part of suffix_cache.cu's one translation unit (included there, and only there: the kernels
// keep internal linkage and the profiler's per-unit tables). Design: docs/design/suffix_cache.md.
#pragma once

#include "suffix_cache/suffix_cache_prep.cuh"

namespace fdspec {
namespace {

// The groups' table index of a key: Fibonacci hashing (the product's top `bits` bits). Keys of
// G = 1 are the tokens themselves, and the frequent tokens (the groups' keys) are small integers:
// their own low bits would fill one run of the table, and linear probing would walk it for every
// other token that lands in it.
__device__ __forceinline__ uint32_t table_hash(int32_t key, int bits) {
  return (static_cast<uint32_t>(key) * 0x9e3779b1u) >> (32 - bits);
}
// The members' table: (group, the token before the group's G tokens). It holds at most B members
// in at least 2B entries (8B or more up to 256 slots), so a multiplicative hash (its high bits
// folded down) is enough; it runs once per hit.
__device__ __forceinline__ uint32_t member_hash(int32_t group, int64_t token, uint32_t mask) {
  uint32_t x = (static_cast<uint32_t>(token) ^ static_cast<uint32_t>(token >> 32)) * 0x9e3779b1u;
  x ^= static_cast<uint32_t>(group) * 0x85ebca77u;
  return (x ^ (x >> 16)) & mask;
}

constexpr uint64_t kScanTableLoad = 8;  // the scans' table entries per slot while small
constexpr uint32_t kMinScanTable = 1024;
constexpr uint32_t kMaxScanTable = 2048;  // past it, two entries per slot

// Pass 1 aggregates the counts of short matches per block in shared memory when the batch is at
// most kAggSlots, and flushes them once.
constexpr int kAggSlots = 256;
constexpr int kAggLen = 8;

// A warp's queue of member hits (slot, offset, row), verified and offered 32 at a time, a lane
// each.
constexpr int kHitQueue = 64;
// The scans' unit of work: a warp reads up to this many lines of the cache (of 32 positions) that
// the line mask selects, then takes its next unit; a cache with too few units of 16 to give every
// block of the grid's wave one takes units of 8, so that its lines, which may all hold hits (B =
// 256 with 1k responses), still spread over every SM (units of 16 are faster on large caches, 8 on
// small ones).
constexpr int kScanTaskLines = 16;
constexpr int kScanTaskLinesSmall = 8;
constexpr int kMaxUnitWords =
    kWarps * kScanTaskLines / 32;  // a block's unit of lines, in mask words
// A block's units are shared among its warps where the mask is dense, with at most this many mask
// words (32 lines each) per querying slot; sparser masks give each warp its own (shared units win
// on dense masks, where one warp would draw a copied response's lines alone, and lose on the
// sparse masks of very large caches).
constexpr int64_t kBlockUnitWordsPerSlot = 128;
// A queued member hit's match length is compared a token per round trip for this many tokens past
// its first, then, if they all matched, by the whole warp.
constexpr int kSerialMatch = 4;

// The first scan's probes (profile build, common/profiler.cuh), a warp record each: the clocks of
// its phases (0 set-up, 1 lines, 2 the last drain of its queue, 3 the wait for the local search,
// 4 the flush of the block's counts), then its lines read (5) and member hits (6).
FDSPEC_PROF(constexpr int kScanPhases = 5;)
#define SCAN_PROF_LINE() \
  if (pass == 1 && lane == 0) FDSPEC_PROF_WARP_ADD(kScanPhases, 1)
#define SCAN_PROF_HIT() \
  if (pass == 1) FDSPEC_PROF_WARP_ADD(kScanPhases + 1, 1)
#define SCAN_PHASE(k) \
  if (pass == 1) FDSPEC_PROF_WARP_LAP(k, phase_clock)

// A slot's scan descriptor (prep's: one aligned sector of its stat row, two 16-byte loads).
__device__ __forceinline__ void load_desc(const SuffixCacheQueryParams& q, int64_t b, int4* d0,
                                          int4* d1) {
  static_assert(
      kSuffixStatCtx == kSuffixStatDesc && kSuffixStatN == kSuffixStatDesc + 1 &&
          kSuffixStatKey == kSuffixStatDesc + 2 && kSuffixStatRep == kSuffixStatDesc + 3 &&
          kSuffixStatKind == kSuffixStatDesc + 4 && kSuffixStatPrev == kSuffixStatDesc + 5 &&
          kSuffixStatPrev2 == kSuffixStatDesc + 7,
      "the descriptor's layout");
  const int4* d = reinterpret_cast<const int4*>(stat_row(q, b) + kSuffixStatDesc);
  *d0 = d[0];
  *d1 = d[1];
}
__device__ __forceinline__ int64_t desc_prev(int4 d1) {
  return static_cast<int64_t>(static_cast<uint32_t>(d1.y)) | (static_cast<int64_t>(d1.z) << 32);
}

// The scans' shared memory: its parts in order (the first 8-byte aligned), their byte offsets.
enum ScanPart : int {
  kScanPrev,     // int64 [B]: a member's token before the G
  kScanQueue,    // int2 [kWarps, kHitQueue]: the warps' queued member hits
  kScanQcount,   // int32 [kWarps]
  kScanTkey,     // int32 [T]: table 1, a group's key
  kScanTrep,     // int32 [T]: table 1, its rep (-1: free)
  kScanTmem,     // int32 [T]: table 2, a member (-1: free)
  kScanSrep,     // int32 [B]: a member's group (or token)
  kScanSctx,     // int32 [B]: a slot's c (0: not querying)
  kScanSn,       // int32 [B]: a slot's history length N
  kScanSkind,    // int32 [B]: kSuffixKind*
  kScanSprev2,   // int32 [B]: a pair-frequent's C[-3]
  kScanAggHits,  // int32 [B]: pass 1, hits per group
  kScanAggHist,  // int32 [B, kAggLen] (pass 1 with B <= kAggSlots)
  kScanFull,     // uint32 [ceil(B * kSuffixCandLists / 32)]: a bit per list
  kScanParts
};
struct ScanLayout {
  size_t at[kScanParts + 1];  // at[kScanParts]: the bytes of the whole
  __host__ __device__ size_t bytes() const { return at[kScanParts]; }
};
// B the batch, T the tables' size.
__host__ __device__ __forceinline__ ScanLayout scan_layout(int64_t B, uint32_t T, bool hist) {
  const size_t b4 = sizeof(int32_t) * B, t4 = sizeof(int32_t) * T;
  const size_t size[kScanParts] = {sizeof(int64_t) * B,
                                   sizeof(int2) * kWarps * kHitQueue,
                                   sizeof(int32_t) * kWarps,
                                   t4,
                                   t4,
                                   t4,
                                   b4,
                                   b4,
                                   b4,
                                   b4,
                                   b4,
                                   b4,
                                   hist ? b4 * kAggLen : 0,
                                   sizeof(uint32_t) * ((B * kSuffixCandLists + 31) / 32)};
  ScanLayout s;
  s.at[0] = 0;
#pragma unroll
  for (int k = 0; k < kScanParts; ++k) s.at[k + 1] = s.at[k] + size[k];
  return s;
}

// The scan block's bit that says list j of slot s is full (`full`: a bit per list, set and read
// with shared atomics, since any thread may set one at any time).
__device__ __forceinline__ void mark_list_full(uint32_t* full, int64_t s, int j) {
  const int64_t i = s * kSuffixCandLists + j;
  atomicOr(&full[i >> 5], 1u << (i & 31));
}
__device__ __forceinline__ bool list_full(uint32_t* full, int64_t s, int j) {
  const int64_t i = s * kSuffixCandLists + j;
  return (atomicOr(&full[i >> 5], 0u) & (1u << (i & 31))) != 0;
}

// Offers `count` entries to list j of slot s; returns the index of the first, which is stored only
// below M. A list offered more than M entries is never read (its slot's match length has more than
// M occurrences), so once a block has seen one full (its bit in `full`) it stops touching its
// count: the hot counts (the lists of the most frequent tokens) take a few atomics per block, not
// one per hit.
__device__ __forceinline__ int offer(const SuffixCacheQueryParams& q, uint32_t* full, int64_t s,
                                     int j, int count) {
  const int M = q.max_occurrences;
  if (list_full(full, s, j)) return M;
  const int at = atomicAdd(list_count(q, s, j), count);
  if (at + count >= M) mark_list_full(full, s, j);
  return at;
}

}  // namespace
}  // namespace fdspec
