// The n-gram search shared by ngram_match and hybrid_mtp_ngram (CUDA side). No Paddle include.
//
// The host search (ngram_search.h) tries n = max_n .. min_n and, for each n, the prompt before the
// generated tokens, taking the leftmost productive window. The kernel computes the same answer in
// one pass: with l(e) the common-suffix length of haystack[.. e] and the pattern, the answer is the
// productive e that maximises (l(e), haystack is the prompt, -e). Each position is examined once,
// from registers (streaming form: one block per slot, two 16-byte vectors per thread and round) or
// from a shared-memory ring of cp.async tiles (clusters of blocks per slot for small batches with
// long rows, and rows over kNgramRingTokens); the scan stops once a window of the largest possible
// size is found. When the walk-free bound holds, each slot's first block writes the slot's outputs
// and the walk kernel exits before its wait. Design: docs/design/ngram.md.
#pragma once

#include <cstdint>

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include "common/cuda_utils.cuh"
#include "common/fdspec_common.h"
#include "ngram_common/ngram_search.h"
#include "ngram_common/ngram_walk.h"

namespace fdspec {

// The search result of one slot, as handed to Problem::store: kNoMatch, or the start of the
// continuation inside its haystack with kSeg1Bit set when that haystack is the second one. The op
// keeps it in slot-private memory it owns (a seq_lens_this_time entry), so it needs no workspace.
constexpr int32_t kNoMatch = -1;
constexpr int32_t kSeg1Bit = static_cast<int32_t>(kMaxHaystackLen);

struct SearchSlot {
  NgramHaystacks h;
  WalkSlot walk;  // the slot as the walk sees it: its outputs when the batch is walk-free
  int cap = 0;    // largest n tried: min(max_n, pattern_avail)
  int min_n = 1;
  bool search = false;  // false: store kNoMatch (if record is set) without searching
  bool record = false;  // false: the slot takes no part, Problem::store is not called
};

__device__ __forceinline__ unsigned long long ngram_key(int len, bool in_prompt, int64_t e) {
  return (static_cast<unsigned long long>(len) << 40) |
         (static_cast<unsigned long long>(in_prompt) << 32) |
         static_cast<unsigned long long>(0xFFFFFFFFu - static_cast<uint32_t>(e));
}

// Common-suffix length of the pattern and the tokens that `back(k)` reads (the token k places
// before the window's end), up to `cap`, the first kFirst of them known to match. kMaxN > 0 unrolls
// the comparison for the common small sizes.
template <int kMaxN, int kFirst, class Back>
__device__ __forceinline__ int common_suffix(Back back, const int64_t* __restrict__ pat, int cap) {
  constexpr int kBound = kMaxN > 0 ? kMaxN : kMaxNgramSize;
  constexpr int kUnroll = kMaxN > 0 ? kMaxN : 1;
  int l = kFirst;
#pragma unroll kUnroll
  for (int k = kFirst; k < kBound; ++k) {
    if (k >= cap) break;
    if (back(k) != pat[k]) break;
    ++l;
  }
  return l;
}

// Common-suffix length of hay[.. e] and the pattern, up to `cap`. Positions at or after tile_base
// are read from the shared-memory tile, earlier ones (only a partial match that crosses the tile
// start gets there) from global memory.
template <int kMaxN>
__device__ __forceinline__ int suffix_match(const int64_t* __restrict__ tile, int tile_base,
                                            const int64_t* __restrict__ hay, int e,
                                            const int64_t* __restrict__ pat, int cap) {
  const auto back = [&](int k) {
    const int pos = e - k;
    return pos >= tile_base ? tile[pos - tile_base] : __ldg(hay + pos);
  };
  return common_suffix<kMaxN, 0>(back, pat, cap);
}

__device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const unsigned long long o = __shfl_xor_sync(0xFFFFFFFFu, v, off);
    v = o > v ? o : v;
  }
  return v;
}

