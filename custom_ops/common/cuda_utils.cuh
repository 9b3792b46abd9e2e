// CUDA helpers for the kernel layer. No Paddle include.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>

#include "common/launch_plan.h"

// Every launcher returns the launch status instead of throwing, so that the binding turns it into a
// Paddle error. A debug build (-DFDSPEC_DEBUG_SYNC) also synchronises the stream so that an
// asynchronous fault is reported by the op that caused it; release builds never synchronise, which
// keeps every GPU path free of host syncs and CUDA-graph capturable.
#ifdef FDSPEC_DEBUG_SYNC
#define FDSPEC_LAUNCH_STATUS(stream)                               \
  ([&]() -> cudaError_t {                                          \
    cudaError_t e_ = cudaGetLastError();                           \
    return e_ != cudaSuccess ? e_ : cudaStreamSynchronize(stream); \
  }())
#else
#define FDSPEC_LAUNCH_STATUS(stream) cudaGetLastError()
#endif

namespace fdspec {

// Programmatic dependent launch (sm_90+): a kernel launched with launch_dependent() may start while
// the kernel before it on the stream is still running, and must call wait_for_primary_grid() before
// it reads anything that kernel writes. The primary lets it start early with
// allow_dependent_launch(). It hides the second kernel's launch latency, a good part of the cost of
// a small op. Both device calls are compiled out of images for targets below sm_90, which is why
// the host launches a kernel this way only where its loaded image has them (kernel_features).
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

// The facts of the current device that launch shapes depend on, as the host believes them
// (launch_plan.h: FDSPEC_DEVICE_CAP / FDSPEC_DEVICE_SMEM lower them), read once per device and
// cached.
using DeviceFacts = DeviceLimits;

namespace launch_detail {
// The per-process cache of device limits and of each kernel's features on each device. Host-side
// attribute queries only (no stream work): fine under graph capture. A mutex guards it; a lookup
// costs a few tens of ns, against microseconds for the launch itself.
struct KernelEntry {
  KernelFeatures features;
  int static_smem = 0;  // cudaFuncAttributes::sharedSizeBytes
  // The dynamic shared memory the kernel may take now: default_dynamic_smem until the first opt-in,
  // then the largest MaxDynamicSharedMemorySize set.
  int smem_set = kDefaultSmemPerBlock;
};
struct Cache {
  std::mutex mu;
  std::map<int, DeviceLimits> devices;
  std::map<std::pair<const void*, int>, KernelEntry> kernels;
};
inline Cache& cache() {
  static Cache c;
  return c;
}
// Reads device `id`'s limits and applies the environment's caps (caller holds the lock).
inline cudaError_t read_device(int id, DeviceLimits* out) {
  DeviceLimits d;
  int major = 0, minor = 0;
  cudaError_t err = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, id);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, id);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, id);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, id);
  }
  if (err != cudaSuccess) return err;
  d.cc = major * 10 + minor;
  const char* cap_env = std::getenv("FDSPEC_DEVICE_CAP");
  const char* smem_env = std::getenv("FDSPEC_DEVICE_SMEM");
  DeviceCap cap;
  if (!parse_device_cap(cap_env, smem_env, &cap)) {
    std::fprintf(
        stderr,
        "fastdeploy_spec: FDSPEC_DEVICE_CAP='%s' / FDSPEC_DEVICE_SMEM='%s' not understood (a "
        "compute capability such as 8.0 or 8.9; bytes >= 49152)\n",
        cap_env ? cap_env : "", smem_env ? smem_env : "");
    return cudaErrorInvalidValue;
  }
  *out = cap_device(d, cap);
  return cudaSuccess;
}
inline cudaError_t device_locked(int id, DeviceLimits* out) {
  Cache& c = cache();
  const auto it = c.devices.find(id);
  if (it != c.devices.end()) {
    *out = it->second;
    return cudaSuccess;
  }
  const cudaError_t err = read_device(id, out);
  if (err == cudaSuccess) c.devices.emplace(id, *out);
  return err;
}
// The cache entry of `func` on the current device (created on first use), with the lock held.
inline cudaError_t entry_locked(const void* func, KernelEntry** out, DeviceLimits* dev) {
  int id = 0;
  cudaError_t err = cudaGetDevice(&id);
  if (err == cudaSuccess) err = device_locked(id, dev);
  if (err != cudaSuccess) return err;
  Cache& c = cache();
  const auto key = std::make_pair(func, id);
  auto it = c.kernels.find(key);
  if (it == c.kernels.end()) {
    cudaFuncAttributes a = {};
    err = cudaFuncGetAttributes(&a, func);  // cudaErrorNoKernelImageForDevice: nothing to run here
    if (err != cudaSuccess) return err;
    KernelEntry e;
    e.features = decide_kernel_features(a.ptxVersion, a.binaryVersion, *dev);
    e.static_smem = static_cast<int>(a.sharedSizeBytes);
    e.smem_set = default_dynamic_smem(e.static_smem, a.maxDynamicSharedSizeBytes);
    it = c.kernels.emplace(key, e).first;
  }
  *out = &it->second;
  return cudaSuccess;
}
}  // namespace launch_detail

