// suffix_cache: CUDA implementation (docs/contract/suffix.md, "The global cache"). No Paddle
// include.
//
// Insert: one kernel, a block per slot: request numbers in slot order, a taken row's old response
// out of the counts, pair counts and line filter, the new tokens, their keys, counts and filter
// bits in. Query, per step, for all slots at once: suffix_match's local search (beside prep and the
// first scan when B <= SMs); prep (each slot's key, group and counted frequency) with the line mask
// beside it; the scan of the selected cache lines (a warp per unit of lines, a shared table of the
// groups' keys, member hits queued and verified 32 at a time, the candidate lists filled); prep2
// (each slot's shortest usable match length and its list); a second scan only for very frequent
// suffixes; the search (suffix_draft.cuh's core on the slot's candidates, the winner against the
// local draft); the budget walk, or each search block's own finish when the budget cannot bind.
// Determinism: every result is a count or a minimum, so every rank with the same tokens drafts the
// same. Design: docs/design/suffix_cache.md; profiling probes: common/profiler.cuh.
#include "suffix_cache/suffix_cache.h"

#ifdef FDSPEC_PROFILE
#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>
#endif

#include <cuda_pipeline.h>

#include "common/cuda_utils.cuh"
#include "suffix_match/suffix_draft.cuh"
#include "suffix_match/suffix_walk.cuh"

