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
  bool search = false;        // false: store kNoMatch (if record is set) and stop
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

// One block per slot. Problem::slot(b) (called by every thread, may use the whole block) says what to
// search; Problem::store(b, code) (thread 0, once per recorded slot) keeps the result. slot() may read
// the memory that store() overwrites: a barrier separates them. The haystacks are streamed through
// shared memory in tiles of kThreads * kTok tokens with the next tile's loads in flight while the
// current one is examined.
// Reads each haystack token once: O(len0 + len1) loads per slot, stopping early on a best-size match.
template <int kThreads, int kTok, int kMaxN, class Problem>
__global__ void __launch_bounds__(kThreads) ngram_search_kernel(Problem prob) {
  constexpr int kTile = kThreads * kTok;
  __shared__ int64_t tile[kTile];
  __shared__ int64_t pat[kMaxNgramSize];
  __shared__ unsigned long long best;

  const SearchSlot s = prob.slot(blockIdx.x);
  if (!s.record) return;
  __syncthreads();  // every thread has read its inputs before thread 0 stores
  if (!s.search || s.cap < s.min_n) {
    if (threadIdx.x == 0) prob.store(blockIdx.x, kNoMatch);
    return;
  }
  if (threadIdx.x < s.cap) pat[threadIdx.x] = s.h.pattern_last[-static_cast<int64_t>(threadIdx.x)];
  if (threadIdx.x == 0) best = 0;

  // Candidate window ends are e in [0, len - 2]; a tile covers loaded positions [base, base + kTile).
  const int64_t ends0 = max_of<int64_t>(s.h.len0 - 1, 0);
  const int64_t ends1 = max_of<int64_t>(s.h.len1 - 1, 0);
  const int64_t tiles0 = ceil_div<int64_t>(ends0, kTile);
  const int64_t tiles = tiles0 + ceil_div<int64_t>(ends1, kTile);

  int64_t regs[kTok];
  auto load = [&](int64_t ti) {
    const bool first = ti < tiles0;
    const int64_t* hay = first ? s.h.seg0 : s.h.seg1;
    const int64_t base = (first ? ti : ti - tiles0) * kTile;
    const int64_t n = min_of<int64_t>(kTile, (first ? ends0 : ends1) - base);
#pragma unroll
    for (int k = 0; k < kTok; ++k) {
      const int i = threadIdx.x + k * kThreads;
      regs[k] = i < n ? __ldg(hay + base + i) : 0;
    }
  };

  if (tiles > 0) load(0);
  for (int64_t ti = 0; ti < tiles; ++ti) {
    __syncthreads();  // the previous tile has been examined and `best` is up to date
    if (static_cast<int>(best >> 40) >= s.cap) break;  // the largest size is found; nothing beats it
#pragma unroll
    for (int k = 0; k < kTok; ++k) tile[threadIdx.x + k * kThreads] = regs[k];
    __syncthreads();
    if (ti + 1 < tiles) load(ti + 1);

    const bool first = ti < tiles0;
    const int64_t* hay = first ? s.h.seg0 : s.h.seg1;
    const int64_t base = (first ? ti : ti - tiles0) * kTile;
    const int64_t n = min_of<int64_t>(kTile, (first ? ends0 : ends1) - base);
    unsigned long long key = 0;
#pragma unroll
    for (int k = 0; k < kTok; ++k) {
      const int i = threadIdx.x + k * kThreads;
      if (i < n) {
        const int64_t e = base + i;
        const int cap_e = static_cast<int>(min_of<int64_t>(s.cap, e + 1));
        const int l = suffix_match<kMaxN>(tile, base, hay, e, pat, cap_e);
        if (l >= s.min_n) {
          const unsigned long long kk = ngram_key(l, first, e);
          key = kk > key ? kk : key;
        }
      }
    }
    if (__any_sync(0xFFFFFFFFu, key != 0)) {
      key = warp_max_u64(key);
      if ((threadIdx.x & 31) == 0) atomicMax(&best, key);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    if (best == 0) {
      prob.store(blockIdx.x, kNoMatch);
    } else {
      const bool in_prompt = (best >> 32) & 1;
      const int64_t e = 0xFFFFFFFFu - static_cast<uint32_t>(best);
      prob.store(blockIdx.x, static_cast<int32_t>(e + 1) | (in_prompt ? 0 : kSeg1Bit));
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

// Block size of the search: 512 threads x 8 tokens = 32 KB tiles keep 32 KB of loads in flight per
// block while the previous tile is examined. Problem::kThreads must equal it.
constexpr int kNgramSearchThreads = 512;

// Launches the search with the compare loop specialised for the usual n-gram sizes.
template <class Problem>
cudaError_t launch_ngram_search(const Problem& prob, int batch, int max_n, cudaStream_t stream) {
  constexpr int kThreads = Problem::kThreads;
  constexpr int kTok = 8;
  const dim3 grid(batch);
  switch (max_n) {
    case 1: ngram_search_kernel<kThreads, kTok, 1><<<grid, kThreads, 0, stream>>>(prob); break;
    case 2: ngram_search_kernel<kThreads, kTok, 2><<<grid, kThreads, 0, stream>>>(prob); break;
    case 3: ngram_search_kernel<kThreads, kTok, 3><<<grid, kThreads, 0, stream>>>(prob); break;
    case 4: ngram_search_kernel<kThreads, kTok, 4><<<grid, kThreads, 0, stream>>>(prob); break;
    default: ngram_search_kernel<kThreads, kTok, 0><<<grid, kThreads, 0, stream>>>(prob); break;
  }
  return cudaGetLastError();
}

}  // namespace fdspec
