// ngram_match: CUDA implementation (docs/contract/ngram.md#ngram_match). No Paddle include.
//
// Kernel 1 (one block per slot) finds each decoding slot's best match with the budget-independent
// search of ngram_search.cuh: which window wins does not depend on the budget, only how many tokens
// of its continuation are kept. Kernel 2 (one block) then replays the sequential walk exactly.
//
// Why the walk is a scan. For a decoding slot b let G_b = S_b + L_b (tokens so far plus the slots
// still counted). The slot gives up when G_b >= T - 1, else it keeps c_b = min(u_b, T - G_b) drafts,
// u_b being its untruncated count. From one decoding slot to the next G grows by c_b plus the lengths
// of the prefill slots in between, so G never decreases (when those lengths are >= 0; kernel 2 walks
// sequentially otherwise). Hence, with G'_b computed from a prefix sum of
// the untruncated counts, every slot before the first slot b0 with G'_b >= T - 1 or G'_b + u_b > T
// keeps u_b exactly; b0 keeps min(u, T - G') or gives up; and every later slot gives up (after b0,
// G >= T - 1). Kernel 2 computes the prefix sums, finds b0 by a block-wide min, and writes the result.
#include "ngram_match/ngram_match.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common/cuda_utils.cuh"
#include "ngram_common/ngram_search.cuh"

namespace fdspec {
namespace {

struct SlotView {
  const int64_t* row;
  int64_t P;
  int64_t s;
};

__device__ __forceinline__ SlotView slot_view(const NgramMatchParams& p, int64_t b) {
  const int64_t W = p.token_ids_stride;
  SlotView v;
  v.row = p.token_ids_all + b * W;
  v.P = clamp_to<int64_t>(p.prompt_lens[b], 0, W);
  v.s = clamp_to<int64_t>(p.step_idx[b], 0, W - v.P);
  return v;
}

__device__ __forceinline__ NgramHaystacks slot_haystacks(const SlotView& v) {
  // With s = 0 there is no newest token (no pattern size fits): point at the row, not before it.
  return NgramHaystacks{v.row, v.P, v.row + v.P, v.s, v.row + v.P + (v.s > 0 ? v.s - 1 : 0), v.s};
}

// The walk's decoding slots: not prefill, not empty. (A negative seq_lens_decoder takes this path too,
// as in the reference, though it was never counted in `unprocessed`.)
__device__ __forceinline__ bool is_decoding(int32_t enc, int32_t dec) { return enc <= 0 && dec != 0; }
__device__ __forceinline__ bool is_counted(int32_t enc, int32_t dec) { return enc > 0 || dec > 0; }

template <int kThreads>
__device__ __forceinline__ int64_t block_sum(int64_t v) {
  using Reduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ int64_t total;
  const int64_t r = Reduce(tmp).Sum(v);
  if (threadIdx.x == 0) total = r;
  __syncthreads();
  const int64_t out = total;
  __syncthreads();
  return out;
}

// Search problem of kernel 1.
template <int kThreadsPerSlot>
struct NgramMatchSearch {
  static constexpr int kThreads = kThreadsPerSlot;
  NgramMatchParams p;

  __device__ SearchSlot slot(int64_t b) const {
    // Every per-slot value is loaded before the first branch: one memory round trip, not three.
    const int32_t enc = p.seq_lens_encoder[b];
    const int32_t dec = p.seq_lens_decoder[b];
    const SlotView v = slot_view(p, b);
    const int64_t budget = ngram_match_slot_budget(p, b, v.s);
    SearchSlot out;
    if (!is_decoding(enc, dec)) return out;  // not recorded: kernel 2 handles the slot
    out.record = true;
    out.h = slot_haystacks(v);
    out.cap = static_cast<int>(min_of<int64_t>(p.max_ngram_size, v.s));
    out.min_n = 1;
    out.search = budget > 0;
    return out;
  }

  // A decoding slot that gives up whatever the earlier slots draft needs no search:
  // G_b >= I + (lengths of the prefill slots before b), I being the initial `unprocessed`, because
  // every earlier decoding slot adds at least 1 to S and takes 1 from L. With a batch larger than
  // the threshold every slot gives up this way and the op reads no haystack. O(B) reads per block,
  // served by L2.
  __device__ bool gives_up(int64_t b) const {
    int64_t counted = 0, prefill_before = 0;
    for (int64_t j = threadIdx.x; j < p.batch; j += kThreads) {
      const int32_t e = p.seq_lens_encoder[j];
      counted += is_counted(e, p.seq_lens_decoder[j]);
      if (j < b && e > 0) prefill_before += p.seq_lens_this_time[j];
    }
    counted = block_sum<kThreads>(counted);
    prefill_before = block_sum<kThreads>(prefill_before);
    return counted + prefill_before >= p.threshold - 1;
  }