// Shape of the search: 1024 threads x 4 tokens = 32 KB tiles, kNgramSearchStages of them in a ring
// of shared memory filled by cp.async (16-byte copies where the haystack allows), so that a block
// keeps up to 96 KB of loads in flight while it examines one tile, with 32 warps to hide the
// shared-memory latency of the examination. One block per SM (the ring takes 128 KB).
constexpr int kNgramSearchThreads = 1024;
constexpr int kNgramSearchTok = 4;
constexpr int kNgramSearchStages = 4;
constexpr int kNgramSearchTile = kNgramSearchThreads * kNgramSearchTok;
// Most blocks that search one slot together (a thread-block cluster, one block per SM).
constexpr int kNgramMaxCluster = 8;
// The streaming form (one block per slot, no cluster): each thread loads kNgramStreamVecs 16-byte
// vectors (two tokens each) per round straight into registers, the next round's loads in flight
// while it examines this one. Blocks of 1024 threads (32 KB per round) where the rows are long and
// the slots fit on the SMs at once, else of 512 (16 KB per round, two blocks per SM): see
// ngram_stream_threads.
constexpr int kNgramStreamVecs = 2;
__device__ __forceinline__ int64_t ngram_token_lo(const uint4& v) {
  return static_cast<int64_t>((static_cast<uint64_t>(v.y) << 32) | v.x);
}
__device__ __forceinline__ int64_t ngram_token_hi(const uint4& v) {
  return static_cast<int64_t>((static_cast<uint64_t>(v.w) << 32) | v.z);
}

// One haystack as the streaming form reads it: 16-byte vectors counted from the haystack's start
// rounded down to 16 bytes (`off` = 0 or 1 token before it); vector J holds positions 2J - off and
// 2J - off + 1. Round k of the haystack is vectors [k * kThreads * kVecs, (k + 1) * kThreads *
// kVecs).
struct StreamHay {
  const int64_t* hay;
  int ends;  // candidate window ends: positions [0, ends)
  int off;
  int rounds;
};
template <int kThreads>
__device__ __forceinline__ StreamHay stream_hay(const int64_t* hay, int ends) {
  StreamHay h;
  h.hay = hay;
  h.ends = ends;
  h.off = (reinterpret_cast<uintptr_t>(hay) & 15) != 0 ? 1 : 0;
  h.rounds = ends > 0 ? ceil_div(ends + h.off, 2 * kThreads * kNgramStreamVecs) : 0;
  return h;
}
// Loads this thread's vectors of round k of h: whole vectors where both tokens are candidate
// positions, single tokens at the edges, nothing outside [0, ends) (those register halves are left
// as they are and never examined).
template <int kThreads>
__device__ __forceinline__ void stream_load(const StreamHay h, int k,
                                            uint4 (&v)[kNgramStreamVecs]) {
#pragma unroll
  for (int u = 0; u < kNgramStreamVecs; ++u) {
    const int J = (k * kNgramStreamVecs + u) * kThreads + static_cast<int>(threadIdx.x);
    const int p0 = 2 * J - h.off;
    if (p0 >= 0 && p0 + 1 < h.ends) {
      v[u] = load16_nc_now(h.hay + p0);  // in order: a round's loads all leave together
    } else {
      if (p0 >= 0 && p0 < h.ends) {
        const uint64_t t = static_cast<uint64_t>(__ldg(h.hay + p0));
        v[u].x = static_cast<uint32_t>(t);
        v[u].y = static_cast<uint32_t>(t >> 32);
      }
      if (p0 + 1 >= 0 && p0 + 1 < h.ends) {
        const uint64_t t = static_cast<uint64_t>(__ldg(h.hay + p0 + 1));
        v[u].z = static_cast<uint32_t>(t);
        v[u].w = static_cast<uint32_t>(t >> 32);
      }
    }
  }
}

// The blocks of one slot's cluster: C of them (1 without a cluster launch) and this block's rank.
struct ClusterPlace {
  unsigned size = 1, rank = 0;
};
__device__ __forceinline__ ClusterPlace ngram_cluster_place() {
  ClusterPlace c;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("mov.u32 %0, %%cluster_nctarank;\n\tmov.u32 %1, %%cluster_ctarank;"
      : "=r"(c.size), "=r"(c.rank));
#endif
  return c;
}
// Every thread of every block of the cluster arrives, then waits for all (release / acquire at
// cluster scope: shared-memory stores to other blocks before it are visible to their reads after
// it). Not `.aligned`: it is reached from code whose control flow depends on the thread.
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

