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
#pragma once

#include <cstdint>

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include "common/cuda_utils.cuh"
#include "common/fdspec_common.h"
#include "ngram_common/ngram_search.h"

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
__device__ __forceinline__ int suffix_match(const int64_t* __restrict__ tile, int64_t tile_base,
                                            const int64_t* __restrict__ hay, int64_t e,
                                            const int64_t* __restrict__ pat, int cap) {
  constexpr int kBound = kMaxN > 0 ? kMaxN : kMaxNgramSize;
  constexpr int kUnroll = kMaxN > 0 ? kMaxN : 1;
  int l = 0;
#pragma unroll kUnroll
  for (int k = 0; k < kBound; ++k) {
    if (k >= cap) break;
    const int64_t pos = e - k;
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
// shared memory filled by cp.async, so that a block keeps up to 96 KB of loads in flight while it
// examines one tile, with 32 warps to hide the shared-memory latency of the examination. One block
// per slot must draw about 50 GB/s from its SM for a batch of 64 slots to run at the device's
// memory bandwidth.
constexpr int kNgramSearchThreads = 1024;
constexpr int kNgramSearchTok = 4;
constexpr int kNgramSearchStages = 4;
constexpr int kNgramSearchTile = kNgramSearchThreads * kNgramSearchTok;
constexpr size_t kNgramSearchSmem = sizeof(int64_t) * kNgramSearchTile * kNgramSearchStages;

// One block per slot. Problem::slot(b) says what to search; Problem::gives_up(b) (called by every
// thread, may use the whole block) may skip the search of a slot that the budget walk will surely
// drop; Problem::store(b, code) (thread 0, once per recorded slot, after a barrier that follows every
// thread's slot() and gives_up() reads) keeps the result. The haystacks (prompt, then the second one) form one sequence of tiles that stream through
// the ring. Each haystack token is loaded once: O(len0 + len1) loads per slot. The scan stops once
// the best key has the largest possible size: windows of one size are ordered by position, so no
// later tile can beat it.
template <int kMaxN, class Problem>
__global__ void __launch_bounds__(kNgramSearchThreads) ngram_search_kernel(Problem prob) {
  constexpr int kThreads = kNgramSearchThreads;
  constexpr int kTile = kNgramSearchTile;
  constexpr int kStages = kNgramSearchStages;
  extern __shared__ int64_t ring[];  // [kStages][kTile]
  __shared__ int64_t pat[kMaxNgramSize];
  __shared__ unsigned long long best;

  allow_dependent_launch();  // the op's next kernel may launch now and wait for this grid
  const int64_t b = blockIdx.x;
  const SearchSlot s = prob.slot(b);
  if (!s.record) return;

  // Candidate window ends are e in [0, len - 2]; tile ti covers positions [base, base + kTile).
  const int64_t ends0 = max_of<int64_t>(s.h.len0 - 1, 0);
  const int64_t ends1 = max_of<int64_t>(s.h.len1 - 1, 0);
  const int64_t tiles0 = ceil_div<int64_t>(ends0, kTile);
  const int64_t tiles = tiles0 + ceil_div<int64_t>(ends1, kTile);
  const bool searching = s.search && s.cap >= s.min_n;

  struct TileView {
    const int64_t* hay;
    int64_t base, n;
    bool first;
  };
  auto view = [&](int64_t ti) {
    TileView v;
    v.first = ti < tiles0;
    v.hay = v.first ? s.h.seg0 : s.h.seg1;
    v.base = (v.first ? ti : ti - tiles0) * kTile;
    v.n = min_of<int64_t>(kTile, (v.first ? ends0 : ends1) - v.base);
    return v;
  };
  // Every thread commits one group per tile, even an empty one, so that "all but the newest
  // kStages - 1 groups are complete" always means "tile ti has landed".
  auto issue = [&](int64_t ti) {
    if (ti < tiles) {
      const TileView v = view(ti);
      int64_t* dst = ring + (ti % kStages) * kTile;
#pragma unroll
      for (int k = 0; k < kNgramSearchTok; ++k) {
        const int i = threadIdx.x + k * kThreads;
        if (i < v.n) __pipeline_memcpy_async(dst + i, v.hay + v.base + i, sizeof(int64_t));
      }
    }
    __pipeline_commit();
  };

  // The first tile is requested before the give-up test, whose reductions then overlap it; the
  // others only once the slot is known to search (a batch that gives up reads almost nothing).
  if (searching) {
    issue(0);
    if (threadIdx.x < s.cap) pat[threadIdx.x] = s.h.pattern_last[-static_cast<int64_t>(threadIdx.x)];
  }
  if (threadIdx.x == 0) best = 0;
  const bool run = searching && !prob.gives_up(b);
  if (run) {
    for (int st = 1; st < kStages - 1; ++st) issue(st);
  }

  const int64_t pat_last = run ? s.h.pattern_last[0] : 0;
  for (int64_t ti = 0; run && ti < tiles; ++ti) {
    __pipeline_wait_prior(kStages - 2);
    // One barrier per tile: tile ti is visible to all, everyone is done with tile ti - 1 (whose slot
    // is refilled below), and the stop decision is the same for the whole block.
    if (__syncthreads_or(static_cast<int>(best >> 40) >= s.cap)) break;
    issue(ti + kStages - 1);

    const TileView v = view(ti);
    const int64_t* tile = ring + (ti % kStages) * kTile;
    unsigned long long key = 0;
    // Almost every position fails on the pattern's last token: test that first, from registers,
    // and measure the full common suffix only on a hit. Positions past n hold stale tokens; the hit
    // path discards them.
    int64_t tok[kNgramSearchTok];
#pragma unroll
    for (int k = 0; k < kNgramSearchTok; ++k) tok[k] = tile[threadIdx.x + k * kThreads];
#pragma unroll
    for (int k = 0; k < kNgramSearchTok; ++k) {
      const int i = threadIdx.x + k * kThreads;
      if (tok[k] == pat_last && i < v.n) {
        const int64_t e = v.base + i;
        const int cap_e = static_cast<int>(min_of<int64_t>(s.cap, e + 1));
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
    }
  }
  __pipeline_wait_prior(0);  // no copy may still target shared memory when the block exits
  __syncthreads();
  if (threadIdx.x == 0) {
    if (!run || best == 0) {
      prob.store(b, kNoMatch);
    } else {
      const bool in_prompt = (best >> 32) & 1;
      const int64_t e = 0xFFFFFFFFu - static_cast<uint32_t>(best);
      prob.store(b, static_cast<int32_t>(e + 1) | (in_prompt ? 0 : kSeg1Bit));
    }
  }
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

template <int kMaxN, class Problem>
cudaError_t launch_ngram_search_n(const Problem& prob, int64_t batch, cudaStream_t stream) {
  static_assert(Problem::kThreads == kNgramSearchThreads, "the search problem's block size");
  auto kernel = ngram_search_kernel<kMaxN, Problem>;
  // The ring is larger than the default 48 KB of dynamic shared memory. A host-side attribute (no
  // stream work), so it is fine under graph capture; set on every launch as it is per device.
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kNgramSearchSmem));
  if (err != cudaSuccess) return err;
  kernel<<<static_cast<unsigned>(batch), kNgramSearchThreads, kNgramSearchSmem, stream>>>(prob);
  return cudaGetLastError();
}

// Launches the search over `batch` slots with the compare loop specialised for the usual sizes.
template <class Problem>
cudaError_t launch_ngram_search(const Problem& prob, int64_t batch, int max_n, cudaStream_t stream) {
  switch (max_n) {
    case 1: return launch_ngram_search_n<1>(prob, batch, stream);
    case 2: return launch_ngram_search_n<2>(prob, batch, stream);
    case 3: return launch_ngram_search_n<3>(prob, batch, stream);
    case 4: return launch_ngram_search_n<4>(prob, batch, stream);
    case 5: return launch_ngram_search_n<5>(prob, batch, stream);
    default: return launch_ngram_search_n<0>(prob, batch, stream);
  }
}

}  // namespace fdspec
