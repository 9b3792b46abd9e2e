// suffix_cache: the global search (a block per slot) and its winner against the local draft.
// Part of suffix_cache.cu's one translation unit (included there, and only there: the kernels
// keep internal linkage and the profiler's per-unit tables). Design: docs/design/suffix_cache.md.
#pragma once

#include <cuda_pipeline.h>

#include "suffix_cache/suffix_cache_device.cuh"

namespace fdspec {
namespace {

// The occurrences of the cache: key = a packed candidate (request, offset, l), whose order is the
// tie rule's (request number, offset). Where each candidate's continuation lies is worked out once,
// when the candidates are loaded (a 64-bit modulo and the row's length), into two shared arrays, so
// that a block-path step reads one token per member and nothing else.
struct CacheSource {
  const int64_t* tokens;   // the cache's rows
  const int64_t* next_at;  // shared, per candidate: index in `tokens` of the token after it
  const int32_t* after;    // shared, per candidate: how many tokens its row holds after it
  __device__ int64_t token(int j, unsigned long long, int k, bool* has) const {
    *has = k < after[j];
    return *has ? tokens[next_at[j] + k] : 0;
  }
  __device__ int avail(int j, unsigned long long, int window) const {
    return after[j] < window ? after[j] : window;
  }
};

// The search's shared memory: the core's, then the candidates' continuation places.
template <int kCandCap>
struct SearchShared {
  suffix_gpu::CoreShared<kCandCap> core;
  int64_t next_at[kMaxSuffixCacheOccurrences];
  int32_t after[kMaxSuffixCacheOccurrences];
  int64_t ctx[kMaxSuffixTreeDepth];         // the context, ctx[c - 1] its last token
  int n_long;                               // candidates whose first kFirstRound tokens all matched
  int32_t hist[kMaxSuffixTreeDepth];        // candidates with l == L, for L in [L_min, c)
  float local_probs[kMaxSuffixSpecTokens];  // the local draft's probabilities
  int64_t local_tokens[kMaxSuffixSpecTokens];  // and its tokens (a decoding slot's)
};
constexpr int kLoadPer =
    kMaxSuffixCacheOccurrences / suffix_gpu::kThreads;  // candidates per thread
constexpr int kFirstRound = 4;  // match tokens compared for every candidate at once
template <int kCandCap>
constexpr size_t kSearchSmem = sizeof(SearchShared<kCandCap>);
static_assert(suffix_gpu::kCandCapSmall >= kMaxSuffixCacheOccurrences,
              "the core holds every candidate");

// A slot's draft as its search block holds it for the finish: its length and its tokens, in shared
// memory.
struct HeldDraft {
  int64_t m;
  const int64_t* tokens;
};

// Slot b's global search and, when its draft scores higher than the local one, the winner written
// (block-uniform returns); returns the slot's draft, the winner's.
template <int kCandCap>
__device__ HeldDraft global_search_slot(const SuffixCacheQueryParams& q, FastDivisor rows,
                                        SearchShared<kCandCap>& ss) {
  suffix_gpu::CoreShared<kCandCap>& sh = ss.core;
  const int64_t b = blockIdx.x;
  const SuffixMatchParams& p = q.m;
  const int32_t* st = stat_row(q, b);
  // Before the wait (ordering rule O3, docs/design/suffix_cache.md): the slot's place and cap, its
  // context (c as prep works it out: describe_slot) and the local draft. A decoding slot's inputs
  // are read whether or not it queries the cache.
  const SuffixSlot v = suffix_slot(p, b);
  const int64_t K = p.draft_stride - 1;
  const int64_t m_local = clamp_to<int64_t>(p.suffix_meta[2 * b], 0, K);
  const bool decoding = suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b]);
  const int c_in = decoding ? static_cast<int>(min_of<int64_t>(p.max_tree_depth, v.n)) : 0;
  for (int k = threadIdx.x; k < kMaxSuffixTreeDepth; k += suffix_gpu::kThreads) {
    if (k < c_in) ss.ctx[k] = v.row[v.n - c_in + k];
    if (k < m_local) ss.local_probs[k] = p.suffix_probs[b * K + k];
    if (decoding && k < m_local) ss.local_tokens[k] = p.suffix_tokens[b * K + k];
  }
  const HeldDraft local_draft{m_local, ss.local_tokens};
  // Then the slot's statistics, issued together (one round trip, where each read waited for the one
  // before): its fields, its histogram (read whole, used below only by an own list), and the
  // length of the list it reads (prep2's); volatile: ordering rule O4. Before the wait too:
  // ordering rule O3b; a refilled list's count, the second scan's, is read after it.
  const volatile int32_t* const vst = st;
  const int c = vst[kSuffixStatCtx];
  const int list = vst[kSuffixStatList];
  const int st_lmin = vst[kSuffixStatLmin];
  const int64_t st_rep = vst[kSuffixStatRep];
  const int st_read = vst[kSuffixStatRead];
  int32_t hist_k[(kMaxSuffixTreeDepth + suffix_gpu::kThreads - 1) / suffix_gpu::kThreads];
#pragma unroll
  for (int i = 0; i * suffix_gpu::kThreads < kMaxSuffixTreeDepth; ++i) {
    const int k = i * suffix_gpu::kThreads + static_cast<int>(threadIdx.x);
    hist_k[i] = k < kMaxSuffixTreeDepth ? st[kSuffixStatHist + k] : 0;
  }
  wait_for_primary_grid();
  allow_dependent_launch();  // the walk waits for this grid's end
#ifdef FDSPEC_PROFILE
  for (int k = 1; k < profiler::kSlots; ++k) FDSPEC_PROF_SET(k, 0);
  FDSPEC_PROF_SET(0, clock64());
#endif
  if (c == 0) return local_draft;  // not querying (c == c_in otherwise)
  const int G = q.cache.key_len;
  const int M = q.max_occurrences;
  // n_G <= M: every hit is a candidate, in the group's list (its rep's list 0), and the match
  // length against this slot's context is measured here; else the slot's own list of hits with l >=
  // L_min.
  if (list < 0) return local_draft;  // no match length with at most M occurrences
  const bool own = list > 0;
  const int lmin = own ? st_lmin : G;
  const int64_t from = own ? b : st_rep;
  const int n = st_read >= 0 ? st_read : min_of<int>(*list_count(q, from, list), M);
  const int64_t* cands = cand_list(q, from, list);
  // Each thread's candidates (at most kLoadPer) copied into their places in sh.key (written again
  // below), all in flight at once: as loads into registers, ptxas issued a thread's third and
  // fourth only once its first had returned and been used, a round trip later.
#pragma unroll
  for (int i = 0; i < kLoadPer; ++i) {
    const int j = i * suffix_gpu::kThreads + static_cast<int>(threadIdx.x);
    if (j < n) __pipeline_memcpy_async(&sh.key[j], cands + j, sizeof(int64_t));
  }
  __pipeline_commit();
  // The histogram into shared memory. An own list's is the scan's; a group's list (own == false)
  // has its match lengths measured below and histogrammed there, since a counted group has no
  // member path in the scan to count them.
#pragma unroll
  for (int i = 0; i * suffix_gpu::kThreads < kMaxSuffixTreeDepth; ++i) {
    const int k = i * suffix_gpu::kThreads + static_cast<int>(threadIdx.x);
    if (k < kMaxSuffixTreeDepth) ss.hist[k] = own && k >= lmin && k < c ? hist_k[i] : 0;
  }
  if (threadIdx.x == 0) ss.n_long = 0;
  __syncthreads();
  FDSPEC_PROF_SET(2, clock64());
  // The candidates' places, and for a group's list (match lengths not measured yet) the first
  // kFirstRound tokens of each, every load in flight at once; the rare longer matches then go on a
  // candidate at a time.
  __pipeline_wait_prior(0);  // the thread's own copies: it reads only those
  int64_t ev[kLoadPer], rv[kLoadPer];
  int limv[kLoadPer];
#pragma unroll
  for (int i = 0; i < kLoadPer; ++i) {
    const int j = i * suffix_gpu::kThreads + static_cast<int>(threadIdx.x);
    ev[i] = j < n ? static_cast<int64_t>(sh.key[j]) : 0;
    rv[i] = fast_mod(suffix_cand_req(ev[i]), rows);
    limv[i] =
        j < n && !own ? static_cast<int>(min_of<int64_t>(c - 1, suffix_cand_off(ev[i]) + 1)) : 0;
  }
  int64_t tok[kLoadPer][kFirstRound];
  int32_t row_len[kLoadPer];  // <= width
#pragma unroll
  for (int i = 0; i < kLoadPer; ++i) {
    const int64_t* at = q.cache.tokens + rv[i] * q.cache.width + suffix_cand_off(ev[i]);
#pragma unroll
    for (int u = 0; u < kFirstRound; ++u) tok[i][u] = u < limv[i] ? at[-u] : 0;
    // With the tokens: where its continuation ends.
    row_len[i] = static_cast<int32_t>(suffix_row_len(suffix_row_req(q.cache.rows[2 * rv[i]]),
                                                     q.cache.rows[2 * rv[i] + 1], q.cache.width));
  }
  // Match lengths of a group's list: the first kFirstRound tokens of every candidate compared at
  // once; the candidates whose first tokens all matched (copies of the context's phrase elsewhere,
  // and the response it was copied from) are then listed for the whole block and measured a warp
  // each, 64 tokens per round trip: a thread measuring its own, a few tokens per round trip, held
  // its block for up to 15, and a warp measuring its threads' in turn, for up to 24 (a group's list
  // of 24 candidates lies in one warp). While listed, a long candidate's place in the cache is in
  // next_at, its bound in len, and the list in after (all written again below).
  int lv[kLoadPer];
#pragma unroll
  for (int i = 0; i < kLoadPer; ++i) {
    const int j = i * suffix_gpu::kThreads + static_cast<int>(threadIdx.x);
    lv[i] = 0;
#pragma unroll
    for (int u = 0; u < kFirstRound; ++u) {
      lv[i] += (lv[i] == u && u < limv[i] && tok[i][u] == ss.ctx[c - 1 - u]) ? 1 : 0;
    }
    if (lv[i] == kFirstRound && kFirstRound < limv[i]) {
      ss.next_at[j] = rv[i] * q.cache.width + suffix_cand_off(ev[i]);
      sh.len[j] = static_cast<uint8_t>(limv[i]);  // <= c - 1 <= 255
      ss.after[atomicAdd(&ss.n_long, 1)] = j;
    }
  }
  __syncthreads();
  {
    const int lane = static_cast<int>(threadIdx.x & 31);
    const int n_long = ss.n_long;
    for (int x = static_cast<int>(threadIdx.x / 32); x < n_long;
         x += suffix_gpu::kWarps) {  // uniform
      const int j = ss.after[x];
      const int64_t* at = q.cache.tokens + ss.next_at[j];
      const int y = warp_extend_match(at, ss.ctx + c - 1, kFirstRound, sh.len[j]);
      __syncwarp();
      if (lane == 0) sh.len[j] = static_cast<uint8_t>(y);
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kLoadPer; ++i) {
    const int j = i * suffix_gpu::kThreads + static_cast<int>(threadIdx.x);
    if (lv[i] == kFirstRound && kFirstRound < limv[i]) lv[i] = sh.len[j];
  }
  FDSPEC_PROF_SET(3, clock64());
#pragma unroll
  for (int i = 0; i < kLoadPer; ++i) {
    const int j = i * suffix_gpu::kThreads + static_cast<int>(threadIdx.x);
    // The histogram of a group's list: the lanes with equal match lengths add together (most of a
    // frequent token's candidates share one, and a shared atomic per candidate queued them).
    const int hl = j < n && !own ? lv[i] : -1;
    const unsigned peers = __match_any_sync(suffix_gpu::kFull, hl);
    if (hl >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&ss.hist[hl], __popc(peers));
    if (j >= n) continue;
    const int64_t off = suffix_cand_off(ev[i]);
    const int64_t row_at = rv[i] * q.cache.width;
    int64_t e = ev[i];
    if (!own) e = suffix_cand_pack(suffix_cand_req(e), off, lv[i]);  // l <= off and l <= c - 1
    sh.key[j] = static_cast<unsigned long long>(e);
    sh.len[j] = static_cast<uint8_t>(suffix_cand_len(e));
    ss.next_at[j] = row_at + off + 1;
    ss.after[j] = static_cast<int32_t>(max_of<int64_t>(row_len[i] - off - 1, 0));
  }
  __syncthreads();
  // n_L <= 32 from short_end on; last_l the longest L that occurs. n_L (the candidates with l >= L)
  // grows as L falls: every warp sums the histogram from the top, 32 match lengths at a time (a
  // thread's loop over them was a chain of up to 63 shared loads).
  int short_end = c, last_l = 0;
  {
    const int lane = static_cast<int>(threadIdx.x & 31);
    int above = 0;                                   // n_{top + 1}
    for (int top = c - 1; top >= lmin; top -= 32) {  // uniform over the block
      const int L = top - lane;
      int nL = L >= lmin ? ss.hist[L] : 0;
      for (int o = 1; o < 32; o <<= 1) {
        const int u = __shfl_up_sync(suffix_gpu::kFull, nL, o);
        if (lane >= o) nL += u;
      }
      const int chunk = __shfl_sync(suffix_gpu::kFull, nL, 31);
      nL += above;
      const unsigned occurs = __ballot_sync(suffix_gpu::kFull, L >= lmin && nL >= 1);
      if (last_l == 0 && occurs != 0) last_l = top - (__ffs(occurs) - 1);
      const unsigned valid = __ballot_sync(suffix_gpu::kFull, L >= lmin);
      const unsigned small =
          __ballot_sync(suffix_gpu::kFull, L >= lmin && nL <= suffix_gpu::kWarpSet);
      if (small != 0) short_end = top - (__popc(small) - 1);  // a prefix of the valid lanes
      if (small != valid) break;
      above += chunk;
    }
  }
  if (threadIdx.x == 0) sh.n = n;
  __syncthreads();
  FDSPEC_PROF_SET(1, clock64());
  FDSPEC_PROF_SET(13, n);
  FDSPEC_PROF_SET(14, short_end);
  FDSPEC_PROF_SET(15, lmin * 1000 + last_l);
  if (last_l == 0) return local_draft;  // no suffix of length >= L_min occurs

  // The local draft's score (its probabilities loaded with the context): the global one matters
  // only if it scores strictly higher.
  float local = 0.0f;
  for (int64_t k = 0; k < m_local; ++k) local = fadd_rn(local, ss.local_probs[k]);

  const suffix_gpu::CoreArgs a = suffix_gpu::core_args(p, v.cap, lmin, short_end, last_l, local);
  suffix_gpu::core_search(sh, CacheSource{q.cache.tokens, ss.next_at, ss.after}, a);
  const suffix_gpu::Best best = sh.best_info;
  FDSPEC_PROF_SET(7, clock64());
  if (!(best.score > local))
    return local_draft;  // uniform: every thread reads the same shared best
  suffix_gpu::core_finish(sh, a);
  for (int64_t j = threadIdx.x; j < K; j += suffix_gpu::kThreads) {
    p.suffix_tokens[b * K + j] = j < best.m ? sh.best.tokens[j] : -1;
    p.suffix_probs[b * K + j] = j < best.m ? sh.best.probs[j] : 0.0f;
  }
  if (threadIdx.x == 0) {
    p.suffix_meta[2 * b] = best.m;
    p.suffix_meta[2 * b + 1] = best.L;
    q.source[b] = 1;
  }
  FDSPEC_PROF_SET(8, clock64());
  return HeldDraft{best.m, sh.best.tokens};
}

// `finish`: the batch budget cannot bind (suffix_budget_never_binds), so each block also writes its
// slot's outcome as the walk would, and no walk kernel runs (one launch and its latency fewer).
// kSearchMinBlocks: the register bound (suffix_cache_device.cuh).
template <int kCandCap>
__global__ void __launch_bounds__(suffix_gpu::kThreads, kSearchMinBlocks)
    query_search_kernel(SuffixCacheQueryParams q, FastDivisor rows, bool finish) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const HeldDraft d = global_search_slot(
      q, rows, *reinterpret_cast<SearchShared<kCandCap>*>(smem_raw));  // waits inside
  const int64_t b = blockIdx.x;
  if (finish)
    suffix_finish_slot(q.m, b, q.m.seq_lens_encoder[b], q.m.seq_lens_decoder[b], d.m, d.tokens);
}

}  // namespace
}  // namespace fdspec
