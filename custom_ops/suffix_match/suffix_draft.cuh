// The device core of suffix decoding (docs/contract/suffix.md): from a list of occurrences of the
// context's suffixes held in shared memory, the best-scoring greedy draft over a range of match
// lengths. Written once for the local search (suffix_match.cu: occurrences are positions of the
// slot's own history) and the global one (suffix_cache.cu: verified hits in the cache's rows). A
// candidate is (key, l): an order key (the tie rule's earliest occurrence is the least key) and its
// match length. Two paths: the warp path for match lengths with at most 32 occurrences, the block
// path with a shared hash table for larger sets, each match length skipped when its longest draft
// cannot beat the best. Design: docs/design/suffix_match.md.
//
// Source concept (j: the candidate's index in the shared list, key: its key; a source may use
// either):
//   int64_t token(int j, uint64_t key, int k, bool* has) const;  // the token k + 1 places after it
//   int avail(int j, uint64_t key, int window) const;            // how many of its next `window`
//   exist
#pragma once

#include <cub/block/block_reduce.cuh>

#include "common/profiler.cuh"
#include "suffix_match/suffix_match.h"

namespace fdspec {
namespace suffix_gpu {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kWarpSet = 32;  // sets up to this size take the warp path
// Candidates held in shared memory (a power of two: the table's size), a template parameter
// kCandCap of the search: the large form where the device's shared memory per block holds it, the
// small one (half the candidates per round; more match lengths take the slow path, the same drafts)
// on sm_86 / sm_89 (launch_plan.h, suffix_search_cand_cap).
constexpr int kCandCapLarge = 2048;
constexpr int kCandCapSmall = 1024;
constexpr unsigned kFull = 0xffffffffu;
static_assert((kCandCapLarge & (kCandCapLarge - 1)) == 0 &&
                  (kCandCapSmall & (kCandCapSmall - 1)) == 0,
              "the next-token table is indexed with a mask");

// Profiling probes (compiled out; common/profiler.cuh): stage clocks and counters per block, their
// slots listed with the print functions of suffix_match.cu and suffix_cache.cu.

struct Best {
  float score;
  int L;
  int m;
};

// The draft order of the contract: a higher score wins, a longer match length on ties.
__device__ __forceinline__ bool beats(float score, int L, const Best& b) {
  return score > b.score || (score == b.score && L > b.L);
}

// Block path: what a step learns while it counts, by shared atomics (no pass over the table): the
// largest count (each adder sees its entry's count so far, the last one its final count), the live
// members, and then the entries with the largest count (each reported once, by the member that
// created it): how many, and one of them with its creator (the winner when it is the only one; a
// tie is rare and resolved by a second pass over the tied entries). Two, used by alternate steps,
// so that a step resets the next one's while nobody reads it.
struct StepAcc {
  unsigned cnt;
  unsigned members;
  unsigned ties;
  unsigned pick;  // creator * kCandCap + entry, the least reported (atomics: no racing stores; 32
                  // bits, as 64-bit shared atomics are compare-and-swap loops)
};
constexpr StepAcc kStepAccClean{0u, 0u, 0u, ~0u};
static_assert(static_cast<uint64_t>(kCandCapLarge) * kCandCapLarge <= (uint64_t{1} << 32),
              "a pick fits in 32 bits");

// A tie between entries with the largest count goes to the least key among their members.
struct TieTop {
  unsigned long long least;
  unsigned slot;
  unsigned owner;
};

struct TieTopMerge {
  __device__ __forceinline__ TieTop operator()(const TieTop& x, const TieTop& y) const {
    return x.least <= y.least ? x : y;
  }
};

constexpr uint16_t kNoSlot = 0xffff;  // cslot: the candidate has no next token

struct DraftBuf {
  int64_t tokens[kMaxSuffixSpecTokens];
  float probs[kMaxSuffixSpecTokens];
};

static_assert(kWarpSet * kMaxSuffixSpecTokens >= kCandCapLarge,
              "the block path's tokens reuse the warp path's");

template <int kCandCap>
struct CoreShared {
  unsigned long long key[kCandCap];  // candidates: order key
  uint8_t len[kCandCap];             // match length l
  uint8_t alive[kCandCap];           // block path: still a member of the path's set
  uint16_t cslot[kCandCap];          // block path: the table entry of the member's next token
  // Next-token tables of the block path, two so that a step clears the previous step's while it
  // loads its members' tokens: an entry is a member index + 1 with the token (0: free) and its
  // count. A tie of one table is resolved in the other (the least key of each tied entry).
  union NextTable {
    struct {
      uint32_t idx[kCandCap];
      uint32_t cnt[kCandCap];
    } c;
    unsigned long long least[kCandCap];
  } tab[2];
  // The warp path's continuation tokens (token-major: a walk step's 32 lanes read 32 consecutive
  // words, where lane-major rows put them all in one bank), then, once it is done, the block path's
  // next token of each member (read from shared memory by the table's probes).
  union {
    int64_t cont[kMaxSuffixSpecTokens][kWarpSet];
    int64_t ntok[kCandCap];
  };
  unsigned long long wkey[kWarpSet];  // warp path: its set, sorted by key
  int32_t wlen[kWarpSet];
  int32_t avail[kWarpSet];
  int32_t widx[kWarpSet];
  DraftBuf cur;                                     // block path: the draft being walked
  DraftBuf best;                                    // the best draft (after core_finish)
  DraftBuf wpath[kWarps];                           // warp path: each warp's last walk
  DraftBuf wdraft[kWarps];                          // warp path: each warp's best draft
  float wprefix[kWarps][kMaxSuffixSpecTokens + 1];  // warp path: a path's score after m tokens
  int32_t runs[kMaxSuffixTreeDepth + 1];  // warp path: first match length of each run, then hi + 1
  int n_runs;
  Best warp_best[kWarps];
  unsigned warp_top;  // warp path: the best score of the runs walked so far (its bits)
  uint8_t cut_of[kMaxSuffixTreeDepth];  // warp path: draft_cut(L) for L in [warp_lo, hi]
  Best best_info;
  int best_from_warp;  // w + 1: best_info came from warp w's path (0: not)
  int n;               // candidates (set by the caller)
  int small_n;
  StepAcc step[2];
  union {
    typename cub::BlockReduce<unsigned long long, kThreads>::TempStorage l;
    typename cub::BlockReduce<TieTop, kThreads>::TempStorage tie;
  } reduce;
};

struct CoreArgs {
  int lo;       // shortest match length searched (>= 1)
  int warp_lo;  // shortest match length of the warp path (n_L <= 32); > hi: no warp path
  int hi;       // longest match length searched
  int depth;    // D
  int64_t cap;  // the slot cap
  float factor, offset, min_prob;
  float bar;  // pruning only: a draft not above max(bar, best) cannot matter
};

// The search's arguments for a slot with cap `cap` (the suffix parameters from `p`).
__device__ __forceinline__ CoreArgs core_args(const SuffixMatchParams& p, int64_t cap, int lo,
                                              int warp_lo, int hi, float bar) {
  CoreArgs a;
  a.lo = lo;
  a.warp_lo = warp_lo;
  a.hi = hi;
  a.depth = p.max_tree_depth;
  a.cap = cap;
  a.factor = p.max_spec_factor;
  a.offset = p.max_spec_offset;
  a.min_prob = p.min_token_prob;
  a.bar = bar;
  return a;
}

// Walks match length L over the warp set; lane 0 writes the draft to `out` and the score after each
// token to `prefix[1 ..]` when given.
template <int kCandCap>
__device__ __forceinline__ float warp_walk(const CoreShared<kCandCap>& sh, int L, int64_t limit,
                                           const CoreArgs& a, DraftBuf* out, float* prefix,
                                           int* m_out) {
  const int lane = threadIdx.x & 31;
  const bool valid = lane < sh.small_n && sh.wlen[lane] >= L;
  unsigned alive = __ballot_sync(kFull, valid);
  float prob = 1.0f, score = 0.0f;
  int m = 0;
  while (m < limit && L + m < a.depth) {
    const int members = __popc(alive);
    if (members == 1) {
      // One member left (a context copied from one response usually has one from the first step):
      // every later step counts 1 of 1, a ratio of exactly 1, so the probability stays and the
      // draft is the member's continuation up to the limit, the depth or its end. The lanes copy
      // its tokens together and lane 0 adds the scores in the draft's order: what the steps below
      // would do, without their chain of a match, a reduction and a division per token.
      const int s = __ffs(alive) - 1;
      const int end =
          static_cast<int>(min_of<int64_t>(min_of<int64_t>(limit, a.depth - L), sh.avail[s]));
      if (end <= m || !(prob >= a.min_prob))
        break;  // no next token, or the first step's check fails
      for (int k = m + lane; k < end; k += 32) {
        if (out != nullptr) {
          out->tokens[k] = sh.cont[k][s];
          out->probs[k] = prob;
        }
      }
      if (lane == 0) {
        for (int k = m; k < end; ++k) {
          score = fadd_rn(score, prob);
          if (prefix != nullptr) prefix[k + 1] = score;
        }
      }
      score = __shfl_sync(kFull, score, 0);
      m = end;
      break;
    }
    const bool has = ((alive >> lane) & 1u) && m < sh.avail[lane];
    const int64_t tok = has ? sh.cont[m][lane] : 0;
    const unsigned with_next = __ballot_sync(kFull, has);
    if (with_next == 0) break;
    const unsigned group =
        __match_any_sync(kFull, static_cast<unsigned long long>(tok)) & with_next;
    // Lanes are in key order: a group's lowest lane holds its least key.
    const unsigned key = has ? (static_cast<unsigned>(__popc(group)) << 6) |
                                   static_cast<unsigned>(63 - (__ffs(group) - 1))
                             : 0u;
    const unsigned best = __reduce_max_sync(kFull, key);
    const int count = static_cast<int>(best >> 6);
    const int winner = 63 - static_cast<int>(best & 63u);
    const float next = fmul_rn(prob, suffix_ratio(count, members));
    if (!(next >= a.min_prob)) break;
    prob = next;
    const int64_t t = __shfl_sync(kFull, tok, winner);
    alive = __shfl_sync(kFull, group, winner);
    if (out != nullptr && lane == 0) {
      out->tokens[m] = t;
      out->probs[m] = prob;
    }
    score = fadd_rn(score, prob);
    ++m;
    if (prefix != nullptr && lane == 0) prefix[m] = score;
  }
  __syncwarp();
  *m_out = m;
  return score;
}

// The longest draft match length L may have: min(limit, D - L) tokens.
__device__ __forceinline__ int64_t draft_cut(int L, const CoreArgs& a) {
  return min_of<int64_t>(suffix_spec_limit(L, a.factor, a.offset, a.cap), a.depth - L);
}

// The block path's clean state: both next-token tables empty and both step accumulators reset.
// Every thread takes its part; the caller's barrier follows.
template <int kCandCap>
__device__ __forceinline__ void clean_block_path(CoreShared<kCandCap>& sh) {
  for (int e = threadIdx.x; e < kCandCap; e += kThreads) {
    sh.tab[0].c.idx[e] = sh.tab[1].c.idx[e] = 0;
    sh.tab[0].c.cnt[e] = sh.tab[1].c.cnt[e] = 0;
  }
  if (threadIdx.x == 0) sh.step[0] = sh.step[1] = kStepAccClean;
}

// Walks match length L over every candidate with l >= L (block path); the draft goes to sh.cur.
// Every thread returns the same score and m. Both tables and both step accumulators are clean on
// entry and left clean. A step: every thread loads its live members' next tokens at once (one round
// trip) into shared memory; then the lanes of a warp with the same token are grouped
// (__match_any_sync) and one lane per group probes the table and adds the group's size, so a
// dominant token costs an atomic per warp, not one per member (the same-address atomics of ~1000
// members, and a load per member in turn, were most of a step); the adders keep the largest count
// as they go. The step's probability is then known, and the walk gives up (m = -1) once its draft
// cannot score above `above` (the best so far, or the caller's bar) before it looks for the winning
// entry: after m tokens of probability p, each further token's is <= p (a product with a ratio <=
// 1, correctly rounded, never exceeds p), so the score stays <= the sum, in the draft's own float32
// order, of the m tokens and n - m more of probability p (n = min(limit, D - L)): float addition of
// non-negative numbers is monotone in each operand. Otherwise each entry with the largest count is
// reported by its creator; only a tie between entries asks for least keys, of the tied entries'
// members alone, in the other table. Thread t alone touches alive[j] and cslot[j] for j = t mod
// kThreads; three barriers per step (six on a tie), two for one that gives up.
template <int kCandCap, class Src>
__device__ float block_walk(CoreShared<kCandCap>& sh, const Src& src, int L, int64_t limit,
                            const CoreArgs& a, float above, int* m_out) {
  using TieReduce = cub::BlockReduce<TieTop, kThreads>;
  constexpr int kPer = kCandCap / kThreads;  // candidates per thread
  const int n = sh.n;
  const int lane = threadIdx.x & 31;
  FDSPEC_PROF_ADD(10, 1);
  FDSPEC_PROF(long long lap = clock64();)
  for (int j = threadIdx.x; j < n; j += kThreads) sh.alive[j] = sh.len[j] >= L;
  FDSPEC_PROF_LAP(24, lap);
  const int64_t longest = min_of<int64_t>(limit, a.depth - L);
  float prob = 1.0f, score = 0.0f;
  int m = 0, buf = 0;
  while (m < limit && L + m < a.depth) {
    FDSPEC_PROF_ADD(11, 1);
    FDSPEC_PROF(const long long step_start = clock64();)
    uint32_t* idx = sh.tab[buf].c.idx;
    uint32_t* cnt = sh.tab[buf].c.cnt;
    StepAcc& acc = sh.step[buf];
    // Bit i: this thread's i-th candidate (j = i * kThreads + t) is live / has a next token. Every
    // load is issued before the first store, so that they are in flight together.
    unsigned live_mask = 0, has_mask = 0;
    int64_t tk[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = i * kThreads + static_cast<int>(threadIdx.x);
      const bool live = j < n && sh.alive[j];
      bool has = false;
      tk[i] = live ? src.token(j, sh.key[j], m, &has) : 0;
      live_mask |= live ? 1u << i : 0u;
      has_mask |= has ? 1u << i : 0u;
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = i * kThreads + static_cast<int>(threadIdx.x);
      if (!((live_mask >> i) & 1u)) continue;
      sh.ntok[j] = tk[i];
      sh.cslot[j] = kNoSlot;
    }
#ifdef FDSPEC_PROFILE
    if (threadIdx.x == 0) {
      volatile int64_t sink = tk[0];  // the loads have landed: the step's round trip
      (void)sink;
    }
    FDSPEC_PROF_ADD(16, clock64() - step_start);
#endif
    for (int e = threadIdx.x; e < kCandCap; e += kThreads) {  // the previous step's table
      sh.tab[buf ^ 1].c.idx[e] = 0;
      sh.tab[buf ^ 1].c.cnt[e] = 0;
    }
    __syncthreads();
    FDSPEC_PROF_LAP(25, lap);
    if (threadIdx.x == 0) sh.step[buf ^ 1] = kStepAccClean;  // read last before the barrier above
    unsigned top_seen = 0;
    for (int i = 0; i * kThreads < n; ++i) {  // uniform over the block
      const int j = i * kThreads + static_cast<int>(threadIdx.x);
      const bool has = (has_mask >> i) & 1u;
      const int64_t tok = has ? sh.ntok[j] : 0;
      const unsigned group =
          __match_any_sync(kFull, static_cast<unsigned long long>(tok)) & __ballot_sync(kFull, has);
      const int leader = __ffs(group) - 1;
      uint32_t h = 0;
      if (has && lane == leader) {
        // Distinct next tokens <= members <= kCandCap: the probe always ends.
        h = static_cast<uint32_t>(suffix_mix64(static_cast<uint64_t>(tok))) & (kCandCap - 1);
        while (true) {
          const uint32_t o = atomicCAS(&idx[h], 0u, static_cast<uint32_t>(j) + 1);
          if (o == 0 || sh.ntok[o - 1] == tok) break;
          h = (h + 1) & (kCandCap - 1);
        }
        const unsigned size = static_cast<unsigned>(__popc(group));
        top_seen = max(top_seen, atomicAdd(&cnt[h], size) + size);
      }
      h = __shfl_sync(kFull, h, leader < 0 ? 0 : leader);
      if (has) sh.cslot[j] = static_cast<uint16_t>(h);
    }
    top_seen = __reduce_max_sync(kFull, top_seen);
    const unsigned live_warp = __reduce_add_sync(kFull, static_cast<unsigned>(__popc(live_mask)));
    if (lane == 0) {
      atomicMax(&acc.cnt, top_seen);
      atomicAdd(&acc.members, live_warp);
    }
    __syncthreads();
    FDSPEC_PROF_LAP(26, lap);
    const unsigned top = acc.cnt;
    if (top == 0) break;
    const float next = fmul_rn(prob, suffix_ratio(top, acc.members));
    if (!(next >= a.min_prob)) break;
    prob = next;
    score = fadd_rn(score, prob);
    ++m;
    float reach = score;
    for (int64_t k = m; k < longest; ++k) reach = fadd_rn(reach, prob);
    if (!(reach > above)) {
      FDSPEC_PROF_ADD(17, 1);
      m = -1;
      break;
    }
    // The entries with the largest count, each reported by the member that created it.
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = i * kThreads + static_cast<int>(threadIdx.x);
      if (!((has_mask >> i) & 1u)) continue;
      const unsigned e = sh.cslot[j];
      if (idx[e] == static_cast<uint32_t>(j) + 1 && cnt[e] == top) {
        atomicAdd(&acc.ties, 1u);
        atomicMin(&acc.pick, static_cast<unsigned>(j) * kCandCap + e);
      }
    }
    __syncthreads();
    FDSPEC_PROF_LAP(27, lap);
    unsigned pick = acc.pick;
    if (acc.ties > 1) {
      // The other table is clean: its words at the tied entries hold their least keys, then are
      // zeroed again.
      unsigned long long* least = sh.tab[buf ^ 1].least;
      for (int e = threadIdx.x; e < kCandCap; e += kThreads) {
        if (cnt[e] == top) least[e] = ~0ull;
      }
      __syncthreads();
      for (int j = threadIdx.x; j < n; j += kThreads) {
        if (sh.alive[j] && sh.cslot[j] != kNoSlot && cnt[sh.cslot[j]] == top) {
          atomicMin(&least[sh.cslot[j]], sh.key[j]);
        }
      }
      __syncthreads();
      TieTop tie{~0ull, 0u, 0u};
      for (int e = threadIdx.x; e < kCandCap; e += kThreads) {
        if (cnt[e] != top) continue;
        if (least[e] < tie.least) tie = TieTop{least[e], static_cast<unsigned>(e), idx[e] - 1};
        least[e] = 0;
      }
      tie = TieReduce(sh.reduce.tie).Reduce(tie, TieTopMerge());
      if (threadIdx.x == 0) acc.pick = tie.owner * kCandCap + tie.slot;
      __syncthreads();
      pick = acc.pick;
    }
    const unsigned slot = pick % kCandCap, owner = pick / kCandCap;
    FDSPEC_PROF_LAP(28, lap);
    if (threadIdx.x == owner % kThreads) {  // the owner's thread: it alone writes ntok[owner]
      sh.cur.tokens[m - 1] = sh.ntok[owner];
      sh.cur.probs[m - 1] = prob;
    }
    for (int j = threadIdx.x; j < n; j += kThreads) {
      if (sh.alive[j]) sh.alive[j] = sh.cslot[j] == slot;
    }
    buf ^= 1;
    FDSPEC_PROF_LAP(29, lap);
  }
  FDSPEC_PROF(const long long clear_start = clock64();)
  __syncthreads();  // every thread has read the accumulators and the tables, and sh.cur is complete
  clean_block_path(sh);
  __syncthreads();
  FDSPEC_PROF_ADD(21, clock64() - clear_start);
  *m_out = m;
  return score;
}

// Records the block path's draft of L (in sh.cur) as the best when it beats it. Uniform call.
template <int kCandCap>
__device__ __forceinline__ void keep_block_draft(CoreShared<kCandCap>& sh, float score, int L,
                                                 int m) {
  if (!beats(score, L, sh.best_info)) return;
  for (int j = threadIdx.x; j < m; j += kThreads) {
    sh.best.tokens[j] = sh.cur.tokens[j];
    sh.best.probs[j] = sh.cur.probs[j];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sh.best_info = Best{score, L, m};
    sh.best_from_warp = 0;
  }
  __syncthreads();
}

// The score a draft of a shorter match length must exceed to matter: the best so far, or the
// caller's bar. Uniform: every thread reads the same shared best.
template <int kCandCap>
__device__ __forceinline__ float score_to_beat(const CoreShared<kCandCap>& sh, float bar) {
  return sh.best_info.score > bar ? sh.best_info.score : bar;
}

// Does match length L with this limit need a walk? (Each probability is <= 1: a draft of n tokens
// scores <= n.) Uniform.
template <int kCandCap>
__device__ __forceinline__ bool worth_walking(const CoreShared<kCandCap>& sh, int L, int64_t limit,
                                              int depth, float bar) {
  const int64_t longest = min_of<int64_t>(limit, depth - L);
  return static_cast<float>(longest) > score_to_beat(sh, bar);
}

// The search over match lengths [a.lo, a.hi] of the sh.n candidates. Leaves the best (score, L, m)
// in sh.best_info (L = 0: nothing searched); its tokens need core_finish. Uniform call.
template <int kCandCap, class Src>
__device__ void core_search(CoreShared<kCandCap>& sh, const Src& src, const CoreArgs& a) {
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  FDSPEC_PROF_SET(32, clock64());
  if (threadIdx.x == 0) {
    sh.small_n = 0;
    sh.best_info = Best{0.0f, 0, 0};
    sh.best_from_warp = 0;
    sh.warp_top = 0;
  }
  if (lane == 0) sh.warp_best[warp] = Best{0.0f, 0, 0};
  // Each match length's cut, once per block: the runs' loops below read it for every L of a run,
  // where each evaluation was a chain of float and double conversions.
  static_assert(kMaxSuffixSpecTokens <= 255, "a cut fits in a byte");
  for (int L = a.warp_lo + static_cast<int>(threadIdx.x); L <= a.hi; L += kThreads) {
    sh.cut_of[L] = static_cast<uint8_t>(draft_cut(L, a));
  }
  __syncthreads();
  FDSPEC_PROF_SET(33, clock64());
  const int n = sh.n;
  if (a.warp_lo <= a.hi) {
    for (int j = threadIdx.x; j < n; j += kThreads) {
      if (sh.len[j] < a.warp_lo) continue;
      const int at = atomicAdd(&sh.small_n, 1);
      if (at < kWarpSet)
        sh.widx[at] = j;  // at most n_{warp_lo} <= 32 of them (the caller's choice)
    }
    __syncthreads();
    FDSPEC_PROF_SET(22, clock64());
    const int small_n = min(sh.small_n, kWarpSet);
    const int window = static_cast<int>(min_of<int64_t>(a.cap, a.depth - a.warp_lo));
    if (warp == 0) {
      // The set sorted by key (keys are distinct: ranks by shuffles, a permutation), each lane then
      // loads its member's continuations into its sorted row, all loads of a chunk in flight.
      const int me = lane < small_n ? sh.widx[lane] : 0;
      const unsigned long long mine = lane < small_n ? sh.key[me] : ~0ull;
      int rank = 0;
      for (int j = 0; j < small_n; ++j) rank += __shfl_sync(kFull, mine, j) < mine;
      FDSPEC_PROF_SET(34, clock64());
      if (lane < small_n) {
        sh.wkey[rank] = mine;
        sh.wlen[rank] = sh.len[me];
        for (int k0 = 0; k0 < window; k0 += 8) {
          int64_t t[8];
#pragma unroll
          for (int u = 0; u < 8; ++u) {
            bool has = false;
            t[u] = k0 + u < window ? src.token(me, mine, k0 + u, &has) : 0;
          }
#pragma unroll
          for (int u = 0; u < 8; ++u) {
            if (k0 + u < window) sh.cont[k0 + u][rank] = t[u];
          }
        }
        sh.avail[rank] = src.avail(me, mine, window);
      }
      __syncwarp();
#ifdef FDSPEC_PROFILE
      if (lane == 0) {
        volatile int64_t sink = sh.cont[0][0];  // the loads have landed
        (void)sink;
      }
#endif
      FDSPEC_PROF_SET(35, clock64());
    }
    // Runs of match lengths with the same occurrence set: a new run starts at L when some candidate
    // has l = L - 1. Within a run the greedy path is the same (the set decides every step and every
    // stop but the cut), so the draft of L is that path cut at min(limit, D - L) tokens and its
    // score the path's running sum there: one walk per run, exact.
    if (warp == 0) {
      // Bit l of `ends` is set when a member has match length l (l < 256: 8 words; lane w keeps
      // word w), then the run starts are compacted 32 match lengths at a time.
      unsigned word = 0;
#pragma unroll
      for (int w = 0; w < kMaxSuffixTreeDepth / 32; ++w) {
        const int l = lane < small_n ? sh.wlen[lane] : -1;
        const unsigned all = __reduce_or_sync(kFull, l >= 0 && (l >> 5) == w ? 1u << (l & 31) : 0u);
        if (lane == w) word = all;
      }
      int runs = 0;
      for (int base = a.warp_lo; base <= a.hi; base += 32) {
        const int L = base + lane;
        const unsigned ends = __shfl_sync(kFull, word, ((L - 1) >> 5) & 7);
        const bool start = L <= a.hi && (L == a.warp_lo || ((ends >> ((L - 1) & 31)) & 1u));
        const unsigned ballot = __ballot_sync(kFull, start);
        if (start) sh.runs[runs + __popc(ballot & ((1u << lane) - 1u))] = L;
        runs += __popc(ballot);
      }
      if (lane == 0) {
        sh.runs[runs] = a.hi + 1;
        sh.n_runs = runs;
      }
      FDSPEC_PROF_SET(18, runs);
    }
    __syncthreads();
    FDSPEC_PROF_SET(23, clock64());
    // The warps take the runs longest first. A run whose best conceivable draft (cut tokens of
    // probability 1, at its longest L) cannot beat a run already walked, or the caller's bar, is
    // skipped: a context copied from a cached response has its longest run's draft at the limit,
    // and the others need no walk.
    for (int r = sh.n_runs - 1 - warp; r >= 0; r -= kWarps) {
      const int first = sh.runs[r], last = sh.runs[r + 1] - 1;
      unsigned cut = 0;  // <= 64
      for (int L = first + lane; L <= last; L += 32)
        cut = max(cut, static_cast<unsigned>(sh.cut_of[L]));
      cut = __reduce_max_sync(kFull, cut);
      // The scores alone, 32-bit atomics (the 64-bit (score, L) key's were compare-and-swap loops):
      // a run whose ceiling only ties a walked score is walked, which prunes a little less.
      const unsigned ceiling = __float_as_uint(static_cast<float>(cut));
      const unsigned top = __shfl_sync(kFull, lane == 0 ? atomicAdd(&sh.warp_top, 0u) : 0u, 0);
      if (!(static_cast<float>(cut) > a.bar) || ceiling < top) {
        FDSPEC_PROF_ADD(19, 1);
        continue;  // uniform over the warp
      }
      int m = 0;
      float* prefix = sh.wprefix[warp];
      if (lane == 0) prefix[0] = 0.0f;
      warp_walk(sh, first, cut, a, &sh.wpath[warp], prefix, &m);
      // The run's best (score, L): scores are >= 0, so their bits order like the floats.
      unsigned long long mine = 0;
      for (int L = first + lane; L <= last; L += 32) {
        const int mL = min(m, static_cast<int>(sh.cut_of[L]));
        const unsigned long long e =
            (static_cast<unsigned long long>(__float_as_uint(prefix[mL])) << 32) |
            static_cast<unsigned>(L);
        mine = mine > e ? mine : e;
      }
      for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long other = __shfl_xor_sync(kFull, mine, o);
        mine = mine > other ? mine : other;
      }
      if (lane == 0) atomicMax(&sh.warp_top, static_cast<unsigned>(mine >> 32));
      // The draft of L is the path's first mL tokens: the warp keeps the best one's (no second
      // walk).
      const int L = static_cast<int>(mine & 0xffffffffu);
      const int mL = min(m, static_cast<int>(sh.cut_of[L]));
      const bool better = beats(prefix[mL], L, sh.warp_best[warp]);
      __syncwarp();
      if (better) {
        for (int k = lane; k < mL; k += 32) {
          sh.wdraft[warp].tokens[k] = sh.wpath[warp].tokens[k];
          sh.wdraft[warp].probs[k] = sh.wpath[warp].probs[k];
        }
        if (lane == 0) sh.warp_best[warp] = Best{prefix[mL], L, mL};
      }
      __syncwarp();
    }
    FDSPEC_PROF_SET(36, clock64());  // warp 0's runs walked (thread 0's clock)
    __syncthreads();
    if (warp == 0) {  // the best over the warps: (score, L) keys are unique (runs are disjoint)
      const Best wb = lane < kWarps ? sh.warp_best[lane] : Best{0.0f, 0, 0};
      const unsigned long long key =
          wb.L > 0 ? (static_cast<unsigned long long>(__float_as_uint(wb.score)) << 32) |
                         static_cast<unsigned>(wb.L)
                   : 0ull;
      unsigned long long top = key;
      for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long other = __shfl_xor_sync(kFull, top, o);
        top = top > other ? top : other;
      }
      if (top != 0) {
        const int w = __ffs(__ballot_sync(kFull, key == top)) - 1;
        if (lane == 0) {
          sh.best_info = sh.warp_best[w];
          sh.best_from_warp = w + 1;
        }
      }
    }
    __syncthreads();
  }
  FDSPEC_PROF_SET(5, clock64());
  bool clean = false;  // the block path's table, cleared before its first walk
  for (int L = min_of<int>(a.warp_lo, a.hi + 1) - 1; L >= a.lo; --L) {
    const int64_t limit = suffix_spec_limit(L, a.factor, a.offset, a.cap);
    if (!worth_walking(sh, L, limit, a.depth, a.bar)) continue;
    const float above = score_to_beat(sh, a.bar);
    if (!clean) {
      FDSPEC_PROF(const long long clean_start = clock64();)
      clean_block_path(sh);
      __syncthreads();
      FDSPEC_PROF_ADD(20, clock64() - clean_start);
      clean = true;
    }
    int m = 0;
    const float score = block_walk(sh, src, L, limit, a, above, &m);
    if (m >= 0) keep_block_draft(sh, score, L, m);
  }
  FDSPEC_PROF_SET(6, clock64());
}

// The best draft's tokens into sh.best (a warp-path winner's from its warp's copy). Uniform call.
template <int kCandCap>
__device__ __forceinline__ void core_finish(CoreShared<kCandCap>& sh, const CoreArgs&) {
  if (sh.best_from_warp > 0) {
    const DraftBuf& src = sh.wdraft[sh.best_from_warp - 1];
    for (int k = threadIdx.x; k < sh.best_info.m; k += kThreads) {
      sh.best.tokens[k] = src.tokens[k];
      sh.best.probs[k] = src.probs[k];
    }
  }
  __syncthreads();
}

}  // namespace suffix_gpu
}  // namespace fdspec
