// suffix_match: CUDA implementation (docs/contract/suffix.md). No Paddle include.
//
// Kernel 1, one block per decoding slot, computes the slot's draft exactly as the CPU does, without a
// suffix tree and without a vocabulary-sized histogram:
//
// 1. One pass over the history computes l(i), the match length of H[0 .. i] against the context C
//    (capped at |C| - 1), for every position i, and a histogram of l in shared memory. The
//    occurrences of s = C[-L:] are the i with l(i) >= L, so n_L = |S_0(L)| is a suffix sum of the
//    histogram; the sets nest as L grows. n_L >= 1 always (the newest occurrence, i = N - 1, has no
//    continuation), and a match length with n_L = 1 drafts nothing.
// 2. Small sets (n_L <= 32, the long matches: almost every L on real text) go to the warp path: the
//    <= 32 occurrences of the shortest such L are collected once, sorted by position, one per lane;
//    each warp walks its own match lengths. A step is one load per lane, __match_any_sync to group
//    equal next tokens, and a warp max over (count, earliest lane): no shared memory, no barrier.
// 3. Large sets (the few short matches of frequent tokens) go to the block path, one match length
//    at a time: each step rescans the history for the members of S_k (l(i) >= L and the draft so
//    far follows i) and counts their next tokens in a shared-memory hash table. A table entry holds
//    the least member position with that token (+1) and a count; the token itself is read back from
//    the history, so there is no reserved key and no token value is special. A table that fills up
//    (more distinct next tokens than it holds) is never a wrong answer: the step restarts on half
//    of the 64-bit hash range of the tokens (a bijective mix), range by range, down to one hash value
//    = one token if it has to. Work is O(N / threads) per step on real text and bounded by
//    O(D * K * N * log N / threads) on adversarial histories (one token repeated).
// 4. The best (score, L) over both paths wins; its draft, probabilities and match length are
//    written to suffix_tokens / suffix_probs / suffix_meta.
//
// Kernel 2 is the batch budget walk of ngram_common/ngram_walk.cuh (docs/contract/ngram.md), with the drafts of
// suffix_tokens, then pad_to_max.
//
// Bit-identity with the CPU: counts are integers; every float step (the count ratio, the running
// product, the score sum, the length limit) is one correctly rounded IEEE operation through the
// helpers of suffix_match.h, in the order of the CPU code; ties are decided by positions.
#include "suffix_match/suffix_match.h"

#include <cub/block/block_reduce.cuh>

#include "common/cuda_utils.cuh"
#include "ngram_common/ngram_walk.cuh"

namespace fdspec {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kWarpSet = 32;     // sets up to this size take the warp path
constexpr int kTable = 2048;     // hash-table entries of the block path (a power of two)
constexpr unsigned kFull = 0xffffffffu;

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
  int64_t ctx[kMaxSuffixTreeDepth];
  int32_t hist[kMaxSuffixTreeDepth];
  uint32_t occ[kTable];   // least member position + 1 with the entry's next token; 0: free
  uint32_t cnt[kTable];
  int32_t small_pos[kWarpSet];
  int32_t small_len[kWarpSet];
  int32_t sorted_pos[kWarpSet];
  int32_t sorted_len[kWarpSet];
  DraftBuf warp_cur[kWarps];
  DraftBuf warp_best[kWarps];
  Best warp_best_info[kWarps];
  DraftBuf block_cur;
  DraftBuf block_best;
  Best block_best_info;
  int small_n;
  int short_end;    // match lengths below this take the block path
  int last_l;       // the longest match length with n_L >= 2 (0: none)
  uint32_t members;
  int overflow;
  unsigned long long step_best;
};

// SplitMix64's finaliser: a bijection of the 64-bit tokens, so a hash range of width 1 holds one
// token.
__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// l(i) >= want? (want <= the cap, so this is the CPU's l(i) compared with want.)
__device__ __forceinline__ bool ends_match(const int64_t* row, const int64_t* ctx, int c, int64_t i,
                                           int want) {
  if (i - want + 1 < 0) return false;
  for (int j = 0; j < want; ++j) {
    if (row[i - j] != ctx[c - 1 - j]) return false;
  }
  return true;
}

// One greedy step's outcome: the continuation with the highest count (ties: least position).
struct StepResult {
  int64_t members;  // |S_k|
  int64_t count;    // count of the winner (0: no member has a next token)
  int64_t pos;      // the winner's least member position
};

// Keeps the best (score, L) of a path, a later L winning ties because each path visits its match
// lengths in increasing order.
__device__ __forceinline__ bool improves(float score, const Best& best) { return score >= best.score; }