// Asks L2 for the first `bytes` (at most) of row[0 .. n): one bulk prefetch, from row rounded down
// to 16 bytes (that line belongs to the row or to the one before it), never past the row's end. A
// hint without a completion: the loads that follow find the bytes in L2 or on their way.
__device__ __forceinline__ void ngram_prefetch_row(const int64_t* row, int64_t n, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uintptr_t a = reinterpret_cast<uintptr_t>(row) & ~uintptr_t{15};
  const int64_t avail =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(row + n) - a) & ~int64_t{15};
  const unsigned size = static_cast<unsigned>(avail < bytes ? avail : bytes);
  if (size > 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"(size) : "memory");
#endif
}

// Copies 16 bytes from global to shared memory asynchronously (part of the thread's current group).
// Through L1 (.ca): the L2-only form (.cg) measured slower on the bandwidth-bound rows.
__device__ __forceinline__ void ngram_copy16(int64_t* dst, const int64_t* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
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

// Common-suffix length of hay[.. e] and the pattern, up to `cap`, given hay[e] == pat[0] (the
// streaming form: the earlier tokens are read from global memory, where they mostly hit L1).
template <int kMaxN>
__device__ __forceinline__ int stream_suffix(const int64_t* __restrict__ hay, int e,
                                             const int64_t* __restrict__ pat, int cap) {
  return common_suffix<kMaxN, 1>([&](int k) { return __ldg(hay + e - k); }, pat, cap);
}

// The search of `batch` slots: C blocks per slot (a cluster; C = 1 when the batch fills the GPU),
// the slot's tiles dealt round-robin to them.
//
// Problem provides:
// - SearchSlot slot(b): what to search, and the slot as the walk sees it (every thread calls it);
// - bool threshold_may_bind(), int64_t give_up_term(b, j), bool gives_up(b, total): a slot with
//   gives_up(b, sum over j of give_up_term(b, j)) is sure to be dropped by the budget walk and is
//   not searched; threshold_may_bind() false (from the parameters alone) says no slot can be, and
//   no term is read. The terms are read in the same round trip as the slot, so the test costs a
//   barrier.
// - const int64_t* row(b), int64_t row_len(): slot b's row, whose first tokens are the first
// haystack's
//   (the prompt), and int prefetch: the bytes of it to request into L2 at the start (0: none; set
//   by launch_ngram_op);
// - store(b, code) (lane 0 of warp 0 of the slot's first block, once per recorded slot, after a
//   barrier that follows every thread's reads) keeps the result;
// - int64_t threshold(), free_term(j), and FreeIn free_in(j) / free_of(j, in), the same term split
//   into its loads and its arithmetic: the walk-free bound's terms (ngram_walk_free in
//   ngram_walk.h, loaded in the same round trip as the rest by the slot's first block). When the
//   bound holds, the walk keeps every slot's untruncated drafts: the block writes the slot's final
//   outputs itself (ngram_walk_finish on WalkOutputs outputs() and SearchSlot::walk), for every
//   slot, recorded or not. A term must be the same for every value the op may have left in memory
//   by then (other slots' blocks run concurrently): every block of the batch, and the walk kernel,
//   reach the same decision.
//
// The haystacks (prompt, then the second one) form one sequence of rounds. kStream: one block per
// slot (C = 1) loads each round into registers (stream_load), two rounds in flight. Otherwise block
// r of the cluster streams tiles r, r + C, r + 2C, ... through its shared-memory ring of kStages
// tiles. Each haystack token is loaded once: O(len0 + len1) loads per slot. The scan stops once a
// key of the largest possible size is known: windows of one size are ordered by position, so no
// later tile can beat it. Positions, tiles and rounds are int: a haystack has fewer than
// kMaxHaystackLen = 2^30 tokens. In a cluster, the blocks publish their best key so far to one
// another at each round's cluster barrier (double-buffered, so that a round's stores never meet a
// read of the round before), so they all stop at the same round; at the end block 0 takes the best
// of the C final keys. No atomic crosses blocks.
template <int kMaxN, int kStages, bool kStream, int kThreads, class Problem>
__global__ void __launch_bounds__(kThreads, kNgramSearchThreads / kThreads)
    ngram_search_kernel(Problem prob) {
  constexpr int kTile = kNgramSearchTile;
  extern __shared__ __align__(16) int64_t ring[];  // [kStages][kTile]
  __shared__ int64_t pat[kMaxNgramSize];
  __shared__ int64_t warp_terms[kThreads / 32];
  __shared__ int64_t warp_bound[kThreads / 32];
  __shared__ unsigned long long best;
  __shared__ unsigned long long round_keys[2][kNgramMaxCluster];  // written by the cluster's blocks
  __shared__ unsigned long long final_keys[kNgramMaxCluster];  // block 0's: each block's last key
  __shared__ WalkSlot
      fin;  // the slot's walk facts, for finish (kept out of registers during the scan)

  const ClusterPlace place = ngram_cluster_place();
  const unsigned C = place.size, rank = place.rank;
  const int64_t b = blockIdx.x / C;
  // Launched as a programmatic dependent of the work before it: nothing it writes is read before
  // the wait. The walk kernel may launch only after it (it reads the inputs before its own wait).
  wait_for_primary_grid();
  allow_dependent_launch();
  // The slot's row is wanted before its address is known for sure (its facts are a DRAM round trip
  // away when the caches are cold): where the host found every slot sure to search
  // (Problem::prefetch), its first bytes are requested into L2 now.
  if (prob.prefetch > 0 && rank == 0 && threadIdx.x == 0) {
    ngram_prefetch_row(prob.row(b), prob.row_len(), prob.prefetch);
  }

  // One round trip: this thread's share of the give-up sum, the slot's own facts and, in the slot's
  // first block (it alone writes the slot's outputs) where the host's Problem::try_free allows it,
  // the inputs of this thread's term of the walk-free bound (a slot per thread). Every load is
  // issued before the first tile request: a load issued after the requests waits behind them. The
  // bound's terms are computed once the tiles are on their way.
  const bool may_bind = prob.threshold_may_bind();
  const int64_t batch = prob.batch();
  const bool bounds = rank == 0 && prob.try_free && batch <= kWalkFreeMaxBatch;  // else no overflow
  int64_t term = 0;
  if (may_bind) {
    for (int64_t j = threadIdx.x; j < batch; j += kThreads) term += prob.give_up_term(b, j);
  }
  const bool early = bounds && batch <= kThreads;  // else (never in one wave) read when summed
  typename Problem::FreeIn free_in{};
  if (early && threadIdx.x < batch) free_in = prob.free_in(threadIdx.x);
  const SearchSlot s = prob.slot(b);
  if (bounds && threadIdx.x == 0) fin = s.walk;
  // This thread's share of the bound, folded into warp_bound (read after a later barrier).
  bool summed = false;
  auto sum_bound = [&]() {
    int64_t bound = 0;
    if (early) {
      if (threadIdx.x < batch) bound = prob.free_of(threadIdx.x, free_in);
    } else {
      for (int64_t j = threadIdx.x; j < batch; j += kThreads) bound += prob.free_term(j);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) bound += __shfl_xor_sync(0xFFFFFFFFu, bound, off);
    if ((threadIdx.x & 31) == 0) warp_bound[threadIdx.x / 32] = bound;
    summed = true;
  };
  // Warp 0 of the slot's first block, after a barrier that follows the warp_bound stores and every
  // thread's reads of the slot: the walk-free test (a lane per warp's share of the bound), then
  // either the slot's final outputs, as the walk writes them (ngram_walk_finish, the drafts copied
  // by a lane each), or the search result for the walk (Problem::store, recorded slots only).
  auto finish = [&](int32_t code) {
    const int lane = threadIdx.x & 31;
    int64_t U = summed && lane < kThreads / 32 ? warp_bound[lane] : 0;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) U += __shfl_xor_sync(0xFFFFFFFFu, U, off);
    if (!(summed && ngram_walk_free(batch, prob.threshold(), U))) {
      if (lane == 0 && s.record) prob.store(b, code);
      return;
    }
    const WalkSlot w = fin;
    int64_t kept = 0;
    const int64_t* src = nullptr;
    if (w.processed) {
      const NgramMatch m = decode_search_result(code, s.h);
      src = m.src;
      kept = max_of<int64_t>(min_of<int64_t>(m.count, w.budget), 0);
    }
    ngram_walk_finish(prob.outputs(), b, w, src, kept, lane, 32);
  };
  // finish with the match code of the search's best key (ngram_key's inverse, the length dropped).
  auto finish_best = [&](bool run, unsigned long long result) {
    int32_t code = kNoMatch;
    if (run && result != 0) {
      const bool in_prompt = (result >> 32) & 1;
      const int64_t e = 0xFFFFFFFFu - static_cast<uint32_t>(result);
      code = static_cast<int32_t>(e + 1) | (in_prompt ? 0 : kSeg1Bit);
    }
    finish(code);
  };
  if (!s.record) {  // the same for every block of the cluster: none touches another's memory
    if (bounds) {
      sum_bound();
      __syncthreads();  // the warp sums, and every thread's reads before the slot's outputs change
      if (threadIdx.x < 32) finish(kNoMatch);
    }
    return;
  }

  if constexpr (kStream) {
    const StreamHay h0 =
        stream_hay<kThreads>(s.h.seg0, static_cast<int>(max_of<int64_t>(s.h.len0 - 1, 0)));
    const StreamHay h1 =
        stream_hay<kThreads>(s.h.seg1, static_cast<int>(max_of<int64_t>(s.h.len1 - 1, 0)));
    const int rounds = h0.rounds + h1.rounds;
    const bool searching = s.search && s.cap >= s.min_n;
    int64_t pat_last = 0;
    if (searching) {
      int64_t pat_tok = 0;
      if (threadIdx.x < s.cap) pat_tok = s.h.pattern_last[-static_cast<int64_t>(threadIdx.x)];
      pat_last = s.h.pattern_last[0];
      if (threadIdx.x < s.cap) pat[threadIdx.x] = pat_tok;
    }
    if (threadIdx.x == 0) best = 0;
    bool run = searching;
    if (searching && may_bind) run = !prob.gives_up(b, block_sum<kThreads>(term, warp_terms));
    if (bounds && !(searching && may_bind && !run)) sum_bound();

    auto load = [&](int r, uint4(&v)[kNgramStreamVecs]) {
      if (r < h0.rounds) {
        stream_load<kThreads>(h0, r, v);
      } else {
        stream_load<kThreads>(h1, r - h0.rounds, v);
      }
    };
    uint4 va[kNgramStreamVecs], vb[kNgramStreamVecs];
    if (run && rounds > 0) load(0, va);
    bool found = false;
    auto scan = [&](int r, const uint4(&v)[kNgramStreamVecs]) {
      const bool first = r < h0.rounds;
      const StreamHay h = first ? h0 : h1;
      const int k = first ? r : r - h0.rounds;
      unsigned long long key = 0;
#pragma unroll
      for (int u = 0; u < kNgramStreamVecs; ++u) {
        const int J = (k * kNgramStreamVecs + u) * kThreads + static_cast<int>(threadIdx.x);
        const int p0 = 2 * J - h.off;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int e = p0 + half;
          const int64_t tok = half ? ngram_token_hi(v[u]) : ngram_token_lo(v[u]);
          if (tok == pat_last && e >= 0 && e < h.ends) {
            const int l = stream_suffix<kMaxN>(h.hay, e, pat, min_of(s.cap, e + 1));
            if (l >= s.min_n) {
              const unsigned long long kk = ngram_key(l, first, e);
              key = kk > key ? kk : key;
            }
          }
        }
      }
      if (__any_sync(0xFFFFFFFFu, key != 0)) {
        key = warp_max_u64(key);
        if ((threadIdx.x & 31) == 0 && key != 0) atomicMax(&best, key);
        found = found || static_cast<int>(key >> 40) >= s.cap;
      }
    };
    // One barrier per round, as in the ring form: the pattern is visible, and the stop decision is
    // the block's. The next round's loads are in flight while this one is examined (two register
    // buffers, used in turn).
    for (int r = 0; run && r < rounds; r += 2) {
      if (__syncthreads_or(found)) break;
      if (r + 1 < rounds) load(r + 1, vb);
      scan(r, va);
      if (r + 1 >= rounds) break;
      if (__syncthreads_or(found)) break;
      if (r + 2 < rounds) load(r + 2, va);
      scan(r + 1, vb);
    }
    __syncthreads();  // every warp's atomicMax is done
    if (threadIdx.x < 32) {
      const unsigned long long result = best;
      finish_best(run, result);
    }
  } else {
    // Candidate window ends are e in [0, len - 2]; tile ti covers positions [base, base + kTile).
    const int ends0 = static_cast<int>(max_of<int64_t>(s.h.len0 - 1, 0));
    const int ends1 = static_cast<int>(max_of<int64_t>(s.h.len1 - 1, 0));
    const int tiles0 = ceil_div(ends0, kTile);
    const int tiles = tiles0 + ceil_div(ends1, kTile);
    const int rounds =
        ceil_div(tiles, static_cast<int>(C));  // this block's tiles: r = 0 .. rounds - 1
    const bool searching = s.search && s.cap >= s.min_n;

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
    // Every thread commits one group per round, even an empty one, so that "all but the newest
    // kStages - 1 groups are complete" always means "round r's tile has landed". A tile whose first
    // token is 16-byte aligned (the base is even) moves in 16-byte copies, the odd last token
    // alone.
    auto issue = [&](int r) {
      const int ti = r * static_cast<int>(C) + static_cast<int>(rank);
      if (r < rounds && ti < tiles) {
        const TileView v = view(ti);
        int64_t* dst = ring + (r % kStages) * kTile;
        const int64_t* src = v.hay + v.base;
        if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
#pragma unroll
          for (int k = 0; k < kNgramSearchTok / 2; ++k) {
            const int i = 2 * (threadIdx.x + k * kThreads);
            if (i + 1 < v.n) {
              ngram_copy16(dst + i, src + i);
            } else if (i < v.n) {
              __pipeline_memcpy_async(dst + i, src + i, sizeof(int64_t));
            }
          }
        } else {
#pragma unroll
          for (int k = 0; k < kNgramSearchTok; ++k) {
            const int i = threadIdx.x + k * kThreads;
            if (i < v.n) __pipeline_memcpy_async(dst + i, src + i, sizeof(int64_t));
          }
        }
      }
      __pipeline_commit();
    };

    // The tiles are requested once the slot is known to search: at once when the threshold cannot
    // bind, else after the give-up test (a batch that gives up reads no haystack, and its blocks
    // need not wait for copies before they exit). The pattern is loaded before the first tile
    // request (behind it, it would wait for the copies).
    int64_t pat_tok = 0, pat_last = 0;
    if (searching) {
      if (threadIdx.x < s.cap) pat_tok = s.h.pattern_last[-static_cast<int64_t>(threadIdx.x)];
      pat_last = s.h.pattern_last[0];
      if (!may_bind) issue(0);
      if (threadIdx.x < s.cap) pat[threadIdx.x] = pat_tok;
    }
    if (threadIdx.x == 0) best = 0;
    if (threadIdx.x < kNgramMaxCluster) round_keys[0][threadIdx.x] = 0;
    bool run = searching;
    if (searching && may_bind) run = !prob.gives_up(b, block_sum<kThreads>(term, warp_terms));
    if (run) {
      for (int st = may_bind ? 0 : 1; st < kStages - 1; ++st) issue(st);
    }
    // A slot that gives up proves the batch is not walk-free (U >= its S + budget + L > T - 1), so
    // its blocks skip the bound; any other first block sums it now, its loads overlapping the
    // tiles'.
    if (bounds && !(searching && may_bind && !run)) sum_bound();

    // Whether this warp has found a key of the largest size (the same in all its lanes). The stop
    // test ORs it over the block in the round's barrier: no read of `best` races with its reset or
    // with the other warps' atomicMax (a volatile or a plain read of `best` there measured slower).
    bool found = false;
    for (int r = 0; run && r < rounds; ++r) {
      __pipeline_wait_prior(kStages - 2);
      // One barrier per round: the tile is visible to the block, everyone is done with the previous
      // one (whose ring slot is refilled below), and the stop decision is the same for the whole
      // block (and cluster).
      bool stop;
      if (C == 1) {
        stop = __syncthreads_or(found);
      } else {
        // The block's best so far (an atomic read: warps may still fold the last round in; any
        // value it returns is a key found, which is all the stop rule needs). Not in the first
        // round: no block may touch another's shared memory before the first cluster barrier, which
        // proves that every block of the cluster has started; each block zeroed its own first
        // buffer.
        if (r > 0 && threadIdx.x < C) {
          ngram_cluster_store(&round_keys[r & 1][rank], threadIdx.x, atomicAdd(&best, 0ull));
        }
        ngram_cluster_sync();
        unsigned long long m = 0;
        for (unsigned k = 0; k < C; ++k) m = max_of(m, round_keys[r & 1][k]);
        stop = static_cast<int>(m >> 40) >= s.cap;
      }
      if (stop) break;
      issue(r + kStages - 1);

      const int ti = r * static_cast<int>(C) + static_cast<int>(rank);
      if (ti >= tiles) continue;
      const TileView v = view(ti);
      const int64_t* tile = ring + (r % kStages) * kTile;
      unsigned long long key = 0;
      // Almost every position fails on the pattern's last token: test that first, from registers,
      // and measure the full common suffix only on a hit. Positions past n hold stale tokens; the
      // hit path discards them.
      int64_t tok[kNgramSearchTok];
#pragma unroll
      for (int k = 0; k < kNgramSearchTok; ++k) tok[k] = tile[threadIdx.x + k * kThreads];
#pragma unroll
      for (int k = 0; k < kNgramSearchTok; ++k) {
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
    // Every warp's atomicMax is done. The tiles still in flight after a stop land while warp 0
    // writes the outputs: each thread waits for its own copies only before it exits (no copy may
    // still target shared memory then), and nothing reads the ring after the loop.
    __syncthreads();
    unsigned long long result = best;
    if (C > 1) {
      if (!run || rounds == 0) ngram_cluster_sync();  // no round did: every block has started now
      if (threadIdx.x == 0) ngram_cluster_store(&final_keys[rank], 0, result);
      ngram_cluster_sync();  // also keeps every block alive until the others' stores to it are done
      if (rank != 0) {
        __pipeline_wait_prior(0);
        return;
      }
      for (unsigned k = 0; k < C; ++k) result = max_of(result, final_keys[k]);
    }
    if (threadIdx.x < 32) {
      finish_best(run, result);
    }
    __pipeline_wait_prior(0);
  }
}