namespace fdspec {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

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

// ---- insert -------------------------------------------------------------------------------------

// Clears row r's lines in every plane of the line filter (the block's threads together, a plane
// each; atomic, since a neighbouring row's lines may share the word and be set meanwhile).
__device__ __forceinline__ void clear_lines(const SuffixCache& c, int64_t r) {
  const int64_t words = suffix_line_words(c.num_rows, c.width);
  for (int64_t p = threadIdx.x; p < c.line_planes; p += blockDim.x) {
    suffix_row_line_masks(r, c.width,
                          [&](int64_t w, uint32_t m) { atomicAnd(&c.lines[p * words + w], m); });
  }
}

// Sets the line filter's bits of the items of row r's positions [from, to), whose tokens and keys
// every thread of the block can read (the block's threads together).
__device__ __forceinline__ void mark_lines(const SuffixCache& c, int64_t r, int64_t from,
                                           int64_t to) {
  if (c.line_planes == 0) return;
  for (int64_t off = from + threadIdx.x; off < to; off += blockDim.x) {
    suffix_mark_position(c, r, off, [&](int64_t w, uint32_t bit) { atomicOr(&c.lines[w], bit); });
  }
}

// Removes the first `len` positions of row r from the counts and the pair counts, and its lines
// from the line filter (the block's threads together).
__device__ __forceinline__ void uncount_row(const SuffixCache& c, int64_t r, int64_t len) {
  const int64_t* t = c.tokens + r * c.width;
  for (int64_t off = threadIdx.x; off < len; off += blockDim.x) {
    const int64_t at = suffix_count_index(c.keys[r * c.width + off], c);
    if (at >= 0) atomicSub(&c.counts[at], 1);
    const int64_t pair = off >= 1 ? suffix_pair_index(t[off - 1], t[off], c) : -1;
    if (pair >= 0) atomicSub(&c.pairs[pair], 1);
  }
  clear_lines(c, r);
}

// The insert is one kernel, a block per slot. Each block counts for itself the slots that begin a
// request before its own (decoding and free) and their total, so the request numbers come out in
// slot order with no block scan before the append (which measured slower). Whether a row is
// taken this call follows from the numbers alone: requests base .. base + total - 1 take rows
// base mod R onwards, so an active slot whose row one of them takes detaches without reading the
// row's state, which its new owner is rewriting.
//
// The counter is read and the blocks counted by one atomic add each: bits 40 and up count the
// blocks that have read it (request numbers stay below 2^39: suffix_cand_pack), and the block that
// reads last writes the new count. A slot's state may be read by another block while its own block
// writes it: a slot that begins a request reads as free or as a number >= base, one that does not
// as neither, so the count is the same either way. With more slots than rows, a request can lose
// its row to a later one of the same call (the CPU's sequential overwrites); the loser's slot then
// holds its number until every block has finished (a second count in the same bits), when the last
// block detaches it.
constexpr int kInsertThreads = 128;
constexpr int kInsertSlotsPerThread = 4;  // slot states loaded at once per thread and round
constexpr unsigned long long kInsertTicket = 1ull << 40;

// A slot that begins a request reads as free or as its new number (>= base) to the other blocks;
// a state >= base before the call (no op writes one) begins a request too, as on the CPU.
__device__ __forceinline__ bool begins_request(int32_t enc, int32_t dec, int64_t state,
                                               int64_t base) {
  return suffix_is_decoding(enc, dec) && (state == kSuffixSlotFree || state >= base);
}

// What block b reads of its own slot first, in the round trip of the slot states and the counter:
// its state (before any barrier: thread 0 rewrites it), lengths, prompt length and step; and, for a
// slot that continues a request, its row's owner and length right after, beside the counting. The
// row is read before the call's new requests are known, and used only when none of them takes it
// (their blocks rewrite it). Read after the counting, one round trip after another, they made the
// insert measurably slower.
struct InsertSlotIn {
  int64_t state;
  int32_t enc, dec;
  int64_t prompt, step;
  int64_t owner, have;  // state >= 0: the row's
};

// Block b's slot: its row, its new tokens. Block-uniform returns.
__device__ void insert_slot(const SuffixCacheInsertParams& p, FastDivisor rows, int64_t b,
                            const InsertSlotIn& in, int64_t base, int64_t before, int64_t total) {
  const SuffixCache& c = p.cache;
  const int64_t R = c.num_rows;
  const int64_t state = in.state;
  const int32_t enc = in.enc, dec = in.dec;
  const bool decoding = suffix_is_decoding(enc, dec);
  const bool closing = suffix_is_closing(enc, dec, state);
  if (!decoding && !closing) {
    if (threadIdx.x == 0) p.slots[b] = kSuffixSlotFree;
    return;
  }
  const bool begins = begins_request(enc, dec, state, base);
  const int64_t q = begins ? base + before : state;
  if (q < 0) return;  // detached
  const int64_t r = fast_mod(q, rows);
  if (begins) {
    if (threadIdx.x == 0) p.slots[b] = q;
    if (q + R <= base + total - 1)
      return;  // a later request of this call takes the row (detached below)
  } else if (total >= R || fast_mod(r - fast_mod(base, rows) + R, rows) < total) {
    // A request of this call takes the row: the response stays cached as its predecessor.
    if (threadIdx.x == 0) p.slots[b] = closing ? kSuffixSlotFree : kSuffixSlotDetached;
    return;
  }
  const int64_t owner = suffix_row_req(begins ? c.rows[2 * r] : in.owner);
  int64_t have = suffix_row_len(owner, begins ? c.rows[2 * r + 1] : in.have, c.width);
  if (!begins && owner != q) {  // evicted while active
    if (threadIdx.x == 0) p.slots[b] = closing ? kSuffixSlotFree : kSuffixSlotDetached;
    return;
  }
  const int64_t W = p.token_ids_stride;
  const int64_t P = clamp_to<int64_t>(in.prompt, 0, W);
  const int64_t s = clamp_to<int64_t>(in.step, 0, W - P);
  const int64_t* resp = p.token_ids_all + b * W + P;
  if (begins) {  // the row's previous response (empty: length 0) leaves the counts and the filter
    uncount_row(c, r, have);
    have = 0;
    __syncthreads();  // its keys are read before they are overwritten
  }
  const int64_t upto = min_of<int64_t>(s, c.width);
  for (int64_t off = have + threadIdx.x; off < upto; off += blockDim.x) {
    c.tokens[r * c.width + off] = resp[off];
    const int32_t key =
        off >= c.key_len - 1 ? suffix_cache_key(resp + off - c.key_len + 1, c.key_len) : 0;
    c.keys[r * c.width + off] = key;
    const int64_t at = suffix_count_index(key, c);
    if (at >= 0) atomicAdd(&c.counts[at], 1);
    // The pair ending here, as the row will hold it (the token before `have` is the row's, which
    // its eviction will uncount, even if the slot's history has since changed there).
    const int64_t prev =
        off > have ? resp[off - 1] : (off >= 1 ? c.tokens[r * c.width + off - 1] : -1);
    const int64_t pair = suffix_pair_index(prev, resp[off], c);
    if (pair >= 0) atomicAdd(&c.pairs[pair], 1);
  }
  __syncthreads();  // every thread has read the row's state, and the new positions are in
  mark_lines(c, r, have, upto);
  if (threadIdx.x == 0) {
    if (begins) c.rows[2 * r] = q;
    if (upto > have || begins) c.rows[2 * r + 1] = max_of(upto, have);
    if (closing) p.slots[b] = kSuffixSlotFree;
  }
}

// __launch_bounds__ without a block count, here and on prep and prep2: the block size the launch
// uses, so that ptxas may assume it (no register cap beyond what that size allows).
__global__ void __launch_bounds__(kInsertThreads)
    insert_kernel(SuffixCacheInsertParams p, FastDivisor rows, bool may_lose) {
  __shared__ int64_t warp_sums[kInsertThreads / 32];
  __shared__ unsigned long long read_at;
  wait_for_primary_grid();  // every kernel of the step waits first (suffix_cache_insert_gpu)
  allow_dependent_launch();
  const int64_t b = blockIdx.x, B = p.batch;
  const unsigned long long low = kInsertTicket - 1;
  InsertSlotIn in;
  in.state = p.slots[b];
  in.enc = p.seq_lens_encoder[b];
  in.dec = p.seq_lens_decoder[b];
  in.prompt = p.prompt_lens[b];
  in.step = p.step_idx[b];
  in.owner = in.have = 0;
  // The slots before b that begin a request (low 32 bits: all of them), their states loaded before
  // the counter's read returns.
  int64_t counted = 0;
  for (int64_t first = 0; first < B; first += kInsertThreads * kInsertSlotsPerThread) {
    int64_t state[kInsertSlotsPerThread];
    int32_t enc[kInsertSlotsPerThread], dec[kInsertSlotsPerThread];
#pragma unroll
    for (int u = 0; u < kInsertSlotsPerThread; ++u) {
      const int64_t i = first + u * kInsertThreads + threadIdx.x;
      enc[u] = i < B ? p.seq_lens_encoder[i] : 0;
      dec[u] = i < B ? p.seq_lens_decoder[i] : 0;
      // volatile: slot i's block may be rewriting it now; a read from memory (never a cached one)
      // reads free, its new number or its old state, which count alike (begins_request).
      state[u] =
          i < B ? *reinterpret_cast<volatile const int64_t*>(&p.slots[i]) : kSuffixSlotDetached;
    }
    if (first == 0) {
      unsigned long long got = 0;
      if (threadIdx.x == 0)
        got = atomicAdd(reinterpret_cast<unsigned long long*>(p.counter), kInsertTicket);
      if (in.state >= 0) {
        const int64_t r = fast_mod(in.state, rows);
        in.owner = p.cache.rows[2 * r];
        in.have = p.cache.rows[2 * r + 1];
      }
      if (threadIdx.x == 0) read_at = got;
      __syncthreads();
    }
    const int64_t base = suffix_counter_base(static_cast<int64_t>(read_at & low));
#pragma unroll
    for (int u = 0; u < kInsertSlotsPerThread; ++u) {
      const int64_t i = first + u * kInsertThreads + threadIdx.x;
      if (begins_request(enc[u], dec[u], state[u], base))
        counted += (i < b ? int64_t{1} << 32 : 0) + 1;
    }
  }
  counted = block_sum<kInsertThreads>(counted, warp_sums);
  const unsigned long long ticket = read_at >> 40;
  const int64_t base = suffix_counter_base(static_cast<int64_t>(read_at & low));
  const int64_t total = counted & 0xffffffff, before = counted >> 32;
  if (ticket == static_cast<unsigned long long>(B - 1) && !may_lose && threadIdx.x == 0)
    *p.counter = base + total;
  insert_slot(p, rows, b, in, base, before, total);
  if (!may_lose) return;
  // Every block has finished: the last one detaches the requests that lost their rows and writes
  // the count.
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(reinterpret_cast<unsigned long long*>(p.counter), kInsertTicket) >> 40 ==
           static_cast<unsigned long long>(2 * B - 1);
    __threadfence();
  }
  __syncthreads();
  if (!last) return;
  const int64_t R = p.cache.num_rows;
  for (int64_t i = threadIdx.x; i < B; i += kInsertThreads) {
    // volatile: the other blocks' writes (fenced before their second ticket), read from memory.
    const int64_t v = *reinterpret_cast<volatile const int64_t*>(&p.slots[i]);
    if (v >= base && v + R <= base + total - 1) p.slots[i] = kSuffixSlotDetached;
  }
  if (threadIdx.x == 0) *p.counter = base + total;
}

__global__ void finish_kernel(const int32_t* finished, int64_t* slots, int64_t batch) {
  const int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (b < batch && finished[b] != 0) slots[b] = kSuffixSlotDetached;
}

// A block per row (grid-stride): an evicted row's response leaves the counts, then the row is
// empty.
__global__ void evict_kernel(SuffixCache cache, const int64_t* counter, int64_t keep) {
  const int64_t below = suffix_counter_base(*counter) - keep;  // no overflow: keep >= 0
  for (int64_t r = blockIdx.x; r < cache.num_rows; r += gridDim.x) {
    const int64_t q = suffix_row_req(cache.rows[2 * r]);
    if (!(q >= 0 && q < below)) continue;  // uniform over the block
    uncount_row(cache, r, suffix_row_len(q, cache.rows[2 * r + 1], cache.width));
    __syncthreads();  // every thread has read the row's state
    if (threadIdx.x == 0) {
      cache.rows[2 * r] = -1;
      cache.rows[2 * r + 1] = 0;
    }
  }
}