// ---- warp path ----------------------------------------------------------------------------------

// Walks match length L over the <= 32 sorted occurrences in shared memory; lane 0 writes the draft.
__device__ float warp_walk(const SuffixMatchParams& p, const SearchShared& sh, const int64_t* row,
                           int64_t n, int L, int64_t limit, DraftBuf& out, int* m_out) {
  const int lane = threadIdx.x & 31;
  const bool valid = lane < sh.small_n && sh.sorted_len[lane] >= L;
  const int64_t pos = valid ? sh.sorted_pos[lane] : 0;
  unsigned alive = __ballot_sync(kFull, valid);
  float prob = 1.0f, score = 0.0f;
  int m = 0;
  while (m < limit && L + m < p.max_tree_depth) {
    const int members = __popc(alive);
    const bool has = ((alive >> lane) & 1u) && pos + m + 1 <= n - 1;
    const int64_t tok = has ? row[pos + m + 1] : 0;
    const unsigned with_next = __ballot_sync(kFull, has);
    if (with_next == 0) break;
    const unsigned group = __match_any_sync(kFull, static_cast<unsigned long long>(tok)) & with_next;
    // Lanes are in position order: the group's lowest lane holds its least position.
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

// ---- block path ---------------------------------------------------------------------------------

// Is position i in S_k for match length L and the draft so far (k tokens in sh.block_cur)?
__device__ __forceinline__ bool block_member(const SearchShared& sh, const int64_t* row, int64_t n,
                                             int c, int L, int k, int64_t i) {
  if (i + k > n - 1 || !ends_match(row, sh.ctx, c, i, L)) return false;
  for (int j = 0; j < k; ++j) {
    if (row[i + 1 + j] != sh.block_cur.tokens[j]) return false;
  }
  return true;
}

// Counts next token row[i + k + 1] of member i in the table; false if the table is full.
__device__ __forceinline__ bool table_add(SearchShared& sh, const int64_t* row, int k, int64_t i,
                                          int64_t tok, uint64_t h) {
  const uint32_t me = static_cast<uint32_t>(i) + 1;
  uint32_t slot = static_cast<uint32_t>(h) & (kTable - 1);
  for (int probe = 0; probe < kTable; ++probe) {
    uint32_t o = *reinterpret_cast<volatile uint32_t*>(&sh.occ[slot]);
    if (o == 0) {
      o = atomicCAS(&sh.occ[slot], 0u, me);
      if (o == 0) {
        atomicAdd(&sh.cnt[slot], 1u);
        return true;
      }
    }
    // Any value read is a member with this entry's token (atomicMin keeps it one).
    if (row[static_cast<int64_t>(o) - 1 + k + 1] == tok) {
      atomicMin(&sh.occ[slot], me);
      atomicAdd(&sh.cnt[slot], 1u);
      return true;
    }
    slot = (slot + 1) & (kTable - 1);
  }
  return false;
}

// Step k of match length L: |S_k| and the winning continuation.
__device__ StepResult block_step(SearchShared& sh, const int64_t* row, int64_t n, int c, int L,
                                 int k) {
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  if (threadIdx.x == 0) {
    sh.members = 0;
    sh.step_best = 0;
  }
  uint64_t lo = 0;
  int width_log = 64;  // the hash range [lo, lo + 2^width_log) of this pass
  bool counted = false;
  while (true) {
    for (int j = threadIdx.x; j < kTable; j += kThreads) {
      sh.occ[j] = 0;
      sh.cnt[j] = 0;
    }
    if (threadIdx.x == 0) sh.overflow = 0;
    __syncthreads();
    uint32_t members = 0;
    bool full = false;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      if (!block_member(sh, row, n, c, L, k, i)) continue;
      ++members;
      if (i + k + 1 > n - 1) continue;
      const int64_t tok = row[i + k + 1];
      const uint64_t h = mix64(static_cast<uint64_t>(tok));
      if (width_log < 64 && (h >> width_log) != (lo >> width_log)) continue;
      if (!full) full = !table_add(sh, row, k, i, tok, h);
    }
    if (!counted && members) atomicAdd(&sh.members, members);
    counted = true;
    if (full) sh.overflow = 1;
    __syncthreads();
    if (sh.overflow) {  // read by every thread after the barrier: a uniform branch
      --width_log;
      __syncthreads();  // nobody clears the table before everyone has read the flag
      continue;
    }
    unsigned long long key = 0;
    for (int j = threadIdx.x; j < kTable; j += kThreads) {
      const uint32_t o = sh.occ[j];
      if (o == 0) continue;
      const unsigned long long e = (static_cast<unsigned long long>(sh.cnt[j]) << 32) |
                                   (0xffffffffull - (o - 1));
      key = key > e ? key : e;
    }
    key = Reduce(reduce_tmp).Reduce(key, [](unsigned long long a, unsigned long long b) {
      return a > b ? a : b;
    });
    if (threadIdx.x == 0 && key > sh.step_best) sh.step_best = key;
    if (width_log == 64) break;
    lo += uint64_t{1} << width_log;
    if (lo == 0) break;  // wrapped: the whole range is done
    __syncthreads();
  }
  __syncthreads();
  StepResult r;
  r.members = sh.members;
  r.count = static_cast<int64_t>(sh.step_best >> 32);
  r.pos = static_cast<int64_t>(0xffffffffull - (sh.step_best & 0xffffffffull));
  __syncthreads();  // the next step resets members and step_best
  return r;
}

// Walks match length L with block_step; every thread holds the same prob, score and m.
__device__ float block_walk(const SuffixMatchParams& p, SearchShared& sh, const int64_t* row,
                            int64_t n, int c, int L, int64_t limit, int* m_out) {
  float prob = 1.0f, score = 0.0f;
  int m = 0;
  while (m < limit && L + m < p.max_tree_depth) {
    const StepResult r = block_step(sh, row, n, c, L, m);
    if (r.count == 0) break;
    const float next = suffix_fmul(prob, suffix_ratio(r.count, r.members));
    if (!(next >= p.min_token_prob)) break;
    prob = next;
    if (threadIdx.x == 0) {
      sh.block_cur.tokens[m] = row[r.pos + m + 1];
      sh.block_cur.probs[m] = prob;
    }
    score = suffix_fadd(score, prob);
    ++m;
    __syncthreads();
  }
  *m_out = m;
  return score;
}

// ---- the search kernel --------------------------------------------------------------------------

__device__ void write_draft(const SuffixMatchParams& p, int64_t b, const DraftBuf* src, int m, int L) {
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

__global__ void __launch_bounds__(kThreads) suffix_search_kernel(SuffixMatchParams p) {
  __shared__ SearchShared sh;
  const int64_t b = blockIdx.x;
  if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) return;
  const SuffixSlot v = suffix_slot(p, b);
  const int64_t* row = v.row;
  const int64_t n = v.n;
  const int c = static_cast<int>(min_of<int64_t>(p.max_tree_depth, n));
  if (c <= 1 || v.cap == 0) {  // no match length, or every draft is empty: the last L wins
    write_draft(p, b, nullptr, 0, c > 1 ? c - 1 : 0);
    return;
  }

  // 1. Match lengths and their histogram.
  for (int j = threadIdx.x; j < c; j += kThreads) {
    sh.ctx[j] = row[n - c + j];
    sh.hist[j] = 0;
  }
  if (threadIdx.x == 0) sh.small_n = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    int l = 0;
    while (l < c - 1 && i - l >= 0 && row[i - l] == sh.ctx[c - 1 - l]) ++l;
    if (l > 0) atomicAdd(&sh.hist[l], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t at_least = 0;  // n_L
    int short_end = c, last_l = 0;  // short_end = c: no match length has <= 32 occurrences
    for (int L = c - 1; L >= 1; --L) {
      at_least += sh.hist[L];
      if (at_least >= 2 && last_l == 0) last_l = L;
      if (at_least <= kWarpSet) short_end = L;
    }
    sh.short_end = short_end;
    sh.last_l = last_l;
  }
  __syncthreads();
  const int short_end = sh.short_end;
  const int last_l = sh.last_l;

  // 2. Warp path: the occurrences of C[-short_end:], at most 32, sorted by position.
  if (short_end <= last_l) {
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      if (!ends_match(row, sh.ctx, c, i, short_end)) continue;
      int l = short_end;
      while (l < c - 1 && i - l >= 0 && row[i - l] == sh.ctx[c - 1 - l]) ++l;
      const int at = atomicAdd(&sh.small_n, 1);
      sh.small_pos[at] = static_cast<int32_t>(i);
      sh.small_len[at] = l;
    }
    __syncthreads();
    if (threadIdx.x < sh.small_n) {
      const int32_t mine = sh.small_pos[threadIdx.x];
      int rank = 0;
      for (int j = 0; j < sh.small_n; ++j) rank += sh.small_pos[j] < mine;
      sh.sorted_pos[rank] = mine;
      sh.sorted_len[rank] = sh.small_len[threadIdx.x];
    }
  }
  const int warp = threadIdx.x / 32;
  if ((threadIdx.x & 31) == 0) sh.warp_best_info[warp] = Best{0.0f, 0, 0};
  if (threadIdx.x == 0) sh.block_best_info = Best{0.0f, 0, 0};
  __syncthreads();
  for (int L = short_end + warp; L <= last_l; L += kWarps) {
    const int64_t limit = suffix_spec_limit(L, p.max_spec_factor, p.max_spec_offset, v.cap);
    int m = 0;
    const float score = warp_walk(p, sh, row, n, L, limit, sh.warp_cur[warp], &m);
    if (improves(score, sh.warp_best_info[warp])) {
      for (int j = threadIdx.x & 31; j < m; j += 32) {
        sh.warp_best[warp].tokens[j] = sh.warp_cur[warp].tokens[j];
        sh.warp_best[warp].probs[j] = sh.warp_cur[warp].probs[j];
      }
      __syncwarp();
      if ((threadIdx.x & 31) == 0) sh.warp_best_info[warp] = Best{score, L, m};
    }
    __syncwarp();
  }

  // 3. Block path: the short match lengths with more than 32 occurrences.
  const int block_end = min_of<int>(short_end, last_l + 1);
  for (int L = 1; L < block_end; ++L) {
    const int64_t limit = suffix_spec_limit(L, p.max_spec_factor, p.max_spec_offset, v.cap);
    int m = 0;
    const float score = block_walk(p, sh, row, n, c, L, limit, &m);
    if (improves(score, sh.block_best_info)) {
      for (int j = threadIdx.x; j < m; j += kThreads) {
        sh.block_best.tokens[j] = sh.block_cur.tokens[j];
        sh.block_best.probs[j] = sh.block_cur.probs[j];
      }
      __syncthreads();
      if (threadIdx.x == 0) sh.block_best_info = Best{score, L, m};
    }
    __syncthreads();
  }
  __syncthreads();

  // 4. The best (score, L); match lengths past last_l draft nothing and score 0.
  Best best = sh.block_best_info;
  const DraftBuf* src = &sh.block_best;
  for (int w = 0; w < kWarps; ++w) {
    const Best& o = sh.warp_best_info[w];
    if (o.score > best.score || (o.score == best.score && o.L > best.L)) {
      best = o;
      src = &sh.warp_best[w];
    }
  }
  if (best.score == 0.0f && c - 1 > best.L) best = Best{0.0f, c - 1, 0};
  write_draft(p, b, src, best.m, best.L);
}