// Blocks per slot: more than one only while the clusters surely fit on the GPU at once (B x C <=
// half the SM count: a cluster's blocks must share a GPU processing cluster, and with one block per
// SM the GPCs do not seat every pairing of the SMs) and each block gets at least two tiles of the
// widest haystack (`max_tokens`).
inline int ngram_search_cluster(int64_t batch, int64_t max_tokens, int sms) {
  int c = 1;
  while (c < kNgramMaxCluster && batch * c * 2 * 2 <= sms &&
         int64_t{c} * 2 * 2 * kNgramSearchTile <= max_tokens) {
    c *= 2;
  }
  return c;
}

// Threads of a streaming block: 1024 (two rounds of 32 KB in flight per slot) where every block is
// resident at once (B <= SMs; a block takes the SM's registers) and the rows are long, else 512
// (two blocks per SM, so that up to 2 x SMs slots stream at once; fewer warps in each barrier and
// reduction). Each form measured faster on its side of this width, warm and cold.
constexpr int64_t kNgramStreamWideTokens = 16384;
// Rows longer than this, one block per slot and every block resident (B <= SMs), stream through the
// shared-memory ring instead, which streams them faster (shorter rows stream faster from
// registers). Loads that bypass L1 (ld.global.cg, .L1::no_allocate) or ask for 256-byte L2 fetches
// did not change this.
constexpr int64_t kNgramRingTokens = 65536;
inline int ngram_stream_threads(int64_t batch, int64_t max_tokens, int sms) {
  return batch <= sms && max_tokens > kNgramStreamWideTokens ? 1024 : 512;
}

