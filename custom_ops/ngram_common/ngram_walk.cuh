// The batch-wide token-budget walk of the n-gram ops on the GPU: the scan form that ngram_walk.h
// states and proves exact, generic over the op. No Paddle include.
// Design: docs/design/ngram.md.
#pragma once

#include <cstdint>
#include <type_traits>

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

// Asks for the cache line at p to be brought to this SM's L1 (no wait, no fault on any address).
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// Sums of a run of slots that the walk scans: the lengths with no threshold, the processed slots,
// the counted slots, and the negative fixed lengths (any: the walk goes sequential).
struct WalkSums {
  int64_t len = 0, proc = 0, counted = 0, negative = 0;
  __device__ WalkSums operator+(const WalkSums& o) const {
    WalkSums r;
    r.len = len + o.len;
    r.proc = proc + o.proc;
    r.counted = counted + o.counted;
    r.negative = negative + o.negative;
    return r;
  }
};

// One block: each thread owns a contiguous run of at most `per` slots, held in registers (the first
// kPer of them; a larger batch re-reads the rest), so the batch-wide prefix sums are one pass per
// thread plus one block scan, and the slots are read once. O(B / kThreads + log kThreads) steps.
// Walk provides: int64_t batch() and threshold(); WalkOutputs outputs(); DeviceWalkSlot slot(b)
// (a pure function of memory that no other slot's ngram_walk_finish writes). A negative fixed
// length anywhere (see ngram_walk.h) sends the block to the sequential walk, on thread 0.
//
// A walk that can be walk-free (ngram_match's, hybrid_mtp_ngram's) has try_free and free_term;
// suffix_match's walk is launched only when its threshold can bind and has neither.
template <class Walk, class = void>
struct MayBeWalkFree : std::false_type {};
template <class Walk>
struct MayBeWalkFree<Walk, std::void_t<decltype(&Walk::free_term)>> : std::true_type {};

// Walk-free batches (ngram_walk_free, ngram_walk.h), tested only where the host set Walk::try_free
// (launch_ngram_op): the block first sums the bound's terms (Walk::free_term(b), one per thread,
// from memory whose value the search cannot change in a way that changes the term) and exits before
// it waits for the search, whose blocks finish their own slots then. Only a batch that may bind
// waits and walks. Reading before the wait is sound because the search, itself a programmatic
// dependent of the work before the op, lets this kernel launch only after its blocks have waited
// for that work. Exiting without the wait is sound for the work after the op: what the stream runs
// after a programmatic dependent that never waits still finds that dependent's primary grid
// finished (tests/cuda/pdl_order_check.cu checks it on the device, eagerly and in a graph).
template <int kThreads, int kPer, class Walk>
__global__ void __launch_bounds__(kThreads) ngram_walk_kernel(Walk walk) {
  using Scan = cub::BlockScan<WalkSums, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ unsigned long long shared_b0;
  __shared__ int64_t warp_bound[kThreads / 32];

  const int64_t B = walk.batch();
  const int64_t T = walk.threshold();
  if constexpr (MayBeWalkFree<Walk>::value) {
    if (walk.try_free) {
      int64_t bound = 0;
      if (B <= kWalkFreeMaxBatch) {  // else not walk-free, and the sum could overflow
        for (int64_t j = threadIdx.x; j < B; j += kThreads) bound += walk.free_term(j);
      }
      if (ngram_walk_free(B, T, block_sum<kThreads>(bound, warp_bound))) return;
    }
  }
  wait_for_primary_grid();  // launched as a dependent of the search kernel
  const WalkOutputs out = walk.outputs();
  const int64_t per = ceil_div<int64_t>(B, kThreads);
  const int64_t lo = min_of<int64_t>(threadIdx.x * per, B);
  const int64_t hi = min_of<int64_t>(lo + per, B);
  if (threadIdx.x == 0) shared_b0 = static_cast<unsigned long long>(B);

  DeviceWalkSlot cache[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    if (lo + k < hi) cache[k] = walk.slot(lo + k);
  }
  // Visits this thread's slots in order: f(b, slot).
  auto visit = [&](auto&& f) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (lo + k < hi) f(lo + k, cache[k]);
    }
    for (int64_t b = lo + kPer; b < hi; ++b) f(b, walk.slot(b));
  };

  WalkSums mine;
  visit([&](int64_t, const DeviceWalkSlot& w) {
    mine.len += w.base + (w.processed ? w.untruncated : 0);
    mine.proc += w.processed;
    mine.counted += w.counted;
    mine.negative += w.base < 0;
    // The drafts are copied at the end, after two barriers: start their way to this SM now.
    if (w.processed && w.untruncated > 0) prefetch_l1(w.src);
  });
  WalkSums before, all;
  auto add = [](const WalkSums& a, const WalkSums& c) { return a + c; };
  Scan(scan_tmp).ExclusiveScan(mine, before, WalkSums{}, add, all);
  const int64_t I = all.counted;
  if (all.negative > 0) {
    if (threadIdx.x == 0) {
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

  // First slot where the untruncated walk would clamp or give up (B: none).
  int64_t first = B;
  {
    int64_t A = before.len, D = before.proc;
    visit([&](int64_t b, const DeviceWalkSlot& w) {
      if (w.processed) {
        ++D;
        const int64_t G = A + w.base + (I - D);
        if (first == B && (G >= T - 1 || G + w.untruncated > T)) first = b;
        A += w.untruncated;
      }
      A += w.base;
    });
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    first = min_of<int64_t>(first, __shfl_xor_sync(0xFFFFFFFFu, first, off));
  }
  if ((threadIdx.x & 31) == 0 && first < B)
    atomicMin(&shared_b0, static_cast<unsigned long long>(first));
  __syncthreads();
  const int64_t first_binding = static_cast<int64_t>(shared_b0);

  int64_t A = before.len, D = before.proc;
  visit([&](int64_t b, const DeviceWalkSlot& w) {
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
  });
}

// One block of 256 threads on `stream` (the walk is latency-bound: more threads only add to the
// scans), each holding up to 4 slots in registers; graph capturable. Launched as a programmatic
// dependent of the search. Returns the launch status.
template <class Walk>
cudaError_t launch_ngram_walk(const Walk& walk, cudaStream_t stream) {
  constexpr int kWalkThreads = 256;
  auto kernel = ngram_walk_kernel<kWalkThreads, 4, Walk>;
  return launch_dependent(kernel, dim3(1), dim3(kWalkThreads), stream, walk);
}

}  // namespace fdspec