// ---- the budget walk ----------------------------------------------------------------------------

struct SuffixWalk {
  SuffixMatchParams p;

  __device__ int64_t batch() const { return p.batch; }
  __device__ int64_t threshold() const { return p.threshold; }
  __device__ WalkOutputs outputs() const {
    return WalkOutputs{p.draft_tokens, p.draft_stride, p.seq_lens_this_time,
                       graph_pad_length(p.pad_to_max, p.max_draft_tokens, p.draft_stride)};
  }

  // Prefill: a fixed length of max(seq_lens_this_time, 0), written back as that; empty: 0; decoding:
  // base 1 and the search's draft (suffix_meta's length, suffix_tokens' row), padded in graph mode.
  __device__ DeviceWalkSlot slot(int64_t b) const {
    DeviceWalkSlot w;
    const int32_t enc = p.seq_lens_encoder[b];
    const int32_t dec = p.seq_lens_decoder[b];
    w.counted = suffix_is_counted(enc, dec);
    if (enc > 0) {
      w.base = max_of<int32_t>(p.seq_lens_this_time[b], 0);
      return w;
    }
    if (dec == 0) return w;
    const int64_t K = p.draft_stride - 1;
    w.processed = true;
    w.padded = p.pad_to_max;
    w.base = 1;
    w.budget = K;
    w.untruncated = clamp_to<int64_t>(p.suffix_meta[2 * b], 0, K);
    w.src = p.suffix_tokens + b * K;
    return w;
  }
};

}  // namespace

cudaError_t suffix_search_gpu(const SuffixMatchParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  suffix_search_kernel<<<static_cast<unsigned>(p.batch), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t suffix_walk_gpu(const SuffixMatchParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  return launch_ngram_walk(SuffixWalk{p}, stream);
}

cudaError_t suffix_match_gpu(const SuffixMatchParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  cudaError_t err = suffix_search_gpu(p, stream);
  if (err != cudaSuccess) return err;
  err = suffix_walk_gpu(p, stream);
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
