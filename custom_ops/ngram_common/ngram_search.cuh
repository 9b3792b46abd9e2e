// The n-gram search shared by ngram_match and hybrid_mtp_ngram (CUDA side). No Paddle include.
//
// The host search (ngram_search.h) tries n = max_n .. min_n and, for each n, the prompt before the
// generated tokens, taking the leftmost productive window. The kernel below computes the same answer in
// one pass. For a window that ends at position e of a haystack, let l(e) be the length of the common
// suffix of haystack[.. e] and the pattern (capped at the largest n and at e + 1). A window of size n
// ending at e matches exactly when l(e) >= n, and it is productive exactly when e <= len - 2 (its
// continuation starts inside the haystack; the budget is >= 1 here). So the host's answer is the
// productive e that maximises the key (l(e), haystack is the prompt, -e): the largest n first, the
// prompt before the second haystack, the leftmost window last. Each position is examined once, with
// the tile of the haystack staged in shared memory; the scan stops early once a window of the largest
// possible size has been found, since nothing to its right can beat it.
//
// The design, in numbers (H100; docs/perf/ngram_notes.md holds the measurements). Against main's
// one-block-per-slot kernel, timed in the same process: every bench row 3..51 % faster, warm and cold.
// - One 1024-thread block per slot, one per SM (its ring of 4 x 32 KB tiles is 128 KB), streaming
//   the slot's tiles with 16-byte cp.async (8-byte where the haystack is not 16-byte aligned).
// - 1024 threads leave 64 registers each: tile and position arithmetic is 32-bit (haystacks are
//   shorter than 2^30 tokens). Against the same kernel in 64-bit arithmetic (which spilled 24..44
//   bytes in hybrid_mtp_ngram) every row is 0.5..29 % faster, 64 x 128k late 34.2 -> 25.1 us; the
//   stop test reads no shared memory (a per-warp flag ORed by the round's barrier).
// - A small batch with long rows (B x C <= half the SMs, two tiles per block at least) searches
//   each slot with a cluster of C = 2 .. 8 blocks; their stop decision and final key are exchanged
//   through shared memory at cluster barriers, never by cross-block atomics. 1 x 128k: 29.9 -> 14.6 us.
//   C = 2 at B = 64 (128 blocks) measured slower than C = 1: not used.
// - Fixed cost: a block reads its slot and, only when the threshold can bind, its share of the
//   batch's give-up sum in one round trip, then tests the sum after one barrier. The walk is a
//   second kernel (ngram_walk.cuh). Limits: at 8 x 8k the search kernel costs ~6 us and the walk
//   ~3 us (both measured by leaving the other out), against 0.86 us for an empty kernel; a late hit
//   wastes the tiles in flight when the scan stops.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include "common/cuda_utils.cuh"
#include "common/fdspec_common.h"
#include "ngram_common/ngram_search.h"
#include "ngram_common/ngram_walk.cuh"

namespace fdspec {

// The search result of one slot, as handed to Problem::store: kNoMatch, or the start of the
// continuation inside its haystack with kSeg1Bit set when that haystack is the second one. The op
// keeps it in slot-private memory it owns (a seq_lens_this_time entry), so it needs no workspace.
constexpr int32_t kNoMatch = -1;
constexpr int32_t kSeg1Bit = static_cast<int32_t>(kMaxHaystackLen);

struct SearchSlot {
  NgramHaystacks h;
  int cap = 0;                // largest n tried: min(max_n, pattern_avail)
  int min_n = 1;
  bool search = false;        // false: store kNoMatch (if record is set) without searching
  bool record = false;        // false: the slot takes no part, Problem::store is not called
};

__device__ __forceinline__ unsigned long long ngram_key(int len, bool in_prompt, int64_t e) {
  return (static_cast<unsigned long long>(len) << 40) |
         (static_cast<unsigned long long>(in_prompt) << 32) |
         static_cast<unsigned long long>(0xFFFFFFFFu - static_cast<uint32_t>(e));
}

// Common-suffix length of hay[.. e] and the pattern, up to `cap`. Positions at or after tile_base are
// read from the shared-memory tile, earlier ones (only a partial match that crosses the tile start
// gets there) from global memory. kMaxN > 0 unrolls the comparison for the common small sizes.
template <int kMaxN>
__device__ __forceinline__ int suffix_match(const int64_t* __restrict__ tile, int tile_base,
                                            const int64_t* __restrict__ hay, int e,
                                            const int64_t* __restrict__ pat, int cap) {
  constexpr int kBound = kMaxN > 0 ? kMaxN : kMaxNgramSize;
  constexpr int kUnroll = kMaxN > 0 ? kMaxN : 1;
  int l = 0;
#pragma unroll kUnroll
  for (int k = 0; k < kBound; ++k) {
    if (k >= cap) break;
    const int pos = e - k;
    const int64_t v = pos >= tile_base ? tile[pos - tile_base] : __ldg(hay + pos);
    if (v != pat[k]) break;
    ++l;
  }
  return l;
}

__device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const unsigned long long o = __shfl_xor_sync(0xFFFFFFFFu, v, off);
    v = o > v ? o : v;
  }
  return v;
}