// ---- query: prep and scans ----------------------------------------------------------------------

// What the scans need to know of a decoding slot, from the step's inputs and the cache's counts.
struct SlotDesc {
  bool query;   // c >= G + 1 and a cap: the slot searches the cache
  int c;        // |C|
  int32_t key;  // the key of its last G tokens
  int kind;     // kSuffixKind*
  int32_t n1,
      n2;  // n_1 from the counts (-1: not counted), n_2 from the pair counts (-1: not counted)
  int64_t prev;   // with c >= G + 2, the token before the last G, else 0
  int32_t prev2;  // kSuffixKindPairFrequent: C[-3]
};
// Its part that the step's inputs give (prep reads it before its wait for the insert, which does
// not write them): the context's tokens are read together (its last G, the one before them, C[-3]).
struct SlotContext {
  bool query;
  int c;
  int32_t key;
  int64_t prev;
  int64_t t3;  // C[-3] with c >= 3, else -1
};
__device__ __forceinline__ SlotContext slot_context(const SuffixCacheQueryParams& q, int64_t b) {
  const SuffixMatchParams& p = q.m;
  const SuffixSlot v = suffix_slot(p, b);
  const int G = q.cache.key_len;
  SlotContext x;
  x.c = static_cast<int>(min_of<int64_t>(p.max_tree_depth, v.n));
  x.query = x.c >= G + 1 && v.cap > 0;
  x.key = x.query ? suffix_cache_key(v.row + v.n - G, G) : 0;
  x.prev = x.query && x.c >= G + 2 ? v.row[v.n - 1 - G] : 0;  // a member's
  x.t3 = x.query && x.c >= 3 ? v.row[v.n - 3] : -1;
  return x;
}
// A decoding slot's context, or none (not querying).
__device__ __forceinline__ SlotContext decoding_context(const SuffixCacheQueryParams& q,
                                                        int64_t b) {
  if (suffix_is_decoding(q.m.seq_lens_encoder[b], q.m.seq_lens_decoder[b]))
    return slot_context(q, b);
  SlotContext x{};
  return x;
}
// Then its part that the cache's counts give (after the insert's end): n_1 and n_2 read together
// (n_2 whether or not it is needed), one round trip where each read waited for the one before.
__device__ __forceinline__ SlotDesc describe_slot(const SuffixCacheQueryParams& q,
                                                  const SlotContext& x) {
  const int G = q.cache.key_len;
  SlotDesc d;
  d.c = x.c;
  d.query = x.query;
  d.key = x.key;
  d.prev = x.prev;
  const int64_t t3 = x.t3;
  // n_1 when the cache counts the context's last token (G = 1): the scan then knows before it
  // starts whether that token's hits are the candidates (n_1 <= M) or need a longer match; and
  // with n_1 > M, n_2 when the cache counts the last two tokens' pair: with n_2 > M only the hits
  // that also match the token before them can be candidates.
  const int M = q.max_occurrences;
  const int64_t at = d.query ? suffix_count_index(d.key, q.cache) : -1;
  const int64_t pair = at >= 0 && d.c >= G + 2 ? suffix_pair_index(d.prev, d.key, q.cache) : -1;
  d.n1 = at >= 0 ? q.cache.counts[at] : -1;
  const int32_t n2 = pair >= 0 ? q.cache.pairs[pair] : -1;
  d.kind = d.n1 < 0 ? kSuffixKindScanned : (d.n1 <= M ? kSuffixKindRare : kSuffixKindFrequent);
  d.n2 = -1;
  d.prev2 = 0;
  if (d.kind == kSuffixKindFrequent && pair >= 0) {
    d.n2 = n2;
    // Three-token probes compare C[-3] with the cached positions' keys, which are the tokens
    // themselves only for ids in [0, 2^31): any other C[-3] keeps the two-token probe.
    if (d.n2 > M && t3 >= 0 && t3 <= INT32_MAX) {
      d.kind = kSuffixKindPairFrequent;
      d.prev2 = static_cast<int32_t>(t3);
    }
  }
  return d;
}

// The first scan's part in a querying slot's hits: the rep of a scanned or rare group puts its key
// in the groups' table (`tabled`: every slot of such a group, its rep alone is tabled), a member
// (c >= G + 2, not rare) is found by its token before the G (through its group, or by its last two
// tokens, or three when its last two are frequent); the one string through which its hits are
// found is its line filter item (suffix_line_items).
struct ScanRole {
  bool tabled, member;
  uint64_t item;
};
__device__ __forceinline__ ScanRole scan_role(int c, int kind, int32_t key, int64_t prev,
                                              int32_t prev2, int G) {
  ScanRole r;
  r.tabled = c > 0 && kind <= kSuffixKindRare;
  // A pair-frequent slot's shortest usable match length is 3 or more: c >= 4.
  r.member = c >= G + 2 + (kind == kSuffixKindPairFrequent) && kind != kSuffixKindRare;
  r.item = kind == kSuffixKindFrequent       ? suffix_item2(prev, key)
           : kind == kSuffixKindPairFrequent ? suffix_item3(prev2, prev, key)
                                             : suffix_item1(key);
  return r;
}

