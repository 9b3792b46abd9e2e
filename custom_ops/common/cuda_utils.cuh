// CUDA helpers for the kernel layer. No Paddle include.
#pragma once

#include <cuda_runtime.h>

// Every launcher returns the launch status instead of throwing, so that the binding turns it into a
// Paddle error. A debug build (-DFDSPEC_DEBUG_SYNC) also synchronises the stream so that an
// asynchronous fault is reported by the op that caused it; release builds never synchronise, which
// keeps every GPU path free of host syncs and CUDA-graph capturable.
#ifdef FDSPEC_DEBUG_SYNC
#define FDSPEC_LAUNCH_STATUS(stream)                                   \
  ([&]() -> cudaError_t {                                              \
    cudaError_t e_ = cudaGetLastError();                               \
    return e_ != cudaSuccess ? e_ : cudaStreamSynchronize(stream);     \
  }())
#else
#define FDSPEC_LAUNCH_STATUS(stream) cudaGetLastError()
#endif

namespace fdspec {

// Integer ceiling division for grid sizes.
template <typename T>
__host__ __device__ __forceinline__ T ceil_div(T a, T b) { return (a + b - 1) / b; }

}  // namespace fdspec