// Shape of the search: 1024 threads x 4 tokens = 32 KB tiles, kNgramSearchStages of them in a ring of
// shared memory filled by cp.async (16-byte copies where the haystack allows), so that a block keeps
// up to 96 KB of loads in flight while it examines one tile, with 32 warps to hide the shared-memory
// latency of the examination. One block per SM (the ring takes 128 KB).
constexpr int kNgramSearchThreads = 1024;
constexpr int kNgramSearchTok = 4;
constexpr int kNgramSearchStages = 4;
constexpr int kNgramSearchTile = kNgramSearchThreads * kNgramSearchTok;
constexpr size_t kNgramSearchSmem = sizeof(int64_t) * kNgramSearchTile * kNgramSearchStages;
// Most blocks that search one slot together (a thread-block cluster, one block per SM).
constexpr int kNgramMaxCluster = 8;

// The blocks of one slot's cluster: C of them (1 without a cluster launch) and this block's rank.
struct ClusterPlace {
  unsigned size = 1, rank = 0;
};
__device__ __forceinline__ ClusterPlace ngram_cluster_place() {
  ClusterPlace c;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("mov.u32 %0, %%cluster_nctarank;\n\tmov.u32 %1, %%cluster_ctarank;" : "=r"(c.size), "=r"(c.rank));
#endif
  return c;
}
// Every thread of every block of the cluster arrives, then waits for all (release / acquire at
// cluster scope: shared-memory stores to other blocks before it are visible to their reads after it).
// Not `.aligned`: it is reached from code whose control flow depends on the thread.
__device__ __forceinline__ void ngram_cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
#endif
}
// Stores v at the address of `local` in the shared memory of the cluster's block `rank`.
__device__ __forceinline__ void ngram_cluster_store(unsigned long long* local, unsigned rank,
                                                    unsigned long long v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(a), "r"(rank));
  asm volatile("st.shared::cluster.u64 [%0], %1;" ::"r"(remote), "l"(v) : "memory");
#else
  *local = v;
#endif
}

