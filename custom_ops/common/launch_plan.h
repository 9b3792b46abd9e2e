// What the launchers may use on the device they run on: pure host code (no CUDA include), so that
// the decisions are unit-tested without a GPU (tests/cuda/launch_plan_check.cu). cuda_utils.cuh
// feeds it the device's attributes and each kernel's cudaFuncGetAttributes, once per (kernel,
// device).
//
// Two facts decide a feature, and both must hold:
// - the kernel image that runs was compiled for it: the device code of programmatic dependent
// launch
//   (griddepcontrol), clusters and the sm_90 loads exists only where __CUDA_ARCH__ >= 900, i.e.
//   where the image's PTX target is compute_90+. A compute_80/89 PTX image JIT-compiled on an H100
//   reports binaryVersion 90 but ptxVersion 80/89 and has those calls compiled out: launching it as
//   a programmatic dependent or in clusters would let it read before its producer finished, or
//   merge partial results that were never exchanged.
// - the device supports it (compute capability 9.0+), as the host believes it (FDSPEC_DEVICE_CAP).
//
// FDSPEC_DEVICE_CAP=<major.minor> makes the host believe the device is at most that compute
// capability, with the opt-in shared memory per block of that architecture (arch_smem_optin);
// FDSPEC_DEVICE_SMEM=<bytes> caps the latter explicitly. An H100 then takes the decisions an A100
// (8.0) or an L20 / RTX 4090 (8.9) would (docs/testing_gpus.md). Capping only lowers: a cap above
// the device changes nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace fdspec {

// Dynamic shared memory a block may have without opting in
// (cudaFuncAttributeMaxDynamicSharedMemorySize).
constexpr int kDefaultSmemPerBlock = 48 * 1024;

// cudaDevAttrMaxSharedMemoryPerBlockOptin of each architecture (CUDA programming guide, "Technical
// Specifications per Compute Capability"); 0 for one this table does not know.
constexpr int arch_smem_optin(int cc) {
  return cc == 80 || cc == 87 ? 166912  // A100 / A800, Orin: 163 KB
         : cc == 86 || cc == 89 || cc == 120
             ? 101376  // A10, L20, L40, RTX 30xx / 40xx / 50xx: 99 KB
         : cc == 90 || cc == 100 || cc == 103 ? 232448  // H100 / H800 / H20, B200: 227 KB
         : cc == 75                           ? 65536
         : cc == 70 || cc == 72               ? 98304
                                              : 0;
}

// Dynamic shared memory a kernel may be launched with before any opt-in: the runtime's own figure
// for it (cudaFuncAttributes::maxDynamicSharedSizeBytes), and never more than what the block's 48
// KB leave beside the kernel's static shared memory (`static_bytes`): without an opt-in a launch
// whose static and dynamic parts together pass 48 KB is refused with a bare invalid argument,
// however small its dynamic part.
constexpr int default_dynamic_smem(int static_bytes, int runtime_max_dynamic) {
  const int room = kDefaultSmemPerBlock - static_bytes;
  const int cap = room < 0 ? 0 : room;
  return runtime_max_dynamic < cap ? runtime_max_dynamic : cap;
}

// Why `dynamic_bytes` of dynamic shared memory cannot be granted to a kernel with `static_bytes` of
// static shared memory on a device whose opt-in limit per block is `optin` (both parts count
// against it: cudaFuncAttributeMaxDynamicSharedMemorySize); nullptr when it can.
inline const char* dynamic_smem_refusal(size_t dynamic_bytes, size_t static_bytes, int optin) {
  if (dynamic_bytes + static_bytes > static_cast<size_t>(optin)) {
    return "dynamic + static shared memory above the device's opt-in limit per block";
  }
  return nullptr;
}

// What the host believes about the device: its attributes, lowered by the environment's caps.
struct DeviceLimits {
  int cc = 0;           // compute capability, major * 10 + minor
  int sms = 0;          // streaming multiprocessors
  int smem_optin = 0;   // opt-in dynamic + static shared memory per block, bytes
  bool capped = false;  // an environment cap lowered cc or smem_optin
};