// The line mask (q.line_mask, a bit per line of the cache: the lines the scans read), block f of
// the filter: a line is read when, for some querying slot's item, all kSuffixLineHashes planes of
// the filter have its bit; the filter never misses a line that holds an item (suffix_cache.h), so
// the skipped lines hold no hit of any slot. A block per 32 words of the mask (1024 lines), a lane
// per word, the warps share out the items: each (item, plane) is one 128-byte read per block. The
// block works the items out from the inputs itself (describe_slot), beside prep's blocks: each
// thread's first slot's context before the wait for the insert, the rest after it.
__device__ void filter_lines(const SuffixCacheQueryParams& q, int64_t f, uint64_t* items) {
  __shared__ int count;
  __shared__ uint32_t part[kWarps][32];
  const SuffixCache& c = q.cache;
  const SuffixMatchParams& p = q.m;
  const int64_t first = threadIdx.x;
  const SlotContext x0 = first < p.batch ? decoding_context(q, first) : SlotContext{};
  wait_for_primary_grid();
  allow_dependent_launch();
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  for (int64_t b = first; b < p.batch; b += kThreads) {
    const SlotContext x = b == first ? x0 : decoding_context(q, b);
    if (!x.query) continue;
    const SlotDesc d = describe_slot(q, x);
    const ScanRole role = scan_role(d.c, d.kind, d.key, d.prev, d.prev2, c.key_len);
    if (role.tabled || role.member) items[atomicAdd(&count, 1)] = role.item;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int64_t words = suffix_line_words(c.num_rows, c.width);
  const int64_t w = f * 32 + lane;
  uint32_t read = 0;
  if (w < words) {
    // Unrolled: the planes of four items in flight at once, where each item's waited for the
    // last's.
#pragma unroll 4
    for (int i = warp; i < count; i += kWarps) {
      uint32_t may = ~0u;
#pragma unroll
      for (int j = 0; j < kSuffixLineHashes; ++j) {
        may &= __ldg(&c.lines[suffix_item_plane(items[i], j, c.line_planes) * words + w]);
      }
      read |= may;
    }
  }
  part[warp][lane] = read;
  __syncthreads();
  if (warp == 0 && w < words) {
#pragma unroll
    for (int k = 1; k < kWarps; ++k) read |= part[k][lane];
    q.line_mask[w] = read;
  }
}

// Blocks 0 .. B - 1, per querying slot: its descriptor, counters cleared, and its group: the least
// querying slot whose context ends with the same G tokens (from the inputs: no other block's output
// is read). A group's slots share the occurrences of those tokens (n_G) and, while n_G <= M, one
// candidate list. With the line filter, blocks B .. are the filter's (filter_lines).
// Launched right after the insert (after_insert: suffix_cache_step_gpu), prep is the insert's
// programmatic dependent, and what the step's inputs give (the contexts, the groups) is worked out
// before the wait for the insert's end, beside the insert; only the cache's counts and line filter
// are read after it. That is sound because the insert writes none of the inputs and let prep launch
// only after every kernel before it had ended. After any other kernel (suffix_cache_query_gpu
// alone), one that may still be writing the inputs, prep waits first. Every block waits before it
// exits, so that prep's end, which the kernels after it wait for, implies the insert's.
__global__ void __launch_bounds__(kThreads)
    query_prep_kernel(SuffixCacheQueryParams q, bool after_insert) {
  extern __shared__ uint64_t filter_items[];   // [B], the filter's blocks only
  if (!after_insert) wait_for_primary_grid();  // the later waits then return at once
  const SuffixMatchParams& p = q.m;
  if (blockIdx.x >= p.batch) {
    filter_lines(q, blockIdx.x - p.batch, filter_items);  // waits after its contexts
    return;
  }
  const int64_t b = blockIdx.x;
  int32_t* st = stat_row(q, b);
  if (!suffix_is_decoding(p.seq_lens_encoder[b], p.seq_lens_decoder[b])) {
    wait_for_primary_grid();
    allow_dependent_launch();
    if (b == 0 && threadIdx.x == 0) *store_flag(q) = 0;
    if (threadIdx.x == 0) st[kSuffixStatCtx] = 0;
    return;
  }
  const SuffixSlot v = suffix_slot(p, b);
  const int G = q.cache.key_len;
  const int D = p.max_tree_depth;
  __shared__ int32_t rep;
  __shared__ bool query;
  SlotContext x{};  // thread 0's
  for (int j = threadIdx.x; j < 256; j += kThreads) st[kSuffixStatHist + j] = 0;
  if (threadIdx.x == 0) {
    rep = static_cast<int32_t>(b);
    x = slot_context(q, b);
    query = x.query;
  }
  __syncthreads();
  if (query) {  // uniform over the block
    const int64_t* mine = v.row + v.n - G;
    for (int64_t o = threadIdx.x; o < b; o += kThreads) {
      if (!suffix_is_decoding(p.seq_lens_encoder[o], p.seq_lens_decoder[o])) continue;
      const SuffixSlot w = suffix_slot(p, o);
      if (min_of<int64_t>(D, w.n) < G + 1 || w.cap <= 0) continue;  // not querying
      const int64_t* theirs = w.row + w.n - G;
      bool same = true;
      for (int j = 0; j < G && same; ++j) same = mine[j] == theirs[j];
      if (same) atomicMin(&rep, static_cast<int32_t>(o));
    }
  }
  wait_for_primary_grid();
  allow_dependent_launch();
  __syncthreads();  // the group's rep
  if (threadIdx.x == 0) {
    if (b == 0) *store_flag(q) = 0;
    q.source[b] = 0;
    const SlotDesc d = describe_slot(q, x);
    st[kSuffixStatCtx] = d.query ? d.c : 0;
    st[kSuffixStatKey] = d.key;
    st[kSuffixStatKind] = d.kind;
    st[kSuffixStatCount] = d.n1;
    st[kSuffixStatPairCount] = d.n2;
    st[kSuffixStatPrev2] = d.prev2;
    st[kSuffixStatN] = static_cast<int32_t>(v.n);
    st[kSuffixStatPrev] = static_cast<int32_t>(d.prev);
    st[kSuffixStatPrev + 1] = static_cast<int32_t>(static_cast<uint64_t>(d.prev) >> 32);
    st[kSuffixStatHits] = 0;
    st[kSuffixStatList] = -1;
    for (int j = 0; j < kSuffixCandLists; ++j) st[kSuffixStatStored + j] = 0;
    st[kSuffixStatLmin] = G;
    st[kSuffixStatGroup] = 0;
    if (d.query) st[kSuffixStatRep] = rep;
  }
}

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
// The scan's blocks per SM while the local search runs beside it: four measured faster than a full
// wave (six) or two.
constexpr int kScanBesideBlocks = 4;
// The second scan's blocks per SM at most beside the local search: with four, the search's blocks
// (90 registers a thread) found no room until the second scan's had exited; with two they launch at
// its start and read their inputs beside it. Mostly it exits at once; when it refills a list, its
// grid-stride loops read the same lines with fewer blocks.
constexpr int kScan2BesideBlocks = 2;

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

// The scans' shared memory (byte offsets): B the batch, T the tables' size.
struct ScanLayout {
  size_t prev, queue, qcount, tkey, trep, tmem, srep, sctx, sn, skind, sprev2, agg_hits, agg_hist,
      full, bytes;
};
__host__ __device__ __forceinline__ ScanLayout scan_layout(int64_t B, uint32_t T, bool hist) {
  ScanLayout s;
  size_t at = 0;
  s.prev = at;
  at += sizeof(int64_t) * B;  // first: 8-byte aligned
  s.queue = at;
  at += sizeof(int2) * kWarps * kHitQueue;
  s.qcount = at;
  at += sizeof(int32_t) * kWarps;
  s.tkey = at;
  at += sizeof(int32_t) * T;
  s.trep = at;
  at += sizeof(int32_t) * T;
  s.tmem = at;
  at += sizeof(int32_t) * T;
  s.srep = at;
  at += sizeof(int32_t) * B;
  s.sctx = at;
  at += sizeof(int32_t) * B;
  s.sn = at;
  at += sizeof(int32_t) * B;
  s.skind = at;
  at += sizeof(int32_t) * B;
  s.sprev2 = at;
  at += sizeof(int32_t) * B;
  s.agg_hits = at;
  at += sizeof(int32_t) * B;
  s.agg_hist = at;
  at += hist ? sizeof(int32_t) * B * kAggLen : 0;
  s.full = at;
  at += sizeof(uint32_t) * ((B * kSuffixCandLists + 31) / 32);  // a bit per list
  s.bytes = at;
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
// At most 48 registers (five blocks per SM), with no spills: beside a block of the local search
// (109 registers a thread) an SM still holds three of the scan's blocks. Held to 40 (six blocks),
// it spilled, and where the scan is the step's critical path that cost more than the sixth block.
// When the local search took 128 registers, 48 left room for two scan blocks beside it and lost.
__global__ void __launch_bounds__(kThreads, 5)
    query_scan_kernel(SuffixCacheQueryParams q, int pass, uint32_t table_size, int task_lines,
                      bool block_units, FastDivisor row_lines) {
  extern __shared__ __align__(16) unsigned char scan_smem[];
  FDSPEC_PROF(long long phase_clock = clock64();)
  const SuffixMatchParams& p = q.m;
  const int64_t B = p.batch;
  // Pass 1 may run beside the local search, whose end it waits for only before it exits (below);
  // pass 2 waits for prep2 at once.
  if (pass == 2) {
    wait_for_primary_grid();
    allow_dependent_launch();
    if (*store_flag(q) == 0) return;
  }
  const bool agg = pass == 1 && B <= kAggSlots;
  const SuffixCache& c = q.cache;
  const ScanLayout lay = scan_layout(B, table_size, agg);
  int64_t* sprev =
      reinterpret_cast<int64_t*>(scan_smem + lay.prev);  // a member's token before the G
  int32_t* tkey = reinterpret_cast<int32_t*>(scan_smem + lay.tkey);  // table 1: a group's key
  int32_t* trep = reinterpret_cast<int32_t*>(scan_smem + lay.trep);  // table 1: its rep (-1: free)
  int32_t* tmem = reinterpret_cast<int32_t*>(scan_smem + lay.tmem);  // table 2: a member (-1: free)
  int32_t* srep = reinterpret_cast<int32_t*>(scan_smem + lay.srep);  // a member's group (or token)
  int32_t* sctx = reinterpret_cast<int32_t*>(scan_smem + lay.sctx);  // a slot's c (0: not querying)
  int32_t* sn = reinterpret_cast<int32_t*>(scan_smem + lay.sn);      // a slot's history length N
  int32_t* skind = reinterpret_cast<int32_t*>(scan_smem + lay.skind);    // kSuffixKind*
  int32_t* sprev2 = reinterpret_cast<int32_t*>(scan_smem + lay.sprev2);  // a pair-frequent's C[-3]
  int32_t* agg_hits =
      reinterpret_cast<int32_t*>(scan_smem + lay.agg_hits);  // pass 1: hits per group
  int32_t* agg_hist = reinterpret_cast<int32_t*>(scan_smem + lay.agg_hist);
  uint32_t* full = reinterpret_cast<uint32_t*>(scan_smem + lay.full);
  int2* queue = reinterpret_cast<int2*>(scan_smem + lay.queue) + threadIdx.x / 32 * kHitQueue;
  int32_t* qcount = reinterpret_cast<int32_t*>(scan_smem + lay.qcount) + threadIdx.x / 32;
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
  if (pass == 1) allow_dependent_launch();  // prep2 may launch; it waits for this grid's end
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
  // Pass 1 may run beside the local search (suffix_cache_query_gpu): the kernels after it read the
  // local drafts once it has ended. (Launched in sequence, this returns at once.) The counts are
  // flushed after it: before it, their atomics met the local search's traffic (the slowest warp's
  // flush took ten times longer).
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

// Per querying slot, a warp each: n_G from its group, the hits with l == G (n_G minus the longer
// ones), with n_G > M the shortest match length L_min with at most M occurrences (suffix sums of
// the histogram over the lanes, 32 match lengths at a time from the longest), and the list the
// search reads: its group's (n_G <= M), its own list L_min - G, or, with L_min beyond the lists,
// its last list refilled by the second scan (then flagged to run).
__global__ void __launch_bounds__(kThreads) query_prep2_kernel(SuffixCacheQueryParams q) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  const bool slot = b < q.m.batch;  // uniform over the warp
  int32_t* st = stat_row(q, slot ? b : 0);
  // Prep's fields of the slot before the wait: prep's grid had ended before the first scan, whose
  // programmatic dependent this is, could launch (the local search waits for prep first; launched
  // in order, the first scan follows prep's end). Every warp still waits before it exits.
  const int c = slot ? st[kSuffixStatCtx] : 0;
  const int kind = st[kSuffixStatKind];
  const int rep = c > 0 ? st[kSuffixStatRep] : 0;
  const int count = st[kSuffixStatCount];
  const int pair_count = st[kSuffixStatPairCount];
  wait_for_primary_grid();
  allow_dependent_launch();
  if (!slot) return;
  // Then the first scan's output in one round trip: the slot's histogram, its group's count and
  // list length, and its own lists' lengths (volatile: ptxas moved plain reads into the branches
  // that use them, a round trip each), after prep's fields, which are read before the wait.
  const volatile int32_t* const vst = st;
  const volatile int32_t* const rep_row = stat_row(q, rep);
  int32_t hist[kMaxSuffixTreeDepth / 32];  // lane's match lengths lane + 32 i
#pragma unroll
  for (int i = 0; i < kMaxSuffixTreeDepth / 32; ++i) hist[i] = st[kSuffixStatHist + lane + 32 * i];
  const int32_t group_hits = rep_row[kSuffixStatGroup];
  const int32_t group_stored = rep_row[kSuffixStatStored];
  int32_t stored[kSuffixMemberLists + 1];
#pragma unroll
  for (int j = 0; j <= kSuffixMemberLists; ++j) stored[j] = vst[kSuffixStatStored + j];
  if (c == 0) return;
  const int G = q.cache.key_len;
  const int J = kSuffixMemberLists;
  const int64_t n = count >= 0 ? count : group_hits;  // counted: n_1
  // The lists the first scan filled are complete: the search learns its list's length here, with
  // its statistics, instead of a round trip of its own (a list the second scan refills: -1).
  const int M = q.max_occurrences;
  const int group_list = min_of<int>(group_stored, M);
  int64_t longer = 0;
#pragma unroll
  for (int i = 0; i < kMaxSuffixTreeDepth / 32; ++i) {
    const int L = lane + 32 * i;
    if (L > G && L < c) longer += hist[i];
  }
  for (int o = 16; o > 0; o >>= 1) longer += __shfl_xor_sync(kFull, longer, o);
  __syncwarp();  // every lane has read the histogram before lane 0 writes to it
  if (kind == kSuffixKindPairFrequent) {
    // The scan counted the hits with l >= 3; those with l == 2 are the rest of n_2's.
    const int64_t n2 = pair_count;
    if (lane == 0) st[kSuffixStatHist + 2] = static_cast<int32_t>(n2 - longer);
    longer = n2;
    __syncwarp();
  }
  const int64_t at_g = n - longer;  // the hits with l == G
  if (lane == 0) {
    st[kSuffixStatHits] = static_cast<int32_t>(n);
    st[kSuffixStatHist + G] = static_cast<int32_t>(at_g);
    if (n <= M) {
      st[kSuffixStatList] = 0;
      st[kSuffixStatRead] = group_list;
    }
  }
  if (n <= M) return;
  // n_L = sum over l >= L is non-increasing in L: L_min is the least L >= G with n_L <= M (c:
  // none).
  int lmin = c;
  int64_t above = 0;  // n_{top + 1}
  for (int top = c - 1; top >= G; top -= 32) {
    const int L = top - lane;
    const int64_t v = L < G ? 0 : (L == G ? at_g : st[kSuffixStatHist + L]);
    int64_t s = v;  // inclusive sum over lanes 0 .. lane: n_L - above
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t u = __shfl_up_sync(kFull, s, o);
      if (lane >= o) s += u;
    }
    const bool ok = L >= G && above + s <= M;
    const unsigned okb = __ballot_sync(kFull, ok);  // a prefix of the lanes (n_L grows with lane)
    const int k = __popc(okb);
    if (k > 0) lmin = top - (k - 1);
    above += __shfl_sync(kFull, s, 31);
    if (k < 32) break;  // some L in this chunk has n_L > M (or the chunk ends below G)
  }
  if (lane != 0) return;
  st[kSuffixStatLmin] = lmin;
  if (lmin >= c) return;  // no match length has at most M occurrences: no global draft
  if (lmin <= G + J) {
    st[kSuffixStatList] = lmin - G;  // complete: n_{L_min} <= M entries were offered to it
    int32_t s = 0;  // stored[lmin - G], unrolled: an indexed array went to local memory
#pragma unroll
    for (int j = 0; j <= kSuffixMemberLists; ++j) s = j == lmin - G ? stored[j] : s;
    st[kSuffixStatRead] = min_of<int>(s, M);
  } else {
    st[kSuffixStatList] = J;
    st[kSuffixStatRead] = -1;
    st[kSuffixStatStored + J] = 0;
    *store_flag(q) = 1;
  }
}

// ---- query: the search --------------------------------------------------------------------------

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
  // Before the wait for the kernels before it (query_search_kernel): what the block reads of the
  // step's inputs and the local search's draft (whose grid had ended before this one could launch),
  // the slot's place and cap, its context (c as prep works it out: describe_slot) and the local
  // draft. A decoding slot's inputs are read whether or not it queries the cache.
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
  // length of the list it reads (prep2's). The fields are volatile reads: ptxas moved plain ones
  // past the returns below into the paths that use them, a round trip per return. They too come
  // before the wait: prep2's grid had ended before the second scan, which waits for it first, let
  // this one launch, and the second scan writes none of them (only a refilled list's count, read
  // after the wait).
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
  for (int64_t k = 0; k < m_local; ++k) local = suffix_fadd(local, ss.local_probs[k]);

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
// Two blocks per SM, as many as its shared memory allows (with no such bound ptxas held it at 80
// registers, spilling).
template <int kCandCap>
__global__ void __launch_bounds__(suffix_gpu::kThreads, 2)
    query_search_kernel(SuffixCacheQueryParams q, FastDivisor rows, bool finish) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const HeldDraft d = global_search_slot(
      q, rows, *reinterpret_cast<SearchShared<kCandCap>*>(smem_raw));  // waits inside
  const int64_t b = blockIdx.x;
  if (finish)
    suffix_finish_slot(q.m, b, q.m.seq_lens_encoder[b], q.m.seq_lens_decoder[b], d.m, d.tokens);
}

}  // namespace