// Copies 16 bytes from global to shared memory asynchronously (part of the thread's current group).
// Through L1 (.ca): the L2-only form (.cg) measured 10 % slower on the bandwidth-bound rows.
__device__ __forceinline__ void ngram_copy16(int64_t* dst, const int64_t* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

// One-dimensional bulk copies (TMA, sm_90): thread 0 asks for a whole tile with one instruction and
// the block waits on an mbarrier of shared memory that counts the bytes landed.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ngram_mbar_init(unsigned long long* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
#endif
}
// Orders the barriers' initialisation before their use by the async proxy and by other threads
// (the latter after a block barrier).
__device__ __forceinline__ void ngram_mbar_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
#endif
}
// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to shared memory;
// `bar`'s current phase completes when they have landed.
__device__ __forceinline__ void ngram_bulk_copy(void* dst, const void* src, unsigned bytes,
                                                unsigned long long* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
#endif
}
__device__ __forceinline__ void ngram_mbar_wait(unsigned long long* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned done = 0;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

// How a launch searches (A/B experiment switches, issue 18).
struct NgramSearchConfig {
  int stages = kNgramSearchStages;  // ring depth
  int tok = kNgramSearchTok;        // tokens per thread per tile (4: 32 KB tiles, 2: 16 KB)
  bool ring_rule = false;           // 3 x 32 KB tiles when the blocks outnumber the SMs
  bool tma = false;                 // bulk copies of whole tiles where the haystacks are 16-byte aligned
  int fold = 0;                     // 0: walk kernel; 1: walk in the last block (counter); 2: grid sync
                                    // (cooperative launch) then block 0 walks; 3: counter, no walk (diag)
  bool skip_walk = false;           // diag: no walk kernel (outputs wrong)
  int cluster_div = 4;              // clusters while B x C x cluster_div / 2 <= SMs ...
  int cluster_min_tiles = 2;        // ... and each block gets this many tiles of the widest haystack
};

#ifdef FDSPEC_NGRAM_AB
// Variants: 0 = main's design; 1 = TMA; 4 = 3-tile ring when blocks outnumber SMs; 7 = 4 + walk
// folded into the last block (acq_rel counter); 8 = 4 + cooperative grid sync and block 0 walks
// (when B <= SMs and no cluster); 9 = 7 without the walk (diag); 10 = 4 without walk kernel (diag);
// 11 = 4 + 16 KB tiles x 8 when blocks <= SMs; 12 = 11 + 7; 13 = 4 + an extra walker block that
// waits for every slot's arrival; 14 = 13 with a dry pass of the walk first.
inline NgramSearchConfig ngram_ab_config(int v) {
  NgramSearchConfig c;
  c.tma = v == 1;
  c.ring_rule = v >= 4;
  c.fold = (v == 7 || v == 12) ? 1 : (v == 8 ? 2 : (v == 9 ? 3 : (v == 13 ? 4 : (v == 14 ? 5 : 0))));
  c.skip_walk = v == 10;
  if (v == 11 || v == 12) {
    c.tok = 2;
    c.stages = 8;
  }
  return c;
}
#ifndef FDSPEC_NGRAM_DEFAULT_VARIANT
#define FDSPEC_NGRAM_DEFAULT_VARIANT 0
#endif
inline int ngram_ab_env_variant() {
  const char* e = std::getenv("FDSPEC_NGRAM_VARIANT");
  return e != nullptr ? std::atoi(e) : FDSPEC_NGRAM_DEFAULT_VARIANT;
}
// The variant the next launch uses (host side; the bench sets it, the harnesses read the env).
inline int g_ngram_ab_variant = ngram_ab_env_variant();
#endif

// The fold's completion counter (experiment: one per translation unit, zero at load, re-zeroed by
// the last block of each launch; not safe for concurrent launches).
__device__ unsigned g_ngram_fold_counter;

// Walk stand-in of a launch without fold.
struct NgramNoWalk {};

// The search of `batch` slots: C blocks per slot (a cluster; C = 1 when the batch fills the GPU), the
// slot's tiles dealt round-robin to them.
//
// Problem provides:
// - SearchSlot slot(b): what to search (every thread calls it);
// - bool threshold_may_bind(), int64_t give_up_term(b, j), bool gives_up(b, total): a slot with
//   gives_up(b, sum over j of give_up_term(b, j)) is sure to be dropped by the budget walk and is not
//   searched; threshold_may_bind() false (from the parameters alone) says no slot can be, and no
//   term is read. The terms are read in the same round trip as the slot, so the test costs a barrier.
// - store(b, code) (thread 0 of the slot's first block, once per recorded slot, after a barrier that
//   follows every thread's slot() and give_up_term() reads) keeps the result.
//
// The haystacks (prompt, then the second one) form one sequence of tiles; block r of the cluster
// streams tiles r, r + C, r + 2C, ... through its ring. Each haystack token is loaded once: O(len0 +
// len1) loads per slot. The scan stops once a key of the largest possible size is known: windows of
// one size are ordered by position, so no later tile can beat it. Positions, tiles and rounds are
// int: a haystack has fewer than kMaxHaystackLen = 2^30 tokens. In a cluster, the blocks publish
// their best key so far to one another at each round's cluster barrier (double-buffered, so that a
// round's stores never meet a read of the round before), so they all stop at the same round; at the
// end block 0 takes the best of the C final keys. No atomic crosses blocks.
template <int kMaxN, int kStages, int kTok, bool kTma, int kFoldMode, class Problem, class Walk>
__global__ void __launch_bounds__(kNgramSearchThreads) ngram_search_kernel(Problem prob, Walk walk) {
  constexpr int kThreads = kNgramSearchThreads;
  constexpr int kTile = kThreads * kTok;
  constexpr bool kFold = kFoldMode != 0;
  extern __shared__ __align__(16) int64_t ring[];  // [kStages][kTile]
  __shared__ int64_t pat[kMaxNgramSize];
  __shared__ int64_t warp_terms[kThreads / 32];
  __shared__ unsigned long long best;
  __shared__ unsigned long long round_keys[2][kNgramMaxCluster];  // written by the cluster's blocks
  __shared__ unsigned long long final_keys[kNgramMaxCluster];     // block 0's: each block's last key
  __shared__ unsigned long long tile_bar[kStages];                // kTma: one per ring slot
  __shared__ std::conditional_t<kFold, WalkShared<kThreads, true>, char> walk_sh;
  __shared__ int last_block;

  allow_dependent_launch();  // the op's next kernel may launch now and wait for this grid
  const ClusterPlace place = ngram_cluster_place();
  const unsigned C = place.size, rank = place.rank;
  const int64_t b = blockIdx.x / C;

  // The fold: the slot's first block arrives at the grid's counter after its store; the last to
  // arrive runs the walk with its whole block.
  auto finish = [&]() {
    if constexpr (kFoldMode == 1 || kFoldMode == 3) {
      int& last = last_block;
      if (threadIdx.x == 0) {
        // Release: this slot's store (by this thread) before the arrival; acquire: every earlier
        // arrival's store before the walk (the walk reads the entries past L1).
        unsigned prev;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                     : "=r"(prev) : "l"(&g_ngram_fold_counter) : "memory");
        last = prev == static_cast<unsigned>(prob.batch()) - 1u;
        if (last) g_ngram_fold_counter = 0;  // every arrival of this launch is in: ready for the next
      }
      __syncthreads();
      if (!last) return;
      if constexpr (kFoldMode == 1) ngram_walk_block<kThreads, 1>(walk, walk_sh);
    } else if constexpr (kFoldMode == 2) {
      cooperative_groups::this_grid().sync();
      if (blockIdx.x != 0) return;
      ngram_walk_block<kThreads, 1>(walk, walk_sh);
    } else if constexpr (kFoldMode == 4 || kFoldMode == 5) {
      // Arrive (release: this slot's store before it); the walker block waits for all.
      if (threadIdx.x == 0) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&g_ngram_fold_counter) : "memory");
      }
    }
  };
  // Modes 4, 5: the grid's extra last block walks once every slot has arrived (5: after a dry pass
  // over the same instructions while the search blocks run).
  if constexpr (kFoldMode == 4 || kFoldMode == 5) {
    if (blockIdx.x == gridDim.x - 1) {
#pragma unroll 1
      for (int pass = kFoldMode == 5 ? 0 : 1; pass < 2; ++pass) {
        if (pass == 1) {
          if (threadIdx.x == 0) {
            const unsigned want = static_cast<unsigned>(prob.batch());
            unsigned seen;
            do {
              asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(&g_ngram_fold_counter) : "memory");
            } while (seen < want);
            g_ngram_fold_counter = 0;  // every arrival is in: ready for the next launch
          }
          __syncthreads();
        }
        ngram_walk_block<kThreads, 1>(walk, walk_sh, pass == 0);
      }
      return;
    }
  }

  // One round trip: this thread's share of the give-up sum and the slot's own facts.
  const bool may_bind = prob.threshold_may_bind();
  int64_t term = 0;
  if (may_bind) {
    for (int64_t j = threadIdx.x; j < prob.batch(); j += kThreads) term += prob.give_up_term(b, j);
  }
  const SearchSlot s = prob.slot(b);
  if (!s.record) {  // the same for every block of the cluster: none touches another's memory
    if (rank == 0) finish();
    return;
  }

  // Candidate window ends are e in [0, len - 2]; tile ti covers positions [base, base + kTile).
  const int ends0 = static_cast<int>(max_of<int64_t>(s.h.len0 - 1, 0));
  const int ends1 = static_cast<int>(max_of<int64_t>(s.h.len1 - 1, 0));
  const int tiles0 = ceil_div(ends0, kTile);
  const int tiles = tiles0 + ceil_div(ends1, kTile);
  const int rounds = ceil_div(tiles, static_cast<int>(C));  // this block's tiles: r = 0 .. rounds - 1
  const bool searching = s.search && s.cap >= s.min_n;
  // Bulk copies need 16-byte aligned haystacks (a tile starts at an even token); else cp.async.
  const bool bulk = kTma && (ends0 == 0 || (reinterpret_cast<uintptr_t>(s.h.seg0) & 15) == 0) &&
                    (ends1 == 0 || (reinterpret_cast<uintptr_t>(s.h.seg1) & 15) == 0);

  struct TileView {
    const int64_t* hay;
    int base, n;
    bool first;
  };
  auto view = [&](int ti) {
    TileView v;
    v.first = ti < tiles0;
    v.hay = v.first ? s.h.seg0 : s.h.seg1;
    v.base = (v.first ? ti : ti - tiles0) * kTile;
    v.n = min_of(kTile, (v.first ? ends0 : ends1) - v.base);
    return v;
  };
  auto has_tile = [&](int r) { return r < rounds && r * static_cast<int>(C) + static_cast<int>(rank) < tiles; };
  // Every thread commits one group per round, even an empty one, so that "all but the newest
  // kStages - 1 groups are complete" always means "round r's tile has landed". A tile whose first
  // token is 16-byte aligned (the base is even) moves in 16-byte copies, the odd last token alone.
  // Bulk: thread 0 asks for the tile rounded up to an even count of tokens (position base + n <=
  // len - 1 is inside the haystack).
  auto issue = [&](int r) {
    const int ti = r * static_cast<int>(C) + static_cast<int>(rank);
    if (bulk) {
      if (threadIdx.x == 0 && has_tile(r)) {
        const TileView v = view(ti);
        ngram_bulk_copy(ring + (r % kStages) * kTile, v.hay + v.base,
                        static_cast<unsigned>((v.n + 1) & ~1) * sizeof(int64_t), &tile_bar[r % kStages]);
      }
      return;
    }
    if (has_tile(r)) {
      const TileView v = view(ti);
      int64_t* dst = ring + (r % kStages) * kTile;
      const int64_t* src = v.hay + v.base;
      if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
#pragma unroll
        for (int k = 0; k < kTok / 2; ++k) {
          const int i = 2 * (threadIdx.x + k * kThreads);
          if (i + 1 < v.n) {
            ngram_copy16(dst + i, src + i);
          } else if (i < v.n) {
            __pipeline_memcpy_async(dst + i, src + i, sizeof(int64_t));
          }
        }
      } else {
#pragma unroll
        for (int k = 0; k < kTok; ++k) {
          const int i = threadIdx.x + k * kThreads;
          if (i < v.n) __pipeline_memcpy_async(dst + i, src + i, sizeof(int64_t));
        }
      }
    }
    __pipeline_commit();
  };

  if (bulk && threadIdx.x == 0) {
#pragma unroll
    for (int st = 0; st < kStages; ++st) ngram_mbar_init(&tile_bar[st]);
    ngram_mbar_init_fence();
  }
  // The tiles are requested once the slot is known to search: at once when the threshold cannot
  // bind, else after the give-up test (a batch that gives up reads no haystack, and its blocks need
  // not wait for copies before they exit).
  int issued = 0;  // rounds whose tile has been requested (the same in every thread)
  if (searching) {
    if (!may_bind) issue(issued++);
    if (threadIdx.x < s.cap) pat[threadIdx.x] = s.h.pattern_last[-static_cast<int64_t>(threadIdx.x)];
  }
  if (threadIdx.x == 0) best = 0;
  if (threadIdx.x < kNgramMaxCluster) round_keys[0][threadIdx.x] = 0;
  bool run = searching;
  if (searching && may_bind) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) term += __shfl_xor_sync(0xFFFFFFFFu, term, off);
    if ((threadIdx.x & 31) == 0) warp_terms[threadIdx.x / 32] = term;
    __syncthreads();
    int64_t total = 0;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) total += warp_terms[w];
    run = !prob.gives_up(b, total);
  }
  if (run) {
    while (issued < kStages - 1) issue(issued++);
  }

  const int64_t pat_last = run ? s.h.pattern_last[0] : 0;
  // Whether this warp has found a key of the largest size (the same in all its lanes). The stop test
  // ORs it over the block in the round's barrier: no read of `best` races with its reset or with the
  // other warps' atomicMax (a volatile or a plain read of `best` there measured up to 1.3 us slower).
  bool found = false;
  int waited = 0;  // bulk: rounds whose tile has been waited for
  for (int r = 0; run && r < rounds; ++r) {
    if (!bulk) __pipeline_wait_prior(kStages - 2);
    // One barrier per round: the tile is visible to the block, everyone is done with the previous
    // one (whose ring slot is refilled below), and the stop decision is the same for the whole block
    // (and cluster).
    bool stop;
    if (C == 1) {
      stop = __syncthreads_or(found);
    } else {
      // The block's best so far (an atomic read: warps may still fold the last round in; any value
      // it returns is a key found, which is all the stop rule needs). Not in the first round: no
      // block may touch another's shared memory before the first cluster barrier, which proves
      // that every block of the cluster has started; each block zeroed its own first buffer.
      if (r > 0 && threadIdx.x < C) {
        ngram_cluster_store(&round_keys[r & 1][rank], threadIdx.x, atomicAdd(&best, 0ull));
      }
      ngram_cluster_sync();
      unsigned long long m = 0;
      for (unsigned k = 0; k < C; ++k) m = max_of(m, round_keys[r & 1][k]);
      stop = static_cast<int>(m >> 40) >= s.cap;
    }
    if (stop) break;
    issue(issued++);

    const int ti = r * static_cast<int>(C) + static_cast<int>(rank);
    if (ti >= tiles) continue;
    if (bulk) {
      ngram_mbar_wait(&tile_bar[r % kStages], (r / kStages) & 1);
      waited = r + 1;
    }
    const TileView v = view(ti);
    const int64_t* tile = ring + (r % kStages) * kTile;
    unsigned long long key = 0;
    // Almost every position fails on the pattern's last token: test that first, from registers,
    // and measure the full common suffix only on a hit. Positions past n hold stale tokens; the hit
    // path discards them.
    int64_t tok[kTok];
#pragma unroll
    for (int k = 0; k < kTok; ++k) tok[k] = tile[threadIdx.x + k * kThreads];
#pragma unroll
    for (int k = 0; k < kTok; ++k) {
      const int i = threadIdx.x + k * kThreads;
      if (tok[k] == pat_last && i < v.n) {
        const int e = v.base + i;
        const int cap_e = min_of(s.cap, e + 1);
        const int l = suffix_match<kMaxN>(tile, v.base, v.hay, e, pat, cap_e);
        if (l >= s.min_n) {
          const unsigned long long kk = ngram_key(l, v.first, e);
          key = kk > key ? kk : key;
        }
      }
    }
    if (__any_sync(0xFFFFFFFFu, key != 0)) {
      key = warp_max_u64(key);
      if ((threadIdx.x & 31) == 0 && key != 0) atomicMax(&best, key);
      found = found || static_cast<int>(key >> 40) >= s.cap;
    }
  }
  // No copy may still target shared memory when the block exits.
  if (bulk) {
    if (threadIdx.x == 0) {
      for (int q = waited; q < issued; ++q) {
        if (has_tile(q)) ngram_mbar_wait(&tile_bar[q % kStages], (q / kStages) & 1);
      }
    }
  } else {
    __pipeline_wait_prior(0);
  }
  __syncthreads();
  unsigned long long result = best;
  if (C > 1) {
    if (!run || rounds == 0) ngram_cluster_sync();  // no round did: every block has started now
    if (threadIdx.x == 0) ngram_cluster_store(&final_keys[rank], 0, result);
    ngram_cluster_sync();  // also keeps every block alive until the others' stores to it are done
    if (rank != 0) return;
    for (unsigned k = 0; k < C; ++k) result = max_of(result, final_keys[k]);
  }
  if (threadIdx.x == 0) {
    if (!run || result == 0) {
      prob.store(b, kNoMatch);
    } else {
      const bool in_prompt = (result >> 32) & 1;
      const int64_t e = 0xFFFFFFFFu - static_cast<uint32_t>(result);
      prob.store(b, static_cast<int32_t>(e + 1) | (in_prompt ? 0 : kSeg1Bit));
    }
  }
  finish();
}

