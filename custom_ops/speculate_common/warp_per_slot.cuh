// One warp per slot: the launch shape of the per-slot step kernels (speculate_verify_greedy,
// speculate_step_update). Slots are independent and tiny, so small blocks of a few warps fill the
// SMs sooner than large ones. Kernel layer, no Paddle include.
// Design: docs/design/step_ops.md.
#pragma once

#include <cstdint>

#include "common/cuda_utils.cuh"

namespace fdspec {

constexpr int kSlotWarp = 32;
constexpr int kSlotWarpsPerBlock = 4;
constexpr int kSlotBlockThreads = kSlotWarp * kSlotWarpsPerBlock;

// The kernel: the warp of slot b runs slot_fn(p, lane, b); warps past the batch leave at once (b is
// uniform within a warp, so they leave together).
template <class Params, void (*slot_fn)(const Params&, int, int64_t)>
__global__ void __launch_bounds__(kSlotBlockThreads) warp_per_slot_kernel(Params p) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kSlotWarpsPerBlock + threadIdx.x / kSlotWarp;
  if (b < p.batch) slot_fn(p, static_cast<int>(threadIdx.x % kSlotWarp), b);
}

// Launches slot_fn over the p.batch slots, a warp each, on `stream` (nothing for an empty batch);
// returns the launch status.
template <class Params, void (*slot_fn)(const Params&, int, int64_t)>
cudaError_t launch_warp_per_slot(const Params& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const int64_t blocks = ceil_div<int64_t>(p.batch, kSlotWarpsPerBlock);
  warp_per_slot_kernel<Params, slot_fn><<<static_cast<unsigned>(blocks), kSlotBlockThreads, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