#ifdef FDSPEC_PROFILE
// Prints the stage clocks of the last global search launch (bench-only build).
void suffix_cache_profile_print(int64_t blocks, double clock_khz) {
  static long long h[profiler::kBlocks][profiler::kSlots];
  if (cudaMemcpyFromSymbol(h, profiler::g_block, sizeof(h)) != cudaSuccess) return;
  // Stages, in time order (clock slots): the statistics read (2), the candidates' match lengths
  // (3), their places and histogram (1), the core's warp path (5), its block path (6), the best
  // known (7), the draft written (8); a slot whose global draft loses, or that has none, stops
  // earlier.
  const int order[7] = {2, 3, 1, 5, 6, 7, 8};
  const char* names[7] = {"reads", "lengths", "places", "warp", "block", "best", "write"};
  const int64_t nb = blocks < profiler::kBlocks ? blocks : profiler::kBlocks;
  double sum[7] = {}, mx[7] = {};
  for (int64_t b = 0; b < nb; ++b) {
    long long last = h[b][0];
    long long end = last;
    double us[7] = {};
    for (int i = 0; i < 7; ++i) {
      const long long t = h[b][order[i]];
      if (t == 0) continue;
      us[i] = (t - last) / clock_khz * 1e3;
      last = end = t;
      sum[i] += us[i];
      mx[i] = us[i] > mx[i] ? us[i] : mx[i];
    }
    std::printf(
        "  slot %lld: total %.2f us cand=%lld warp_lo=%lld lmin=%lld last_l=%lld walks=%lld "
        "steps=%lld (their loads %.2f us, tables cleared %.2f + %.2f us) given up=%lld runs=%lld "
        "(warp 0 skipped %lld) |",
        (long long)b, (end - h[b][0]) / clock_khz * 1e3, h[b][13], h[b][14], h[b][15] / 1000,
        h[b][15] % 1000, h[b][10], h[b][11], h[b][16] / clock_khz * 1e3, h[b][20] / clock_khz * 1e3,
        h[b][21] / clock_khz * 1e3, h[b][17], h[b][18], h[b][19]);
    for (int i = 0; i < 7; ++i) std::printf(" %s %.2f", names[i], us[i]);
    auto between = [&](int from, int to) {
      return (h[b][to] - h[b][from]) / clock_khz * 1e3;
    };  // clock slots
    if (h[b][22] != 0 && h[b][23] != 0 &&
        h[b][5] != 0) {  // the warp path: its set, sorted and loaded, walked
      std::printf(" (warp: set %.2f, sorted %.2f, walked %.2f)", between(1, 22), between(22, 23),
                  between(23, 5));
      // Their parts, by thread 0's clock: set = the caller's local score, the cuts, the set's
      // members; sorted = the ranks, the continuations' loads, the runs; walked = warp 0's own
      // runs, then the wait for the other warps and the best over them.
      if (h[b][32] != 0 && h[b][33] != 0 && h[b][34] != 0 && h[b][35] != 0 && h[b][36] != 0) {
        std::printf(
            " (set: local %.2f, cuts %.2f, members %.2f; sorted: ranks %.2f, loads %.2f, runs %.2f;"
            " walked: warp 0 %.2f, rest %.2f)",
            between(1, 32), between(32, 33), between(33, 22), between(22, 34), between(34, 35),
            between(35, 23), between(23, 36), between(36, 5));
      }
    }
    if (h[b][10] != 0) {  // the block path's walks, their steps' parts summed
      std::printf(" (block: set %.2f, loads+clear %.2f, count %.2f, top %.2f, tie %.2f, rest %.2f)",
                  h[b][24] / clock_khz * 1e3, h[b][25] / clock_khz * 1e3,
                  h[b][26] / clock_khz * 1e3, h[b][27] / clock_khz * 1e3,
                  h[b][28] / clock_khz * 1e3, h[b][29] / clock_khz * 1e3);
    }
    std::printf("\n");
  }
  std::printf("  stage (us, mean / max over %lld blocks):", (long long)nb);
  for (int i = 0; i < 7; ++i) std::printf(" %s %.2f/%.2f", names[i], sum[i] / nb, mx[i]);
  std::printf("\n");
}
#endif