// Decodes a search result into the continuation's first token and the tokens available after it.
__device__ __forceinline__ NgramMatch decode_search_result(int32_t code, const NgramHaystacks& h) {
  NgramMatch m;
  if (code < 0) return m;
  const bool second = (code & kSeg1Bit) != 0;
  const int64_t start = code & (kSeg1Bit - 1);
  const int64_t len = second ? h.len1 : h.len0;
  m.src = (second ? h.seg1 : h.seg0) + start;
  m.count = len - start;
  return m;
}

// Blocks per slot: more than one only while the clusters surely fit on the GPU at once (B x C <= half
// the SM count: a cluster's blocks must share a GPU processing cluster, and with one block per SM the
// GPCs do not seat every pairing of the SMs) and each block gets at least two tiles of the widest
// haystack (`max_tokens`).
inline int ngram_search_cluster(int64_t batch, int64_t max_tokens, int sms,
                                const NgramSearchConfig& cfg = NgramSearchConfig{}) {
  int c = 1;
  while (c < kNgramMaxCluster && batch * c * 2 * cfg.cluster_div <= int64_t{sms} * 2 &&
         int64_t{c} * 2 * cfg.cluster_min_tiles * kNgramSearchTile <= max_tokens) {
    c *= 2;
  }
  return c;
}