  // The result goes into the slot's seq_lens_this_time, whose input value a decoding slot never reads.
  __device__ void store(int64_t b, int32_t code) const { p.seq_lens_this_time[b] = code; }
};

// What kernel 2 knows of one slot once the search is done.
struct WalkSlot {
  bool decoding = false;
  bool counted = false;
  int64_t length = 0;     // its seq_lens_this_time if nothing were truncated (prefill: unchanged)
  int64_t untruncated = 0;  // u: drafts before the threshold
  NgramMatch match;
};

__device__ __forceinline__ WalkSlot walk_slot(const NgramMatchParams& p, int64_t b) {
  WalkSlot w;
  const int32_t enc = p.seq_lens_encoder[b];
  const int32_t dec = p.seq_lens_decoder[b];
  w.counted = is_counted(enc, dec);
  if (enc > 0) {
    w.length = p.seq_lens_this_time[b];
    return w;
  }
  if (dec == 0) return w;
  w.decoding = true;
  const SlotView v = slot_view(p, b);
  w.match = decode_search_result(p.seq_lens_this_time[b], slot_haystacks(v));
  w.untruncated = min_of<int64_t>(w.match.count, ngram_match_slot_budget(p, b, v.s));
  w.untruncated = max_of<int64_t>(w.untruncated, 0);
  w.length = 1 + w.untruncated;
  return w;
}

// Final draft count of a decoding slot at walk state G = S + L (docs/contract/ngram.md#ngram_match): none
// once the batch is out of budget, else the untruncated count cut to what the budget leaves.
__device__ __forceinline__ int64_t kept_drafts(int64_t G, int64_t untruncated, int64_t T) {
  return G >= T - 1 ? 0 : min_of<int64_t>(untruncated, T - G);
}

__device__ __forceinline__ void write_slot(const NgramMatchParams& p, int64_t b, const WalkSlot& w,
                                           int64_t kept) {
  int64_t* drafts = p.draft_tokens + b * p.draft_stride;
  for (int64_t k = 0; k < kept; ++k) drafts[1 + k] = w.match.src[k];
  p.seq_lens_this_time[b] = static_cast<int32_t>(1 + kept);
}

// One block: each thread owns a contiguous run of slots, so the batch-wide prefix sums are one
// sequential pass per thread plus one block scan: O(B / kThreads + log kThreads) steps.
// The scan form needs G to be non-decreasing, which fails only if a prefill slot has a negative
// seq_lens_this_time (never in a real runner); then thread 0 walks the batch as the reference does.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) ngram_match_walk_kernel(NgramMatchParams p) {
  wait_for_primary_grid();
  using Scan = cub::BlockScan<int64_t, kThreads>;
  using Reduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ int64_t shared_counted, shared_b0;

  const int64_t B = p.batch;
  const int64_t T = p.threshold;
  const int64_t per = ceil_div<int64_t>(B, kThreads);
  const int64_t lo = min_of<int64_t>(threadIdx.x * per, B);
  const int64_t hi = min_of<int64_t>(lo + per, B);

  int64_t len_sum = 0, dec_count = 0, counted = 0;
  bool negative_prefill = false;
  for (int64_t b = lo; b < hi; ++b) {
    const WalkSlot w = walk_slot(p, b);
    len_sum += w.length;
    dec_count += w.decoding;
    counted += w.counted;
    negative_prefill |= w.length < 0;
  }
  const int64_t I = Reduce(reduce_tmp).Sum(counted);
  if (threadIdx.x == 0) shared_counted = I;
  if (__syncthreads_or(negative_prefill)) {
    if (threadIdx.x == 0) {
      int64_t A = 0, D = 0;
      for (int64_t b = 0; b < B; ++b) {
        const WalkSlot w = walk_slot(p, b);
        if (w.decoding) {
          ++D;
          const int64_t kept = kept_drafts(A + 1 + (shared_counted - D), w.untruncated, T);
          write_slot(p, b, w, kept);
          A += 1 + kept;
        } else {
          if (p.seq_lens_encoder[b] <= 0) p.seq_lens_this_time[b] = 0;
          A += w.length;
        }
      }
    }
    return;
  }
  const int64_t counted_all = shared_counted;
  int64_t len_before, dec_before;
  Scan(scan_tmp).ExclusiveSum(len_sum, len_before);
  __syncthreads();
  Scan(scan_tmp).ExclusiveSum(dec_count, dec_before);

  // First slot where the untruncated walk would clamp or give up (B: none).
  int64_t first = B;
  {
    int64_t A = len_before, D = dec_before;
    for (int64_t b = lo; b < hi && first == B; ++b) {
      const WalkSlot w = walk_slot(p, b);
      if (w.decoding) {
        ++D;
        const int64_t G = A + 1 + (counted_all - D);
        if (G >= T - 1 || G + w.untruncated > T) first = b;
      }
      A += w.length;
    }
  }
  __syncthreads();
  const int64_t b0 = Reduce(reduce_tmp).Reduce(first, [](int64_t a, int64_t c) { return a < c ? a : c; });
  if (threadIdx.x == 0) shared_b0 = b0;
  __syncthreads();
  const int64_t first_binding = shared_b0;

  int64_t A = len_before, D = dec_before;
  for (int64_t b = lo; b < hi; ++b) {
    const WalkSlot w = walk_slot(p, b);
    if (!w.decoding) {
      if (p.seq_lens_encoder[b] <= 0) p.seq_lens_this_time[b] = 0;  // empty slot; prefill untouched
      A += w.length;
      continue;
    }
    ++D;
    int64_t kept = w.untruncated;
    if (b == first_binding) kept = kept_drafts(A + 1 + (counted_all - D), w.untruncated, T);
    if (b > first_binding) kept = 0;
    write_slot(p, b, w, kept);
    A += w.length;
  }
}

}  // namespace

cudaError_t ngram_match_gpu(const NgramMatchParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  cudaError_t err =
      launch_ngram_search(NgramMatchSearch<kNgramSearchThreads>{p}, p.batch, p.max_ngram_size, stream);
  if (err != cudaSuccess) return err;
  constexpr int kWalkThreads = 256;
  err = launch_dependent(ngram_match_walk_kernel<kWalkThreads>, dim3(1), dim3(kWalkThreads), stream, p);
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