// The ring's dynamic shared memory per block (the streaming form has none).
constexpr size_t kNgramRingSmem = sizeof(int64_t) * kNgramSearchTile * kNgramSearchStages;

template <int kMaxN, int kStages, bool kStream, int kThreads, class Problem>
cudaError_t launch_ngram_search_grid(const Problem& prob, int64_t batch, int c,
                                     cudaStream_t stream) {
  auto kernel = ngram_search_kernel<kMaxN, kStages, kStream, kThreads, Problem>;
  constexpr size_t smem = kStream ? 0 : sizeof(int64_t) * kNgramSearchTile * kStages;
  // The ring is larger than the default 48 KB of dynamic shared memory (ngram_search_shape checked
  // that it fits the device). A host-side attribute (no stream work), fine under graph capture.
  cudaError_t err = allow_dynamic_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  KernelFeatures f;
  err = kernel_features(kernel, &f);
  if (err != cudaSuccess) return err;
  const bool pdl = f.pdl;
  if (!f.clusters) c = 1;  // the shape was planned for this image's features: a guard only
  cudaLaunchAttribute attrs[2] = {};
  unsigned n = 0;
  if (c > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = static_cast<unsigned>(c);
    attrs[n].val.clusterDim.y = attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl) {  // a programmatic dependent of the work before it (the kernel waits for it first)
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  const cudaLaunchConfig_t cfg = {
      dim3(static_cast<unsigned>(batch * c)), dim3(kThreads), smem, stream, attrs, n};
  return cudaLaunchKernelEx(&cfg, kernel, prob);
}

// The launch rule of launch_ngram_search_n: whether the search uses the shared-memory ring
// (clusters, and long rows while every block is resident) and, if not, the streaming block size.
struct NgramSearchShape {
  int cluster = 1;
  bool ring = false;
  int threads = kNgramSearchThreads;
};
// `max_tokens` bounds the tokens of a slot's two haystacks; `f`: the search kernels' features (one
// image: every instantiation has the same). Without room for the ring (an sm_86 / sm_89 device's 99
// KB per block) the streaming form takes every row, clusters included, with the same results.
inline NgramSearchShape ngram_search_shape(int64_t batch, int64_t max_tokens,
                                           const DeviceFacts& dev, const KernelFeatures& f) {
  NgramSearchShape sh;
  const bool ring_fits = ngram_ring_fits(kNgramRingSmem, dev);
  sh.cluster = f.clusters && ring_fits ? ngram_search_cluster(batch, max_tokens, dev.sms) : 1;
  sh.ring = ring_fits && (sh.cluster > 1 || (batch <= dev.sms && max_tokens > kNgramRingTokens));
  if (!sh.ring) sh.threads = ngram_stream_threads(batch, max_tokens, dev.sms);
  return sh;
}
// Whether every search block of shape `sh` is resident at once (one block per SM at most for the
// ring and the 1024-thread form, two for the 512-thread form): the walk-free test pays only then
// (launch_ngram_op).
inline bool ngram_search_one_wave(int64_t batch, const NgramSearchShape& sh,
                                  const DeviceFacts& dev) {
  const int per_sm = sh.ring ? 1 : kNgramSearchThreads / sh.threads;
  return batch * sh.cluster <= int64_t{dev.sms} * per_sm;
}

// Bytes of each slot's row that its search block requests into L2 before it knows the slot's facts
// (ngram_prefetch_row), so that the row's first rounds come from DRAM while the facts do: only
// where every decoding slot is sure to search (a threshold that cannot bind: no slot gives up,
// which would read nothing) and in the 1024-thread streaming form (B <= SMs, rows of 16k..64k
// tokens). It shortens the cold late and no-hit rows (warm unchanged; a slot that stops at once
// wastes the bytes). 256 KB and the whole row were no better; with a binding threshold, on the
// ring, at large batches (DRAM already busy) and in the 512-thread form it cost more than it saved.
constexpr int kNgramPrefetchBytes = 131072;
inline int ngram_prefetch_bytes(const NgramSearchShape& sh, bool threshold_may_bind,
                                const KernelFeatures& f) {
  return f.hopper_loads && !threshold_may_bind && !sh.ring && sh.threads == 1024
             ? kNgramPrefetchBytes
             : 0;
}

template <int kMaxN, class Problem>
cudaError_t launch_ngram_search_n(const Problem& prob, int64_t batch, const NgramSearchShape& sh,
                                  cudaStream_t stream) {
  // Clusters (then B x C <= SMs / 2) and long rows with every block resident: one ring block per
  // SM.
  if (sh.ring) {
    return launch_ngram_search_grid<kMaxN, kNgramSearchStages, false, kNgramSearchThreads>(
        prob, batch, sh.cluster, stream);
  }
  return sh.threads == 1024 ? launch_ngram_search_grid<kMaxN, 0, true, 1024>(prob, batch, 1, stream)
                            : launch_ngram_search_grid<kMaxN, 0, true, 512>(prob, batch, 1, stream);
}

// Launches the search over `batch` slots, in the shape ngram_search_shape chose, with the compare
// loop specialised for the usual sizes.
template <class Problem>
cudaError_t launch_ngram_search(const Problem& prob, int64_t batch, int max_n,
                                const NgramSearchShape& sh, cudaStream_t stream) {
  switch (max_n) {
    case 1:
      return launch_ngram_search_n<1>(prob, batch, sh, stream);
    case 2:
      return launch_ngram_search_n<2>(prob, batch, sh, stream);
    case 3:
      return launch_ngram_search_n<3>(prob, batch, sh, stream);
    case 4:
      return launch_ngram_search_n<4>(prob, batch, sh, stream);
    case 5:
      return launch_ngram_search_n<5>(prob, batch, sh, stream);
    default:
      return launch_ngram_search_n<0>(prob, batch, sh, stream);
  }
}

}  // namespace fdspec
