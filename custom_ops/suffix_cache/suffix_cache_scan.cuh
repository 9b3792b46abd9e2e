// suffix_cache: the scan of the selected cache lines (pass 1, and pass 2 for very frequent
// suffixes).
// Part of suffix_cache.cu's one translation unit (included there, and only there: the kernels
// keep internal linkage and the profiler's per-unit tables). Design: docs/design/suffix_cache.md.
#pragma once

#include "suffix_cache/suffix_cache_scan_parts.cuh"

namespace fdspec {
namespace {

// One pass over the occupied positions. A position whose key is a group's (table 1) and whose G
// tokens are the group's is a hit of every slot of the group: l >= G for all of them. Only the
// group's *members* (slots with c >= G + 2) whose token before the G is the position's (table 2)
// can match longer; they alone are verified further. So a hit costs one group count, not one
// verification per slot, however many slots end with a frequent token.
// pass 1: counts n_G per group and, per member, the hits with l > G by l; and fills the candidate
//         lists: a group's hits (list 0 at its rep), a member's hits with l >= G + j (its list j).
// pass 2: only for members whose shortest usable match length L_min exceeds G + kSuffixMemberLists
//         (the lists of pass 1 then hold more than M): their hits with l >= L_min, in their last
//         list.
// kScanMinBlocks: the register bound (suffix_cache_device.cuh).
__global__ void __launch_bounds__(kThreads, kScanMinBlocks)
    query_scan_kernel(SuffixCacheQueryParams q, int pass, uint32_t table_size, int task_lines,
                      bool block_units, FastDivisor row_lines) {
  extern __shared__ __align__(16) unsigned char scan_smem[];
  FDSPEC_PROF(long long phase_clock = clock64();)
  const SuffixMatchParams& p = q.m;
  const int64_t B = p.batch;
  // Pass 1 reads prep's descriptors before any wait and waits for the local search only before it
  // exits; pass 2 waits first (ordering rules O1-O3, docs/design/suffix_cache.md).
  if (pass == 2) {
    wait_for_primary_grid();
    allow_dependent_launch();
    if (*store_flag(q) == 0) return;
  }
  const bool agg = pass == 1 && B <= kAggSlots;
  const SuffixCache& c = q.cache;
  const ScanLayout lay = scan_layout(B, table_size, agg);
  // The parts (ScanPart says what each holds).
  auto i32 = [&](ScanPart k) { return reinterpret_cast<int32_t*>(scan_smem + lay.at[k]); };
  int64_t* sprev = reinterpret_cast<int64_t*>(scan_smem + lay.at[kScanPrev]);
  int32_t *tkey = i32(kScanTkey), *trep = i32(kScanTrep), *tmem = i32(kScanTmem);
  int32_t *srep = i32(kScanSrep), *sctx = i32(kScanSctx), *sn = i32(kScanSn);
  int32_t *skind = i32(kScanSkind), *sprev2 = i32(kScanSprev2), *agg_hits = i32(kScanAggHits);
  int32_t* agg_hist = i32(kScanAggHist);
  uint32_t* full = reinterpret_cast<uint32_t*>(i32(kScanFull));
  int2* queue =
      reinterpret_cast<int2*>(scan_smem + lay.at[kScanQueue]) + threadIdx.x / 32 * kHitQueue;
  int32_t* qcount = i32(kScanQcount) + threadIdx.x / 32;
  const int G = c.key_len;
  const int M = q.max_occurrences;
  const int J = kSuffixMemberLists;
  const int64_t W = p.token_ids_stride;
  const uint32_t mask = table_size - 1;
  const int bits = __ffs(static_cast<int>(table_size)) - 1;
  // A thread's first descriptor is requested before the clears, so that its round trip covers them.
  int4 first0 = make_int4(0, 0, 0, 0), first1 = make_int4(0, 0, 0, 0);
  if (threadIdx.x < B) load_desc(q, threadIdx.x, &first0, &first1);
  for (uint32_t j = threadIdx.x; j < table_size; j += kThreads) {
    trep[j] = -1;
    tmem[j] = -1;
  }
  // 32-bit indices (B <= kMaxSuffixCacheBatch): with 64-bit ones these loops and the flush's were
  // 7 % of the scan's instructions, paid by every block (ncu source counters, B = 64, 10k
  // responses).
  const int Bi = static_cast<int>(B);
  for (int j = threadIdx.x; j < (Bi * kSuffixCandLists + 31) / 32; j += kThreads) full[j] = 0;
  __shared__ int any_frequent;  // some member is matched on its last two (or three) tokens
  if (threadIdx.x == 0) any_frequent = 0;
  if (agg) {
    for (int j = threadIdx.x; j < Bi * kAggLen; j += kThreads) agg_hist[j] = 0;
  }
  __syncthreads();
  for (int64_t b = threadIdx.x; b < B; b += kThreads) {
    const int32_t* st = stat_row(q, b);
    // The slot's descriptor. A list that other blocks have already filled is learnt at this block's
    // first offer to it: reading the five counts of every slot here cost more.
    int4 d0 = first0, d1 = first1;
    if (b != threadIdx.x) load_desc(q, b, &d0, &d1);
    const ScanRole role = scan_role(d0.x, d1.x, d0.z, desc_prev(d1), d1.w, G);
    const int ctx_len = d0.x;
    agg_hits[b] = 0;
    sctx[b] = ctx_len;
    sn[b] = d0.y;
    if (ctx_len == 0) continue;
    const int32_t key = d0.z;
    const int32_t rep = d0.w;
    const int kind = d1.x;
    skind[b] = kind;
    // Pass 2 needs the scanned groups of its members only; the others' hits then find no member.
    if (role.tabled && rep == b && (pass == 1 || st[kSuffixStatHits] > M)) {
      uint32_t h = table_hash(key, bits);
      while (atomicCAS(&trep[h], -1, static_cast<int32_t>(b)) != -1) h = (h + 1) & mask;
      tkey[h] = key;
    }
    const bool member =
        role.member && (pass == 1 || (st[kSuffixStatHits] > M && st[kSuffixStatLmin] > G + J &&
                                      st[kSuffixStatLmin] < ctx_len));
    if (member) {
      // A scanned group's member is found through its group, a frequent token's by its last two
      // tokens (the key is the token), and then by the one before them too when those two are
      // frequent: srep holds the group, or the token.
      const int64_t prev = desc_prev(d1);
      const int32_t via = kind == kSuffixKindScanned ? rep : key;
      srep[b] = via;
      sprev[b] = prev;
      sprev2[b] = d1.w;
      if (kind != kSuffixKindScanned) atomicOr(&any_frequent, 1);
      uint32_t h = member_hash(via, prev, mask);
      while (atomicCAS(&tmem[h], -1, static_cast<int32_t>(b)) != -1) h = (h + 1) & mask;
    }
  }
  __syncthreads();
  if (pass == 1) allow_dependent_launch();  // ordering rule O2's exception: prep2 waits first
  SCAN_PHASE(0);
  const int lane = threadIdx.x & 31;
  if (lane == 0) *qcount = 0;
  __syncwarp();
  // A member hit: slot s's last G + 1 tokens (G + 2 when pair-frequent) end at `off` of row r. Its
  // match length l (up to lim = c - 1 and within the row: l <= off + 1) is compared a token per
  // round trip, from `first` on and up to `stop`: most member hits end within a token or two, and
  // comparing 2, 4 or 8 at a time per lane read more than it saved, or took registers.
  auto member_first = [&](int32_t s) { return G + 1 + (skind[s] == kSuffixKindPairFrequent); };
  auto member_lim = [&](int32_t s, int off) { return min_of<int>(sctx[s] - 1, off + 1); };
  auto member_len = [&](int64_t r, int32_t s, int off, int l, int stop) {
    const int64_t* toks = c.tokens + r * c.width;
    const int64_t* send = p.token_ids_all + s * W + sn[s];
    while (l < stop && toks[off - l] == send[-1 - l]) ++l;
    return l;
  };
  // Its match length counted, and the hit offered to the lists.
  auto member_record = [&](int64_t r, int32_t s, int off, int l) {
    int32_t* sst = stat_row(q, s);
    const int64_t e = suffix_cand_pack(suffix_row_req(c.rows[2 * r]), off, l);
    if (pass == 1) {
      if (agg && l < kAggLen) {
        atomicAdd(&agg_hist[s * kAggLen + l], 1);
      } else {
        atomicAdd(&sst[kSuffixStatHist + l], 1);
      }
      // The lists the hit enters (list 1 of a pair-frequent is never read), their counts taken
      // together: offered one after another, each list's full bit waited for the previous count's
      // round trip (a hit copied from a cached response enters all four).
      const int first = 1 + (skind[s] == kSuffixKindPairFrequent);
      const int last = min_of(J, l - G);
      int at[kSuffixMemberLists];
#pragma unroll
      for (int j = 1; j <= kSuffixMemberLists; ++j) {
        at[j - 1] = M;
        if (j >= first && j <= last && !list_full(full, s, j))
          at[j - 1] = atomicAdd(list_count(q, s, j), 1);
      }
#pragma unroll
      for (int j = 1; j <= kSuffixMemberLists; ++j) {
        if (at[j - 1] >= M) continue;
        if (at[j - 1] + 1 >= M) mark_list_full(full, s, j);
        cand_list(q, s, j)[at[j - 1]] = e;
      }
    } else if (l >= sst[kSuffixStatLmin]) {
      const int at = atomicAdd(list_count(q, s, J), 1);
      if (at < M) cand_list(q, s, J)[at] = e;  // at < M always: n_{L_min} <= M
    }
  };
  auto member_hit = [&](int64_t r, int32_t s, int off) {
    member_record(r, s, off, member_len(r, s, off, member_first(s), member_lim(s, off)));
  };
  // The queued hits, 32 at a time (`all`) or the rest (when the warp has no line left): every lane
  // verifies one, so the warp waits once for 32 verifications and their offers, not once per line
  // with a hit. The member hits were most of the scan's time; the queue pays at large batches and
  // caches, and costs a little at small batches, where a row has few hits and its upkeep costs more
  // than it saves.
  auto drain = [&](bool all) {
    __syncwarp();
    const int n = *qcount;
    if (all ? n < 32 : n == 0) return;  // uniform over the warp
    const int take = min_of(n, 32);
    const bool mine = lane < take;
    int64_t r = 0;
    int32_t s = 0;
    int off = 0, l = 0, lim = 0, stop = 0;
    if (mine) {
      r = queue[lane].y;
      s = queue[lane].x & 0x7ff;
      off = queue[lane].x >> 11;
      lim = member_lim(s, off);
      l = member_first(s);
      stop = min_of(lim, l + kSerialMatch);
      l = member_len(r, s, off, l, stop);
    }
    // The few that matched kSerialMatch tokens more (a context copied from a cached response
    // matches it for up to c - 1 tokens: one round trip per token made the longest of them the
    // scan's critical path) go on with the whole warp, 64 tokens per round trip.
    for (unsigned longs = __ballot_sync(kFull, mine && l == stop && l < lim); longs != 0;
         longs &= longs - 1) {
      const int src = __ffs(longs) - 1;
      const int64_t lr = __shfl_sync(kFull, r, src);
      const int32_t ls = __shfl_sync(kFull, s, src);
      const int loff = __shfl_sync(kFull, off, src), llim = __shfl_sync(kFull, lim, src);
      const int64_t* toks = c.tokens + lr * c.width + loff;
      const int64_t* send = p.token_ids_all + ls * W + sn[ls] - 1;
      const int x = warp_extend_match(toks, send, __shfl_sync(kFull, l, src), llim);
      if (lane == src) l = x;
    }
    if (mine) member_record(r, s, off, l);
    __syncwarp();
    if (lane + 32 < n) queue[lane] = queue[lane + 32];  // n <= kHitQueue = 64
    __syncwarp();
    if (lane == 0) *qcount = n - take;
    __syncwarp();
  };
  // The lines a warp reads: with `block_units`, a block takes a unit of kWarps * task_lines lines
  // of the cache at a time (in row order) and its warps share out, in order, the lines of the unit
  // whose bit of the line mask is set (filter_lines; every line without the filter): warp w the
  // w-th eighth of them. Else a warp takes task_lines lines at a time and reads the selected ones
  // itself. A unit of a warp's own made the warp that drew the lines of a copied response, all
  // selected, the scan's slowest by far, but where the mask selects few lines of a unit (100k
  // responses) the shared units were slower (kBlockUnitWordsPerSlot). The member hits a warp queues
  // carry their row, so a batch of 32 may span lines and rows.
  const bool filtered = c.line_planes > 0;
  const int64_t words = suffix_line_words(c.num_rows, c.width);
  const int unit_words = kWarps * task_lines / 32;  // <= kMaxUnitWords
  const int warp = static_cast<int>(threadIdx.x / 32);
  int64_t r = -1, req = -1;  // the row of the line last read, its request and length
  int len = 0;
  // Line li of the cache: its positions' hits (uniform over the warp).
  auto scan_line = [&](int64_t li) {
    int64_t line_in_row = 0;
    const int64_t line_row = fast_divmod(li, row_lines, &line_in_row);  // lines per row
    if (line_row >= c.num_rows) return;
    // The line's keys are loaded with its row's state (a new row's), not after it: positions past
    // the row's length are read (within its width) but not used.
    const int base = G - 1 + static_cast<int>(line_in_row) * 32;
    const int off = base + lane;
    const int32_t* keys = c.keys + line_row * c.width;
    const int32_t line_key = off < c.width ? keys[off] : 0;
    const int32_t line_key_before = lane == 0 && off >= 1 ? keys[off - 1] : 0;
    if (line_row != r) {
      r = line_row;
      req = suffix_row_req(c.rows[2 * r]);
      len = static_cast<int>(suffix_row_len(req, c.rows[2 * r + 1], c.width));  // <= width <= 2^16
    }
    if (req < 0 || base >= len) return;
    SCAN_PROF_LINE();
    const int64_t* toks = c.tokens + r * c.width;
    const int32_t key = off < len ? line_key : 0;
    int32_t key_before = __shfl_up_sync(kFull, key, 1);  // the position off - 1's (G = 1)
    if (lane == 0) key_before = line_key_before;
    int32_t g = -1;  // the group whose last G tokens end here
    if (off < len) {
      for (uint32_t h = table_hash(key, bits); trep[h] != -1; h = (h + 1) & mask) {
        if (tkey[h] != key) continue;
        const int32_t rep = trep[h];
        if (!suffix_cache_key_exact(key, G)) {
          const int64_t* gend = p.token_ids_all + rep * W + sn[rep];  // one past its last token
          bool same = true;
          for (int j = 0; j < G && same; ++j) same = toks[off - j] == gend[-1 - j];
          if (!same) continue;  // a hash collision: another group may own the key
        }
        g = rep;
        break;  // the position's G tokens are one group's
      }
    }
    if (pass == 1) {
      // The lanes of one group count (a scanned group) and offer their hits together: one shared
      // and at most one global atomic per group and line.
      const unsigned peers = __match_any_sync(kFull, g);
      if (g >= 0) {
        const int leader = __ffs(peers) - 1;
        const int n = __popc(peers);
        int at = 0;
        if (lane == leader) {
          if (skind[g] == kSuffixKindScanned) atomicAdd(&agg_hits[g], n);
          at = offer(q, full, g, 0, n);
        }
        at = __shfl_sync(peers, at, leader) + __popc(peers & ((1u << lane) - 1));
        if (at < M) cand_list(q, g, 0)[at] = suffix_cand_pack(req, off, 0);
      }
    }
    const bool scanned = off >= G && g >= 0 && skind[g] == kSuffixKindScanned;
    const bool exact = off >= G && any_frequent && off < len && suffix_cache_key_exact(key, G);
    if (scanned || exact) {
      const int64_t before = suffix_cache_key_exact(key_before, G) ? key_before : toks[off - G];
      // The members whose last G + 1 tokens end here: of a scanned group, through the group; of
      // a frequent token (G = 1), by the token itself and the one before, and a pair-frequent
      // member's also by the token before them (the row's key two back, read only for these).
      // Queued (a full queue: handled here).
      for (int route = 0; route < 2; ++route) {
        if (route == 0 ? !scanned : !exact) continue;
        const int32_t via = route == 0 ? g : key;
        for (uint32_t h2 = member_hash(via, before, mask); tmem[h2] != -1; h2 = (h2 + 1) & mask) {
          const int32_t s = tmem[h2];
          const int kind = skind[s];
          if ((route == 0) != (kind == kSuffixKindScanned) || srep[s] != via ||
              sprev[s] != before) {
            continue;
          }
          // The row's keys are read only: the read-only path (a plain load took the scan from 40 to
          // 48 registers when 40 was its bound).
          if (kind == kSuffixKindPairFrequent && (off < 2 || __ldg(&keys[off - 2]) != sprev2[s]))
            continue;
          SCAN_PROF_HIT();
          const int at = atomicAdd(qcount, 1);
          if (at < kHitQueue) {
            queue[at] = make_int2(s | off << 11, static_cast<int32_t>(r));  // s < 2^11, off < 2^16
          } else {
            atomicSub(qcount, 1);
            member_hit(r, s, off);
          }
        }
      }
    }
    drain(true);
  };
  const int64_t tasks = block_units ? 0 : words * (32 / task_lines);
  for (int64_t t = blockIdx.x * static_cast<int64_t>(kWarps) + warp; t < tasks;
       t += static_cast<int64_t>(gridDim.x) * kWarps) {
    const uint32_t all = (1u << task_lines) - 1;  // task_lines < 32
    uint32_t lines =
        filtered ? q.line_mask[t * task_lines / 32] >> (t * task_lines % 32) & all : all;
    for (; lines != 0; lines &= lines - 1) scan_line(t * task_lines + __ffs(lines) - 1);  // uniform
  }
  for (int64_t u = blockIdx.x; block_units && u * unit_words < words; u += gridDim.x) {
    // Lane k < unit_words holds the unit's word k; `upto` the lines selected in words 0 .. k.
    const int64_t w0 = u * unit_words;
    uint32_t mine = 0;
    if (lane < unit_words && w0 + lane < words) mine = filtered ? q.line_mask[w0 + lane] : ~0u;
    int upto = __popc(mine);
    for (int o = 1; o < kMaxUnitWords; o <<= 1) {
      const int v = __shfl_up_sync(kFull, upto, o);
      if (lane >= o) upto += v;
    }
    const int selected = __shfl_sync(kFull, upto, kMaxUnitWords - 1);
    const int lo = selected * warp / kWarps, hi = selected * (warp + 1) / kWarps;
    if (lo >= hi) continue;  // uniform
    // The line of rank lo is in the first word whose `upto` exceeds lo; the warp's next lines are
    // the next set bits, word after word (__fns per line was 8 % of the scan's instructions).
    int k = __popc(__ballot_sync(kFull, lane < unit_words && upto <= lo));
    uint32_t word = __shfl_sync(kFull, mine, k);
    for (int skip = lo - (__shfl_sync(kFull, upto, k) - __popc(word)); skip > 0; --skip)
      word &= word - 1;
    for (int i = lo; i < hi; ++i) {
      while (word == 0) word = __shfl_sync(kFull, mine, ++k);  // uniform; a later word has the line
      scan_line((w0 + k) * 32 + __ffs(word) - 1);
      word &= word - 1;
    }
  }
  SCAN_PHASE(1);
  drain(false);
  SCAN_PHASE(2);
  if (pass != 1) return;
  // Ordering rule O1 (the local search's end). The counts are flushed after it: before it, their
  // atomics met the local search's traffic.
  wait_for_primary_grid();
  __syncthreads();
  SCAN_PHASE(3);
  for (int b = threadIdx.x; b < Bi; b += kThreads) {
    if (agg_hits[b] != 0) atomicAdd(&stat_row(q, b)[kSuffixStatGroup], agg_hits[b]);
  }
  if (agg) {
    for (int j = threadIdx.x; j < Bi * kAggLen; j += kThreads) {
      if (agg_hist[j] != 0)
        atomicAdd(&stat_row(q, j / kAggLen)[kSuffixStatHist + j % kAggLen], agg_hist[j]);
    }
  }
  SCAN_PHASE(4);
}

}  // namespace
}  // namespace fdspec
