// Kernel profiling probes, compiled out unless FDSPEC_PROFILE is defined (the shape of FlashInfer's
// include/flashinfer/profiler.cuh). A probe stores a clock64() value or a counter into a table on
// the device that the host reads after a launch. Probes never change a launch: no grid, block,
// shared memory, stream or ordering depends on them; in a normal build every macro below expands to
// nothing, so the shipped binary has no trace of them. The tables are `static`: each translation
// unit that includes this header has its own, read by host code in that same unit.
//
// Block records: thread 0 of block b writes slot k of record b (blocks past kBlocks are dropped).
// Warp records: lane 0 of warp w (global index over the grid) writes slot k of record w.
//
//   FDSPEC_PROF(stmt...)           a statement that exists only in the profile build
//   FDSPEC_PROF_SET(k, v)          block record: slot k = v
//   FDSPEC_PROF_ADD(k, v)          block record: slot k += v
//   FDSPEC_PROF_LAP(k, mark)       block record: slot k += clocks since `mark`; mark = now
//   FDSPEC_PROF_WARP_LAP(k, mark)  warp record: slot k = clocks since `mark` (lane 0); mark = now
//   FDSPEC_PROF_WARP_ADD(k, v)     warp record: slot k += v (any lane, atomic)
// Build with -DFDSPEC_PROFILE (benchmarks/kernels/build.sh: PROFILE=1). Used by the suffix kernels.
#pragma once

#ifdef FDSPEC_PROFILE

#include <cuda_runtime.h>

namespace fdspec {
namespace profiler {

constexpr int kBlocks = 4096;    // block records
constexpr int kSlots = 40;       // clocks and counters per block record
constexpr int kWarps = 1 << 14;  // warp records
constexpr int kWarpSlots = 8;    // clocks and counters per warp record

static __device__ long long g_block[kBlocks][kSlots];
static __device__ long long g_warp[kWarps][kWarpSlots];
static __device__ int g_warps_seen;  // 1 + the largest warp index that wrote a record

__device__ __forceinline__ int warp_index() {
  return static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
}

// Host side: this translation unit's tables.
static inline cudaError_t read_blocks(long long (*out)[kSlots]) {
  return cudaMemcpyFromSymbol(out, g_block, sizeof(g_block));
}
// Copies the warp records and their count, then clears them (counters add up between reads).
static inline cudaError_t read_warps(long long (*out)[kWarpSlots], int* warps) {
  static const long long zero[kWarps][kWarpSlots] = {};
  const int none = 0;
  cudaError_t err = cudaMemcpyFromSymbol(out, g_warp, sizeof(g_warp));
  if (err == cudaSuccess) err = cudaMemcpyFromSymbol(warps, g_warps_seen, sizeof(int));
  if (err == cudaSuccess) err = cudaMemcpyToSymbol(g_warp, zero, sizeof(zero));
  if (err == cudaSuccess) err = cudaMemcpyToSymbol(g_warps_seen, &none, sizeof(int));
  return err;
}

}  // namespace profiler
}  // namespace fdspec

#define FDSPEC_PROF(...) __VA_ARGS__
#define FDSPEC_PROF_SET(k, v)                                                 \
  do {                                                                        \
    if (threadIdx.x == 0 && blockIdx.x < ::fdspec::profiler::kBlocks)         \
      ::fdspec::profiler::g_block[blockIdx.x][k] = static_cast<long long>(v); \
  } while (0)
#define FDSPEC_PROF_ADD(k, v)                                                  \
  do {                                                                         \
    if (threadIdx.x == 0 && blockIdx.x < ::fdspec::profiler::kBlocks)          \
      ::fdspec::profiler::g_block[blockIdx.x][k] += static_cast<long long>(v); \
  } while (0)
#define FDSPEC_PROF_LAP(k, mark)            \
  do {                                      \
    const long long prof_now_ = clock64();  \
    FDSPEC_PROF_ADD(k, prof_now_ - (mark)); \
    (mark) = prof_now_;                     \
  } while (0)
#define FDSPEC_PROF_WARP_LAP(k, mark)                                      \
  do {                                                                     \
    const long long prof_now_ = clock64();                                 \
    const int prof_w_ = ::fdspec::profiler::warp_index();                  \
    if ((threadIdx.x & 31) == 0 && prof_w_ < ::fdspec::profiler::kWarps) { \
      ::fdspec::profiler::g_warp[prof_w_][k] = prof_now_ - (mark);         \
      atomicMax(&::fdspec::profiler::g_warps_seen, prof_w_ + 1);           \
    }                                                                      \
    (mark) = prof_now_;                                                    \
  } while (0)
#define FDSPEC_PROF_WARP_ADD(k, v)                                                              \
  do {                                                                                          \
    const int prof_w_ = ::fdspec::profiler::warp_index();                                       \
    if (prof_w_ < ::fdspec::profiler::kWarps)                                                   \
      atomicAdd(reinterpret_cast<unsigned long long*>(&::fdspec::profiler::g_warp[prof_w_][k]), \
                static_cast<unsigned long long>(v));                                            \
  } while (0)

#else

#define FDSPEC_PROF(...)
#define FDSPEC_PROF_SET(k, v) ((void)0)
#define FDSPEC_PROF_ADD(k, v) ((void)0)
#define FDSPEC_PROF_LAP(k, mark) ((void)0)
#define FDSPEC_PROF_WARP_LAP(k, mark) ((void)0)
#define FDSPEC_PROF_WARP_ADD(k, v) ((void)0)

#endif