cudaError_t suffix_cache_insert_gpu(const SuffixCacheInsertParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  // Every kernel of the insert and the query is a programmatic dependent of the work before it
  // (cuda_utils.cuh) and waits for it before it reads what it writes, so each one's launch is
  // hidden behind its predecessor's run, where an ordinary launch left a gap of about a microsecond
  // and a half.
  // With no more slots than rows no request of a call can lose its row to another.
  const cudaError_t err =
      launch_dependent(insert_kernel, dim3(static_cast<unsigned>(p.batch)), dim3(kInsertThreads),
                       stream, p, fast_divisor(p.cache.num_rows), p.batch > p.cache.num_rows);
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t suffix_cache_finish_gpu(const int32_t* finished, int64_t* slots, int64_t batch,
                                    cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  finish_kernel<<<static_cast<unsigned>((batch + 255) / 256), 256, 0, stream>>>(finished, slots,
                                                                                batch);
  return FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t suffix_cache_evict_gpu(const SuffixCache& cache, const int64_t* counter, int64_t keep,
                                   cudaStream_t stream) {
  // At most 4096 blocks: the grid-stride loop takes the rows past them (any cap is correct; this
  // one keeps a rare call's launch small for a cache of up to 2^30 rows).
  const unsigned grid = static_cast<unsigned>(min_of<int64_t>(cache.num_rows, 4096));
  evict_kernel<<<grid, 256, 0, stream>>>(cache, counter, keep);
  return FDSPEC_LAUNCH_STATUS(stream);
}

#ifdef FDSPEC_PROFILE
// Prints the first scan's warp records since the last print (profile build), then clears them.
void suffix_cache_scan_profile_print(double clock_khz) {
  static long long h[profiler::kWarps][profiler::kWarpSlots];
  int n = 0;
  if (profiler::read_warps(h, &n) != cudaSuccess) return;
  n = n < profiler::kWarps ? n : profiler::kWarps;
  const char* names[kScanPhases] = {"set-up", "lines", "last drain", "wait for the local search",
                                    "flush"};
  std::printf("  first scan, per warp (%d warps), us mean / max:", n);
  double total_max = 0;
  for (int k = 0; k < kScanPhases; ++k) {
    double sum = 0, mx = 0;
    for (int w = 0; w < n; ++w) {
      sum += h[w][k];
      mx = h[w][k] > mx ? h[w][k] : mx;
    }
    std::printf(" %s %.2f/%.2f", names[k], sum / (n > 0 ? n : 1) / clock_khz * 1e3,
                mx / clock_khz * 1e3);
  }
  for (int w = 0; w < n; ++w) {
    double t = 0;
    for (int k = 0; k < 3; ++k) t += h[w][k];
    total_max = t > total_max ? t : total_max;
  }
  std::printf("; the slowest warp's set-up + lines + drain %.2f\n", total_max / clock_khz * 1e3);
  // The slowest warps: their lines and member hits (counted over every launch since the last
  // print).
  std::vector<std::pair<long long, int>> by(n);
  for (int w = 0; w < n; ++w) by[w] = {h[w][0] + h[w][1] + h[w][2], w};
  std::sort(by.begin(), by.end(), std::greater<std::pair<long long, int>>());
  for (int i = 0; i < 6 && i < n; ++i) {
    const int w = by[i].second;
    std::printf(
        "    warp %d (block %d): %.2f us, lines %.2f, drain %.2f; lines read %lld, member hits "
        "%lld\n",
        w, w / kWarps, by[i].first / clock_khz * 1e3, h[w][1] / clock_khz * 1e3,
        h[w][2] / clock_khz * 1e3, h[w][kScanPhases], h[w][kScanPhases + 1]);
  }
  long long lines_all = 0, hits_all = 0;
  for (int w = 0; w < n; ++w) {
    lines_all += h[w][kScanPhases];
    hits_all += h[w][kScanPhases + 1];
  }
  std::printf(
      "    all warps: lines read %lld, member hits %lld (every launch since the last print)\n",
      lines_all, hits_all);
}
#endif

namespace {

uint32_t scan_table_size(int64_t B) {
  uint32_t table_size = kMinScanTable;
  while (table_size < kScanTableLoad * static_cast<uint64_t>(B) && table_size < kMaxScanTable) {
    table_size *= 2;
  }
  while (table_size < 2 * static_cast<uint64_t>(B)) table_size *= 2;
  return table_size;
}

}  // namespace

SuffixSearchForms suffix_cache_search_forms() {
  return {suffix_gpu::kCandCapLarge, kSearchSmem<suffix_gpu::kCandCapLarge>,
          suffix_gpu::kCandCapSmall, kSearchSmem<suffix_gpu::kCandCapSmall>};
}

size_t suffix_cache_scan_smem(int64_t batch) {
  return scan_layout(batch, scan_table_size(batch), batch <= kAggSlots)
      .bytes;  // the first scan's, the larger
}

int64_t suffix_cache_max_batch(const DeviceLimits& dev) {
  int64_t b = kMaxSuffixCacheBatch;  // the scan's bytes grow with the batch
  while (b > 0 && suffix_cache_scan_smem(b) > static_cast<size_t>(dev.smem_optin)) --b;
  return b;
}

cudaError_t suffix_cache_max_batch_gpu(int64_t* max_batch) {
  DeviceFacts dev;
  const cudaError_t err = current_device_facts(&dev);
  if (err == cudaSuccess) *max_batch = suffix_cache_max_batch(dev);
  return err;
}

namespace {

// The query's kernels; after_insert: the kernel before them on the stream is the insert's
// (query_prep_kernel).
cudaError_t launch_query(const SuffixCacheQueryParams& q, bool after_insert, cudaStream_t stream) {
  const int64_t B = q.m.batch;
  if (B <= 0) return cudaSuccess;
  // The local search (suffix_match's, which lets its dependents launch at its start) and the global
  // prep and first scan are independent. Where the local search leaves SMs free (B <= SMs: a block
  // per slot), the first scan runs beside it as its programmatic dependent and waits for it only
  // before it exits, so that everything after the scan sees both; prep goes first (the scan reads
  // what it writes: the local search waits for prep before it lets the scan launch). At B > SMs the
  // local search fills the GPU and the scan beside it only slows both, so larger batches keep the
  // kernels in sequence.
  DeviceFacts dev;
  cudaError_t err = current_device_facts(&dev);
  if (err != cudaSuccess) return err;
  const bool beside = B <= dev.sms;
  // Beside the local search the kernels are programmatic dependents, each waiting for the one
  // before it first (their launches hidden behind their predecessors' runs); after it, where the
  // local search has filled the GPU, ordinary launches (dependents measured slower there).
  auto launch = [&](auto kernel, unsigned grid, size_t smem, auto... args) -> cudaError_t {
    if (beside)
      return launch_dependent_smem(kernel, dim3(grid), dim3(kThreads), smem, stream, args...);
    kernel<<<grid, kThreads, smem, stream>>>(args...);
    return cudaGetLastError();
  };
  if (!beside) {
    err = suffix_search_gpu(q.m, stream);
    if (err != cudaSuccess) return err;
  }
  // Prep, and with the line filter the filter's blocks beside it (a block per 32 words of the
  // mask).
  const int64_t words = suffix_line_words(q.cache.num_rows, q.cache.width);
  const bool filtered = q.cache.line_planes > 0;
  err = launch(query_prep_kernel, static_cast<unsigned>(B + (filtered ? (words + 31) / 32 : 0)),
               filtered ? sizeof(uint64_t) * B : 0, q, after_insert);
  if (err != cudaSuccess) return err;
  // The local search between prep and the first scan.
  const bool local_beside = beside;
  if (local_beside) {
    err = suffix_search_gpu(q.m, stream);
    if (err != cudaSuccess) return err;
  }
  // The scans' tables: powers of two, sparse while they stay small (at least 1024 entries, 8 per
  // slot up to 2048), and always with room for two entries per slot (a probe must find a free
  // one). Every cached position probes the groups' table and every hit the members', so sparse
  // tables pay, until their shared memory costs resident blocks (hence the cap kMaxScanTable).
  const uint32_t table_size = scan_table_size(B);
  const size_t smem1 = scan_layout(B, table_size, B <= kAggSlots).bytes;
  const size_t smem2 = scan_layout(B, table_size, false).bytes;
  err = allow_dynamic_smem(query_scan_kernel, smem1);
  if (err != cudaSuccess) return err;
  // One wave of the scan's blocks at most: the lines the mask selects are spread over the whole
  // cache, so every block has some, and each block pays its set-up (tables, descriptors) once.
  // Beside the local search, at most kScanBesideBlocks per SM, which leaves its blocks room.
  int per_sm = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, query_scan_kernel, kThreads, smem1);
  if (err != cudaSuccess) return err;
  per_sm = max_of(beside ? min_of(per_sm, kScanBesideBlocks) : per_sm, 1);
  const int64_t wave = int64_t{per_sm} * dev.sms;
  const int task_lines =
      words * (32 / kScanTaskLines) / kWarps >= wave ? kScanTaskLines : kScanTaskLinesSmall;
  const bool block_units = words <= kBlockUnitWordsPerSlot * B;
  const int64_t task_blocks = (words * (32 / task_lines) + kWarps - 1) / kWarps;
  const unsigned grid = static_cast<unsigned>(min_of<int64_t>(task_blocks, wave));
  const FastDivisor row_lines = fast_divisor(suffix_row_lines(q.cache.width));
  // The first scan reads prep's output once the local search, which waits for prep first, lets it
  // launch. With B > SMs (the local search already ran) it is an ordinary launch after prep.
  if (local_beside) {
    err = launch_dependent_smem(query_scan_kernel, dim3(grid), dim3(kThreads), smem1, stream, q, 1,
                                table_size, task_lines, block_units, row_lines);
    if (err != cudaSuccess) return err;
  } else {
    query_scan_kernel<<<grid, kThreads, smem1, stream>>>(q, 1, table_size, task_lines, block_units,
                                                         row_lines);
  }
  err = launch(query_prep2_kernel, static_cast<unsigned>((B + kWarps - 1) / kWarps), 0, q);
  if (err != cudaSuccess) return err;
  const unsigned grid2 =
      beside ? static_cast<unsigned>(min_of<int64_t>(grid, kScan2BesideBlocks * dev.sms)) : grid;
  err =
      launch(query_scan_kernel, grid2, smem2, q, 2, table_size, task_lines, block_units, row_lines);
  if (err != cudaSuccess) return err;
  const bool alone = suffix_budget_never_binds(q.m);
  static_assert(suffix_gpu::kThreads == kThreads, "one block size");
  // The search's form that fits the device (suffix_cache_search_forms).
  switch (suffix_search_cand_cap(suffix_cache_search_forms(), dev)) {
    case suffix_gpu::kCandCapLarge:
      err = allow_dynamic_smem(query_search_kernel<suffix_gpu::kCandCapLarge>,
                               kSearchSmem<suffix_gpu::kCandCapLarge>);
      if (err != cudaSuccess) return err;
      err =
          launch(query_search_kernel<suffix_gpu::kCandCapLarge>, static_cast<unsigned>(B),
                 kSearchSmem<suffix_gpu::kCandCapLarge>, q, fast_divisor(q.cache.num_rows), alone);
      break;
    case suffix_gpu::kCandCapSmall:
      err = allow_dynamic_smem(query_search_kernel<suffix_gpu::kCandCapSmall>,
                               kSearchSmem<suffix_gpu::kCandCapSmall>);
      if (err != cudaSuccess) return err;
      err =
          launch(query_search_kernel<suffix_gpu::kCandCapSmall>, static_cast<unsigned>(B),
                 kSearchSmem<suffix_gpu::kCandCapSmall>, q, fast_divisor(q.cache.num_rows), alone);
      break;
    default:
      return cudaErrorInvalidConfiguration;  // below 66 KB per block: no supported GPU
  }
  if (err != cudaSuccess) return err;
  if (!alone) {
    err = suffix_walk_gpu(q.m, stream);
    if (err != cudaSuccess) return err;
  }
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace

cudaError_t suffix_cache_query_gpu(const SuffixCacheQueryParams& q, cudaStream_t stream) {
  return launch_query(q, false, stream);
}

// The insert and the query as one launch sequence: the query's prep reads the step's inputs while
// the insert still runs (docs/design/suffix_cache.md), so the step is a little faster than the two
// calls.
cudaError_t suffix_cache_step_gpu(const SuffixCacheInsertParams& ins,
                                  const SuffixCacheQueryParams& q, cudaStream_t stream) {
  const cudaError_t err = suffix_cache_insert_gpu(ins, stream);
  if (err != cudaSuccess) return err;
  return launch_query(q, true, stream);
}

}  // namespace fdspec