// The current device's facts (cached per device).
inline cudaError_t current_device_facts(DeviceFacts* f) {
  int id = 0;
  cudaError_t err = cudaGetDevice(&id);
  if (err != cudaSuccess) return err;
  std::lock_guard<std::mutex> lock(launch_detail::cache().mu);
  return launch_detail::device_locked(id, f);
}

// What `kernel` may use on the current device: decided once per (kernel, device) from the image the
// runtime loaded for it and the device's (capped) compute capability (launch_plan.h).
template <typename... KArgs>
cudaError_t kernel_features(void (*kernel)(KArgs...), KernelFeatures* f) {
  std::lock_guard<std::mutex> lock(launch_detail::cache().mu);
  launch_detail::KernelEntry* e = nullptr;
  DeviceLimits dev;
  const cudaError_t err =
      launch_detail::entry_locked(reinterpret_cast<const void*>(kernel), &e, &dev);
  if (err == cudaSuccess) *f = e->features;
  return err;
}

// Why the last launcher call on this thread refused a launch (nullptr: none named). The launchers
// return a bare cudaError_t; a harness or a binding may print this beside it.
inline const char*& launch_refusal() {
  static thread_local const char* reason = nullptr;
  return reason;
}

// Lets `kernel` ask for `smem` bytes of dynamic shared memory on the current device: an opt-in
// (MaxDynamicSharedMemorySize, set once per size increase per (kernel, device)) as soon as `smem`
// passes what the kernel may take without one, which its static shared memory lowers below 48 KB
// (default_dynamic_smem). cudaErrorInvalidValue, with launch_refusal() naming the reason, where the
// device as the host believes it has less than static + `smem`: the launchers plan their forms so
// that this does not happen.
template <typename... KArgs>
cudaError_t allow_dynamic_smem(void (*kernel)(KArgs...), size_t smem) {
  if (smem == 0) return cudaSuccess;
  std::lock_guard<std::mutex> lock(launch_detail::cache().mu);
  launch_detail::KernelEntry* e = nullptr;
  DeviceLimits dev;
  cudaError_t err = launch_detail::entry_locked(reinterpret_cast<const void*>(kernel), &e, &dev);
  if (err != cudaSuccess || smem <= static_cast<size_t>(e->smem_set)) return err;
  const char* why = dynamic_smem_refusal(smem, static_cast<size_t>(e->static_smem), dev.smem_optin);
  if (why != nullptr) {
    launch_refusal() = why;
    return cudaErrorInvalidValue;
  }
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem));
  if (err == cudaSuccess) {
    e->smem_set = static_cast<int>(smem);
  } else {
    launch_refusal() = "cudaFuncSetAttribute(MaxDynamicSharedMemorySize) refused the size";
  }
  return err;
}

// Launches `kernel` (with `smem` bytes of dynamic shared memory) as a programmatic dependent of the
// previous work on `stream` where the kernel's image and the device support it (kernel_features),
// as an ordinary launch elsewhere.
template <typename... KArgs, typename... Args>
cudaError_t launch_dependent_smem(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                  cudaStream_t stream, Args&&... args) {
  KernelFeatures f;
  const cudaError_t err = kernel_features(kernel, &f);
  if (err != cudaSuccess) return err;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (f.pdl) {
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
struct VecOf {
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4 || kBytes == 2,
                "a vector of 2, 4, 8 or 16 bytes");
  using type = std::conditional_t<
      kBytes == 16, uint4,
      std::conditional_t<kBytes == 8, uint2, std::conditional_t<kBytes == 4, uint32_t, uint16_t>>>;
};

// Integer ceiling division for grid sizes.
template <typename T>
__host__ __device__ __forceinline__ T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

}  // namespace fdspec
