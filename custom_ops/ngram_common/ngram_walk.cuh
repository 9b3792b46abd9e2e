// The batch-wide token-budget walk of the n-gram ops (CUDA side), generic over the op. No Paddle
// include. hybrid_mtp_ngram runs on it; ngram_match's walk kernel is the same algorithm (base 1,
// prefill lengths fixed) and can move onto it with a ~30-line Walk policy.
//
// Both ops (docs/contract/ngram.md) walk the slots in batch order with a batch budget T. A slot either takes
// part ("processed": it may draft) or not. A slot that does not keeps a fixed length. A processed slot has a
// base length (1 in ngram_match, the MTP length `ori` in hybrid_mtp_ngram) and, once its search is
// done, an untruncated draft count u. `unprocessed` starts at I (the slots the op counts) and drops by
// one at each processed slot. At processed slot b, with S_b = (final lengths of the slots before b) +
// base_b and L_b = unprocessed after the drop, let G_b = S_b + L_b: the slot gives up when
// G_b >= T - 1, else keeps c_b = min(u_b, T - G_b) drafts and ends with length base_b + c_b.
//
// Why the walk is a scan. From one processed slot b to the next one b', G grows by c_b, plus the
// lengths of the slots in between, plus base_b' - 1. Provided every fixed length is >= 0 and every base
// is >= 1 (each op guarantees it, see its header), G never decreases. So once a slot gives up, every
// later one does; once a slot is clamped (c_b = T - G_b), G_b' >= T and every later slot gives up too.
// Let G'_b be G_b computed with every earlier processed slot keeping its untruncated u (a prefix sum).
// Every processed slot before the first slot b0 with G'_b0 >= T - 1 or G'_b0 + u_b0 > T keeps u
// exactly (G = G' up to b0); b0 keeps min(u, T - G') or gives up; every later slot gives up. The
// kernel computes the prefix sums, finds b0 by a block-wide min, and hands each slot its count.
#pragma once

#include <cstdint>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include "common/cuda_utils.cuh"
#include "common/fdspec_common.h"

namespace fdspec {

// What the walk needs of one slot. Walk::slot(b) returns this or a type derived from it (carrying what
// the op's finish() needs, e.g. where the drafts come from).
struct WalkSlot {
  bool processed = false;   // takes part: drops `unprocessed` and may draft
  bool counted = false;     // counted in the initial `unprocessed` (I)
  int64_t base = 0;         // processed: length before drafts (>= 1); others: fixed length (>= 0)
  int64_t untruncated = 0;  // processed: u, drafts kept if the threshold never binds (>= 0)
};

// One block: each thread owns a contiguous run of slots, so the batch-wide prefix sums are one
// sequential pass per thread plus one block scan. O(B / kThreads + log kThreads) steps.
// Walk provides: int64_t batch() and threshold(); slot(b) (above, called three times per slot, so it
// must be a pure function of memory that finish() does not write for another slot); and
// finish(b, slot, kept): writes slot b's outcome (kept drafts, 0 for a slot that gives up; unused for
// a slot not processed).
template <int kThreads, class Walk>
__global__ void __launch_bounds__(kThreads) ngram_walk_kernel(Walk walk) {
  wait_for_primary_grid();  // launched as a dependent of the search kernel
  using Scan = cub::BlockScan<int64_t, kThreads>;
  using Reduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ int64_t shared_counted, shared_b0;

  const int64_t B = walk.batch();
  const int64_t per = ceil_div<int64_t>(B, kThreads);
  const int64_t lo = min_of<int64_t>(threadIdx.x * per, B);
  const int64_t hi = min_of<int64_t>(lo + per, B);

  int64_t len_sum = 0, proc_count = 0, counted = 0;
  for (int64_t b = lo; b < hi; ++b) {
    const auto w = walk.slot(b);
    len_sum += w.base + (w.processed ? w.untruncated : 0);
    proc_count += w.processed;
    counted += w.counted;
  }
  int64_t len_before, proc_before;
  Scan(scan_tmp).ExclusiveSum(len_sum, len_before);
  __syncthreads();
  Scan(scan_tmp).ExclusiveSum(proc_count, proc_before);
  const int64_t counted_all = Reduce(reduce_tmp).Sum(counted);
  if (threadIdx.x == 0) shared_counted = counted_all;
  __syncthreads();
  const int64_t I = shared_counted;
  const int64_t T = walk.threshold();

  // First slot where the untruncated walk would clamp or give up (B: none).
  int64_t first = B;
  {
    int64_t A = len_before, D = proc_before;
    for (int64_t b = lo; b < hi && first == B; ++b) {
      const auto w = walk.slot(b);
      if (w.processed) {
        ++D;
        const int64_t G = A + w.base + (I - D);
        if (G >= T - 1 || G + w.untruncated > T) first = b;
        A += w.untruncated;
      }
      A += w.base;
    }
  }
  const int64_t b0 = Reduce(reduce_tmp).Reduce(first, [](int64_t a, int64_t c) { return a < c ? a : c; });
  if (threadIdx.x == 0) shared_b0 = b0;
  __syncthreads();
  const int64_t first_binding = shared_b0;

  int64_t A = len_before, D = proc_before;
  for (int64_t b = lo; b < hi; ++b) {
    const auto w = walk.slot(b);
    int64_t kept = 0;
    if (w.processed) {
      ++D;
      const int64_t G = A + w.base + (I - D);
      kept = w.untruncated;
      if (b > first_binding) kept = 0;
      if (b == first_binding) kept = G >= T - 1 ? 0 : min_of<int64_t>(w.untruncated, T - G);
      A += w.untruncated;
    }
    A += w.base;
    walk.finish(b, w, kept);
  }
}

// One block of 256 threads on `stream` (the walk is latency-bound: more threads only add to the
// scans, and 1024 would cap registers at 64 and spill); graph capturable. Launched as a programmatic
// dependent of the search. Returns the launch status.
template <class Walk>
cudaError_t launch_ngram_walk(const Walk& walk, cudaStream_t stream) {
  constexpr int kWalkThreads = 256;
  return launch_dependent(ngram_walk_kernel<kWalkThreads, Walk>, dim3(1), dim3(kWalkThreads), stream,
                          walk);
}

}  // namespace fdspec
