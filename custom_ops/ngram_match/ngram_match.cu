// ngram_match: CUDA implementation (SPEC §1). No Paddle include.
//
// Kernel 1 (one block per slot) finds each decoding slot's best match with the budget-independent
// search of ngram_search.cuh: which window wins does not depend on the budget, only how many tokens
// of its continuation are kept. Kernel 2 (one block) then replays the sequential walk exactly.
//
// Why the walk is a scan. For a decoding slot b let G_b = S_b + L_b (tokens so far plus the slots
// still counted). The slot gives up when G_b >= T - 1, else it keeps c_b = min(u_b, T - G_b) drafts,
// u_b being its untruncated count. From one decoding slot to the next G grows by c_b plus the lengths
// of the prefill slots in between (each counted as >= 0: prefill_budget_length), so G never
// decreases. Hence, with G'_b computed from a prefix sum of the untruncated counts, every slot before
// the first slot b0 with G'_b >= T - 1 or G'_b + u_b > T keeps u_b exactly; b0 keeps min(u, T - G')
// or gives up; and every later slot gives up (after b0, G >= T - 1). Kernel 2 computes the prefix
// sums, finds b0 by a block-wide min, and writes the result.
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
  return NgramHaystacks{v.row, v.P, v.row + v.P, v.s, v.row + v.P + v.s - 1, v.s};
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

// Search problem of kernel 1. A decoding slot that is sure to give up whatever the earlier slots draft
// is not searched: G_b >= I + (lengths of the prefill slots before b), I being the initial
// `unprocessed`, since every earlier decoding slot adds at least 1 to S and removes 1 from L. With a
// batch larger than the threshold every slot gives up this way and the op reads no haystack at all.
// That bound costs O(B) reads per block, which stay in L2.
template <int kThreadsPerSlot>
struct NgramMatchSearch {
  static constexpr int kThreads = kThreadsPerSlot;
  NgramMatchParams p;

  __device__ SearchSlot slot(int64_t b) const {
    SearchSlot out;
    const int32_t enc = p.seq_lens_encoder[b];
    const int32_t dec = p.seq_lens_decoder[b];
    if (!is_decoding(enc, dec)) return out;  // result stays nullptr: kernel 2 handles the slot
    out.result = p.seq_lens_this_time + b;

    int64_t counted = 0, prefill_before = 0;
    for (int64_t j = threadIdx.x; j < p.batch; j += kThreads) {
      const int32_t e = p.seq_lens_encoder[j];
      counted += is_counted(e, p.seq_lens_decoder[j]);
      if (j < b && e > 0) prefill_before += prefill_budget_length(p.seq_lens_this_time[j]);
    }
    counted = block_sum<kThreads>(counted);
    prefill_before = block_sum<kThreads>(prefill_before);
    if (counted + prefill_before >= p.threshold - 1) return out;

    const SlotView v = slot_view(p, b);
    if (ngram_match_slot_budget(p, b, v.s) <= 0) return out;
    out.h = slot_haystacks(v);
    out.cap = static_cast<int>(min_of<int64_t>(p.max_ngram_size, v.s));
    out.min_n = 1;
    out.search = true;
    return out;
  }
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
    w.length = prefill_budget_length(p.seq_lens_this_time[b]);
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

// One block: each thread owns a contiguous run of slots, so the batch-wide prefix sums are one
// sequential pass per thread plus one block scan. O(B / kThreads + log kThreads) steps.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) ngram_match_walk_kernel(NgramMatchParams p) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  using Reduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ int64_t shared_counted, shared_b0;

  const int64_t B = p.batch;
  const int64_t per = ceil_div<int64_t>(B, kThreads);
  const int64_t lo = min_of<int64_t>(threadIdx.x * per, B);
  const int64_t hi = min_of<int64_t>(lo + per, B);

  int64_t len_sum = 0, dec_count = 0, counted = 0;
  for (int64_t b = lo; b < hi; ++b) {
    const WalkSlot w = walk_slot(p, b);
    len_sum += w.length;
    dec_count += w.decoding;
    counted += w.counted;
  }
  int64_t len_before, dec_before;
  Scan(scan_tmp).ExclusiveSum(len_sum, len_before);
  __syncthreads();
  Scan(scan_tmp).ExclusiveSum(dec_count, dec_before);
  const int64_t counted_all = Reduce(reduce_tmp).Sum(counted);
  if (threadIdx.x == 0) shared_counted = counted_all;
  __syncthreads();
  const int64_t I = shared_counted;
  const int64_t T = p.threshold;

  // First slot where the untruncated walk would clamp or give up (B: none).
  int64_t first = B;
  {
    int64_t A = len_before, D = dec_before;
    for (int64_t b = lo; b < hi && first == B; ++b) {
      const WalkSlot w = walk_slot(p, b);
      if (w.decoding) {
        ++D;
        const int64_t G = A + 1 + (I - D);
        if (G >= T - 1 || G + w.untruncated > T) first = b;
      }
      A += w.length;
    }
  }
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
    const int64_t G = A + 1 + (I - D);
    int64_t kept = w.untruncated;
    if (b > first_binding) kept = 0;
    if (b == first_binding) kept = G >= T - 1 ? 0 : min_of<int64_t>(w.untruncated, T - G);
    int64_t* drafts = p.draft_tokens + b * p.draft_stride;
    for (int64_t k = 0; k < kept; ++k) drafts[1 + k] = w.match.src[k];
    p.seq_lens_this_time[b] = static_cast<int32_t>(1 + kept);
    A += w.length;
  }
}

}  // namespace

cudaError_t ngram_match_gpu(const NgramMatchParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  cudaError_t err = launch_ngram_search(NgramMatchSearch<kNgramSearchThreads>{p}, static_cast<int>(p.batch),
                                        p.max_ngram_size, stream);
  if (err != cudaSuccess) return err;
  constexpr int kWalkThreads = 1024;
  ngram_match_walk_kernel<kWalkThreads><<<1, kWalkThreads, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
