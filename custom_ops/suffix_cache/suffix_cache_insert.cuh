// suffix_cache: the insert (a block per slot), finish and evict kernels.
// Part of suffix_cache.cu's one translation unit (included there, and only there: the kernels
// keep internal linkage and the profiler's per-unit tables). Design: docs/design/suffix_cache.md.
#pragma once

#include "suffix_cache/suffix_cache_device.cuh"

namespace fdspec {
namespace {

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
  wait_for_primary_grid();  // ordering rules O1, O2 (docs/design/suffix_cache.md)
  allow_dependent_launch();
  const int64_t b = blockIdx.x, B = p.batch;
  const unsigned long long low = kInsertTicket - 1;
  InsertSlotIn in{
      p.slots[b], p.seq_lens_encoder[b], p.seq_lens_decoder[b], p.prompt_lens[b], p.step_idx[b], 0,
      0};
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
      // volatile, ordering rule O4: slot i's block may be rewriting it now (any value read counts
      // alike: begins_request).
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
    // volatile, ordering rule O4: the other blocks' writes (fenced before their second ticket).
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

}  // namespace
}  // namespace fdspec
