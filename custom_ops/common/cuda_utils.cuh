// CUDA helpers for the kernel layer. No Paddle include.
#pragma once

#include <cstdint>
#include <utility>

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

// Programmatic dependent launch (sm_90+): a kernel launched with launch_dependent() may start while
// the kernel before it on the stream is still running, and must call wait_for_primary_grid() before
// it reads anything that kernel writes. The primary lets it start early with
// allow_dependent_launch(). It hides the second kernel's launch latency, a good part of the cost of
// a small op. Both device calls are no-ops before sm_90.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

__device__ __forceinline__ void wait_for_primary_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

// The facts of the current device that launch shapes depend on, read on every call (host-side
// attribute queries, no stream work: fine under graph capture).
struct DeviceFacts {
  int sms = 0;    // streaming multiprocessors
  int major = 0;  // compute capability: clusters and programmatic launches need 9.0+
};
inline cudaError_t current_device_facts(DeviceFacts* f) {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&f->sms, cudaDevAttrMultiProcessorCount, dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&f->major, cudaDevAttrComputeCapabilityMajor, dev);
  return err;
}

// Launches `kernel` (with `smem` bytes of dynamic shared memory) as a programmatic dependent of the
// previous work on `stream` where the device supports it (compute capability 9.0+), as an ordinary
// launch elsewhere.
template <typename... KArgs, typename... Args>
cudaError_t launch_dependent_smem(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                  cudaStream_t stream, Args&&... args) {
  DeviceFacts dev;
  const cudaError_t err = current_device_facts(&dev);
  if (err != cudaSuccess) return err;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (dev.major >= 9) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
template <typename... KArgs, typename... Args>
cudaError_t launch_dependent(void (*kernel)(KArgs...), dim3 grid, dim3 block, cudaStream_t stream,
                             Args&&... args) {
  return launch_dependent_smem(kernel, grid, block, 0, stream, std::forward<Args>(args)...);
}

// The sum of every thread's `v` over the block of kThreads threads, in every thread: a warp
// reduction, each warp's total in `warp_sums` (kThreads / 32 values in shared memory), one barrier.
template <int kThreads>
__device__ __forceinline__ int64_t block_sum(int64_t v, int64_t* warp_sums) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  int64_t total = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  return total;
}

// A 16-byte load through the read-only path (as __ldg) that the compiler keeps where it is written:
// before branches on values loaded earlier (so that it leaves in the same round trip), and in order
// with the other loads around it. `ptr` must be 16-byte aligned.
__device__ __forceinline__ uint4 load16_nc_now(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr)
               : "memory");
  return v;
}

// The unsigned type of kBytes bytes, for vectorised raw copies and loads.
template <int kBytes>
struct VecOf;
template <>
struct VecOf<16> { using type = uint4; };
template <>
struct VecOf<8> { using type = uint2; };
template <>
struct VecOf<4> { using type = uint32_t; };
template <>
struct VecOf<2> { using type = uint16_t; };

// Integer ceiling division for grid sizes.
template <typename T>
__host__ __device__ __forceinline__ T ceil_div(T a, T b) { return (a + b - 1) / b; }

}  // namespace fdspec