// The caps of the environment: cc 0 / smem 0 = none. Returns false (and no cap) for a malformed
// value, which the caller reports rather than guess.
struct DeviceCap {
  int cc = 0;
  int smem = 0;
};
inline bool parse_device_cap(const char* cap, const char* smem, DeviceCap* out) {
  *out = DeviceCap{};
  if (cap != nullptr && *cap != '\0') {
    char* end = nullptr;
    const long major = std::strtol(cap, &end, 10);
    long minor = 0;
    if (end == cap || major < 1 || major > 99) return false;
    if (*end == '.') {
      const char* m = end + 1;
      minor = std::strtol(m, &end, 10);
      if (end == m || minor < 0 || minor > 9) return false;
    }
    if (*end != '\0') return false;
    out->cc = static_cast<int>(major * 10 + minor);
  }
  if (smem != nullptr && *smem != '\0') {
    char* end = nullptr;
    const long bytes = std::strtol(smem, &end, 10);
    if (end == smem || *end != '\0' || bytes < kDefaultSmemPerBlock || bytes > (1L << 30)) {
      *out = DeviceCap{};
      return false;
    }
    out->smem = static_cast<int>(bytes);
  }
  return true;
}

inline DeviceLimits cap_device(DeviceLimits d, const DeviceCap& cap) {
  if (cap.cc > 0 && cap.cc < d.cc) {
    d.cc = cap.cc;
    d.capped = true;
    const int arch = arch_smem_optin(cap.cc);
    if (arch > 0 && arch < d.smem_optin) d.smem_optin = arch;
  }
  if (cap.smem > 0 && cap.smem < d.smem_optin) {
    d.smem_optin = cap.smem;
    d.capped = true;
  }
  return d;
}

// The features one kernel may use on one device.
struct KernelFeatures {
  bool pdl = false;           // launch as a programmatic dependent (griddepcontrol compiled in)
  bool clusters = false;      // thread-block clusters and distributed shared memory
  bool hopper_loads = false;  // sm_90-only loads and prefetches (cp.async.bulk.prefetch, ...)
  int ptx = 0;                // cudaFuncAttributes::ptxVersion of the loaded image
  int binary = 0;             // cudaFuncAttributes::binaryVersion
};
constexpr int kHopperCC = 90;
inline KernelFeatures decide_kernel_features(int ptx_version, int binary_version,
                                             const DeviceLimits& dev) {
  KernelFeatures f;
  f.ptx = ptx_version;
  f.binary = binary_version;
  const bool hopper = ptx_version >= kHopperCC && dev.cc >= kHopperCC;
  f.pdl = f.clusters = f.hopper_loads = hopper;
  return f;
}

// ---- shared-memory plans of the kernels that ask for more than 48 KB
// ------------------------------

// The suffix searches (suffix_match's, suffix_cache's global one) hold kCandCap candidates in
// shared memory; where the large form does not fit a block, the small form holds half as many per
// round (more match lengths take the slow path, same drafts). Returns the capacity to launch with,
// 0 if neither fits (a device below the supported ones: the launcher reports it).
struct SuffixSearchForms {
  int large_cap;
  size_t large_smem;
  int small_cap;
  size_t small_smem;
};
inline int suffix_search_cand_cap(const SuffixSearchForms& forms, const DeviceLimits& dev) {
  if (forms.large_smem <= static_cast<size_t>(dev.smem_optin)) return forms.large_cap;
  if (forms.small_smem <= static_cast<size_t>(dev.smem_optin)) return forms.small_cap;
  return 0;
}

// Whether the n-gram search's shared-memory ring (`ring_smem` bytes per block) fits the device;
// where it does not, the streaming search (no shared memory) takes its rows, with the same results.
inline bool ngram_ring_fits(size_t ring_smem, const DeviceLimits& dev) {
  return ring_smem <= static_cast<size_t>(dev.smem_optin);
}

}  // namespace fdspec