template <int kMaxN, int kStages, int kTok, bool kTma, int kFold, class Problem, class Walk>
cudaError_t launch_ngram_search_cfg(const Problem& prob, const Walk& walk, int64_t batch, int c,
                                    cudaStream_t stream) {
  auto kernel = ngram_search_kernel<kMaxN, kStages, kTok, kTma, kFold, Problem, Walk>;
  const size_t smem = sizeof(int64_t) * kNgramSearchThreads * kTok * kStages;
  // The ring is larger than the default 48 KB of dynamic shared memory. A host-side attribute (no
  // stream work), so it is fine under graph capture; set on every launch as it is per device.
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  cudaLaunchAttribute attr[1] = {};
  unsigned n_attr = 0;
  if (c > 1) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(c);
    attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
    n_attr = 1;
  } else if (kFold == 2) {
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    n_attr = 1;
  }
  const unsigned walker = (kFold == 4 || kFold == 5) ? 1 : 0;
  const cudaLaunchConfig_t cfg = {dim3(static_cast<unsigned>(batch * c) + walker), dim3(kNgramSearchThreads),
                                  smem, stream, attr, n_attr};
  return cudaLaunchKernelEx(&cfg, kernel, prob, walk);
}

template <int kMaxN, class Problem, class Walk>
cudaError_t launch_ngram_search_n(const Problem& prob, const Walk& walk, int64_t batch, int64_t max_tokens,
                                  const NgramSearchConfig& sc, bool* folded, cudaStream_t stream) {
  static_assert(Problem::kThreads == kNgramSearchThreads, "the search problem's block size");
  int dev = 0, sms = 0, major = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (err != cudaSuccess) return err;
  const int c = major >= 9 ? ngram_search_cluster(batch, max_tokens, sms, sc) : 1;
  const bool many = batch * c > sms;
  const bool three = sc.ring_rule && many;
  const bool tma = sc.tma && major >= 9;
  int fold = sc.fold;
  if (fold == 2 && (c > 1 || many)) fold = 0;  // the cooperative grid must fit at once
  if ((fold == 4 || fold == 5) && c > 1) fold = 0;  // the walker block cannot join a cluster grid
  *folded = fold != 0 || sc.skip_walk;
  const NgramNoWalk none;
  if (tma) {
    return three ? launch_ngram_search_cfg<kMaxN, 3, 4, true, 0>(prob, none, batch, c, stream)
                 : launch_ngram_search_cfg<kMaxN, 4, 4, true, 0>(prob, none, batch, c, stream);
  }
  if (sc.tok == 2 && !many) {
    if (fold == 1) return launch_ngram_search_cfg<kMaxN, 8, 2, false, 1>(prob, walk, batch, c, stream);
    return launch_ngram_search_cfg<kMaxN, 8, 2, false, 0>(prob, none, batch, c, stream);
  }
  switch (fold) {
    case 1:
      return three ? launch_ngram_search_cfg<kMaxN, 3, 4, false, 1>(prob, walk, batch, c, stream)
                   : launch_ngram_search_cfg<kMaxN, 4, 4, false, 1>(prob, walk, batch, c, stream);
    case 2: return launch_ngram_search_cfg<kMaxN, 4, 4, false, 2>(prob, walk, batch, c, stream);
    case 4:
      return three ? launch_ngram_search_cfg<kMaxN, 3, 4, false, 4>(prob, walk, batch, c, stream)
                   : launch_ngram_search_cfg<kMaxN, 4, 4, false, 4>(prob, walk, batch, c, stream);
    case 5:
      return three ? launch_ngram_search_cfg<kMaxN, 3, 4, false, 5>(prob, walk, batch, c, stream)
                   : launch_ngram_search_cfg<kMaxN, 4, 4, false, 5>(prob, walk, batch, c, stream);
    case 3:
      return three ? launch_ngram_search_cfg<kMaxN, 3, 4, false, 3>(prob, walk, batch, c, stream)
                   : launch_ngram_search_cfg<kMaxN, 4, 4, false, 3>(prob, walk, batch, c, stream);
    default:
      return three ? launch_ngram_search_cfg<kMaxN, 3, 4, false, 0>(prob, none, batch, c, stream)
                   : launch_ngram_search_cfg<kMaxN, 4, 4, false, 0>(prob, none, batch, c, stream);
  }
}

