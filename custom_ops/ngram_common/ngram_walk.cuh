// The batch-wide token-budget walk of the n-gram ops on the GPU: the scan form that ngram_walk.h
// states and proves exact, generic over the op. No Paddle include.
#pragma once

#include <cstdint>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include "common/cuda_utils.cuh"
#include "common/fdspec_common.h"
#include "ngram_common/ngram_walk.h"

namespace fdspec {

// What the GPU walk knows of one slot once its search is done: the slot state plus u (the drafts it
// keeps if the threshold never binds, >= 0) and where they come from.
struct DeviceWalkSlot : WalkSlot {
  int64_t untruncated = 0;
  const int64_t* src = nullptr;
};

// Drafts slot b keeps at walk state G (ngram_walk.h): none once the batch is out of budget, else u
// cut to what the budget leaves.
__device__ __forceinline__ int64_t ngram_walk_kept(int64_t G, int64_t untruncated, int64_t T) {
  return G >= T - 1 ? 0 : min_of<int64_t>(untruncated, T - G);
}

// One block: each thread owns a contiguous run of slots, so the batch-wide prefix sums are one
// sequential pass per thread plus one block scan. O(B / kThreads + log kThreads) steps.
// Walk provides: int64_t batch() and threshold(); WalkOutputs outputs(); DeviceWalkSlot slot(b)
// (called up to three times per slot, so a pure function of memory that no other slot's
// ngram_walk_finish writes). A negative fixed length anywhere (see ngram_walk.h) sends the block to
// the sequential walk, on thread 0.
template <int kThreads, class Walk>
__global__ void __launch_bounds__(kThreads) ngram_walk_kernel(Walk walk) {
  wait_for_primary_grid();  // launched as a dependent of the search kernel
  using Scan = cub::BlockScan<int64_t, kThreads>;
  using Reduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ int64_t shared_counted, shared_b0;

  const int64_t B = walk.batch();
  const int64_t T = walk.threshold();
  const WalkOutputs out = walk.outputs();
  const int64_t per = ceil_div<int64_t>(B, kThreads);
  const int64_t lo = min_of<int64_t>(threadIdx.x * per, B);
  const int64_t hi = min_of<int64_t>(lo + per, B);

  int64_t len_sum = 0, proc_count = 0, counted = 0;
  bool negative = false;
  for (int64_t b = lo; b < hi; ++b) {
    const DeviceWalkSlot w = walk.slot(b);
    len_sum += w.base + (w.processed ? w.untruncated : 0);
    proc_count += w.processed;
    counted += w.counted;
    negative |= w.base < 0;
  }
  const int64_t counted_all = Reduce(reduce_tmp).Sum(counted);
  if (threadIdx.x == 0) shared_counted = counted_all;
  if (__syncthreads_or(negative)) {  // also publishes shared_counted
    if (threadIdx.x == 0) {
      const int64_t I = shared_counted;
      int64_t A = 0, D = 0;
      for (int64_t b = 0; b < B; ++b) {
        const DeviceWalkSlot w = walk.slot(b);
        int64_t kept = 0;
        if (w.processed) {
          ++D;
          kept = ngram_walk_kept(A + w.base + (I - D), w.untruncated, T);
        }
        A += w.base + kept;
        ngram_walk_finish(out, b, w, w.src, kept);
      }
    }
    return;
  }
  const int64_t I = shared_counted;
  int64_t len_before, proc_before;
  Scan(scan_tmp).ExclusiveSum(len_sum, len_before);
  __syncthreads();
  Scan(scan_tmp).ExclusiveSum(proc_count, proc_before);
  __syncthreads();

  // First slot where the untruncated walk would clamp or give up (B: none).
  int64_t first = B;
  {
    int64_t A = len_before, D = proc_before;
    for (int64_t b = lo; b < hi && first == B; ++b) {
      const DeviceWalkSlot w = walk.slot(b);
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
    const DeviceWalkSlot w = walk.slot(b);
    int64_t kept = 0;
    if (w.processed) {
      ++D;
      kept = w.untruncated;
      if (b > first_binding) kept = 0;
      if (b == first_binding) kept = ngram_walk_kept(A + w.base + (I - D), w.untruncated, T);
      A += w.untruncated;
    }
    A += w.base;
    ngram_walk_finish(out, b, w, w.src, kept);
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