// Launches the search over `batch` slots with the compare loop specialised for the usual sizes.
// `max_tokens` bounds the tokens of a slot's two haystacks (it sizes the clusters). *folded: whether
// the walk ran inside the search grid.
template <class Problem, class Walk>
cudaError_t launch_ngram_search(const Problem& prob, const Walk& walk, int64_t batch, int max_n,
                                int64_t max_tokens, bool* folded, cudaStream_t stream) {
#ifdef FDSPEC_NGRAM_AB
  const NgramSearchConfig sc = ngram_ab_config(g_ngram_ab_variant);
#else
  const NgramSearchConfig sc;
#endif
#if defined(FDSPEC_NGRAM_AB) && !defined(FDSPEC_NGRAM_AB_ALL_N)
  (void)max_n;
  return launch_ngram_search_n<3>(prob, walk, batch, max_tokens, sc, folded, stream);
#else
  switch (max_n) {
    case 1: return launch_ngram_search_n<1>(prob, walk, batch, max_tokens, sc, folded, stream);
    case 2: return launch_ngram_search_n<2>(prob, walk, batch, max_tokens, sc, folded, stream);
    case 3: return launch_ngram_search_n<3>(prob, walk, batch, max_tokens, sc, folded, stream);
    case 4: return launch_ngram_search_n<4>(prob, walk, batch, max_tokens, sc, folded, stream);
    case 5: return launch_ngram_search_n<5>(prob, walk, batch, max_tokens, sc, folded, stream);
    default: return launch_ngram_search_n<0>(prob, walk, batch, max_tokens, sc, folded, stream);
  }
#endif
}

}  // namespace fdspec
