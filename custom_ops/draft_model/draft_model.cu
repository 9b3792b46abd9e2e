// Draft-model bookkeeping: CUDA implementations (rules in draft_model.h). No Paddle include.
//
// Each kernel is launched as a programmatic dependent (common/cuda_utils.cuh): it waits for the work
// before it on the stream, then lets the next kernel start its launch, which hides most of the launch
// latency of a step made of several tiny kernels.
#include "draft_model/draft_model.h"

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kSlotWarpsPerBlock = 4;  // preprocess / accept: slots are tiny, small blocks spread out
constexpr int kArgmaxThreads = 256;     // update: one block per slice of a drafting row
constexpr int kArgmaxUnroll = 4;        // 16-byte vectors in flight per thread: 16 KB per block
// A row of logits is split into slices of about this many bytes, one block each, up to the portable
// cluster size: one slice is one round of the loads above, and B = 1 .. 64 rows then still cover
// most SMs (a whole 128 KB row in one block streams at one SM's bandwidth).
constexpr int64_t kSliceBytes = 16 << 10;
constexpr int kMaxParts = 8;

__global__ void __launch_bounds__(kSlotWarpsPerBlock * kWarp)
    draft_model_preprocess_kernel(DraftModelPreprocessParams p) {
  wait_for_primary_grid();
  allow_dependent_launch();
  const int lane = threadIdx.x % kWarp;
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kSlotWarpsPerBlock + threadIdx.x / kWarp;
  if (b >= p.batch) return;
  const DraftSlot kind = draft_slot_kind(p.base_model_stop_flags[b], p.base_model_seq_lens_encoder[b],
                                         p.base_model_seq_lens_decoder[b]);
  if (kind == DraftSlot::kPrefill) {
    int64_t* row = p.pre_ids + b * p.pre_ids_stride;
    for (int64_t i = lane; i < p.pre_ids_stride; i += kWarp) row[i] = -1;
  }
  // Lane 0 reads step_idx and pre_ids[b, s] of a decoding slot, whose row no lane clears.
  if (lane == 0) draft_preprocess_slot(p, b, kind);
}

template <LogitsDType D>
struct Logit;
template <>
struct Logit<LogitsDType::kFloat32> {
  using Storage = float;
  static __device__ __forceinline__ float to_float(float v) { return v; }
};
template <>
struct Logit<LogitsDType::kFloat16> {
  using Storage = uint16_t;
  static __device__ __forceinline__ float to_float(uint16_t b) { return __half2float(__ushort_as_half(b)); }
};
template <>
struct Logit<LogitsDType::kBFloat16> {
  using Storage = uint16_t;
  static __device__ __forceinline__ float to_float(uint16_t b) { return __uint_as_float(uint32_t{b} << 16); }
};

__device__ __forceinline__ uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

// `parts` consecutive blocks share a slot's row (a thread-block cluster on sm_90+, so that a small
// batch still spreads the logits over many SMs): each reduces the keys of its slice, the cluster's
// leader takes the maximum of the blocks' keys through distributed shared memory and writes.
template <LogitsDType D>
__global__ void __launch_bounds__(kArgmaxThreads) draft_model_update_kernel(DraftModelUpdateParams p, int parts) {
  using T = typename Logit<D>::Storage;
  constexpr int kVec = 16 / sizeof(T);
  using Vec = typename VecOf<16>::type;
  union Pack {
    Vec v;
    T e[kVec];
  };
  __shared__ uint64_t warp_best[kArgmaxThreads / kWarp];
  __shared__ uint64_t block_best;

  wait_for_primary_grid();
  allow_dependent_launch();
  const int part = static_cast<int>(blockIdx.x % parts);
  const int64_t b = blockIdx.x / parts;
  if (!draft_update_takes(p, b)) return;  // uniform in the cluster: no cluster barrier waits
  const int64_t V = p.vocab_size;
  const T* row = static_cast<const T*>(p.logits) + b * V;
  uint64_t best = 0;

  // Head: elements up to the first 16-byte boundary; body: whole vectors, split between the parts;
  // tail: the rest. Part 0 takes head and tail.
  const int64_t misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16) / sizeof(T);
  const int64_t head = min_of<int64_t>(misalign == 0 ? 0 : kVec - misalign, V);
  const int64_t nvec = (V - head) / kVec;
  const int64_t tail = head + nvec * kVec;
  if (part == 0) {
    for (int64_t i = threadIdx.x; i < head; i += kArgmaxThreads) {
      best = max_u64(best, draft_argmax_key(Logit<D>::to_float(row[i]), i));
    }
    for (int64_t i = tail + threadIdx.x; i < V; i += kArgmaxThreads) {
      best = max_u64(best, draft_argmax_key(Logit<D>::to_float(row[i]), i));
    }
  }
  const int64_t per = ceil_div<int64_t>(nvec, parts);
  const int64_t lo = min_of<int64_t>(nvec, per * part), hi = min_of<int64_t>(nvec, lo + per);
  const Vec* body = reinterpret_cast<const Vec*>(row + head);
  for (int64_t base = lo; base < hi; base += int64_t{kArgmaxThreads} * kArgmaxUnroll) {
    Pack pk[kArgmaxUnroll];
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int64_t j = base + u * kArgmaxThreads + threadIdx.x;
      if (j < hi) pk[u].v = __ldg(body + j);
    }
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int64_t j = base + u * kArgmaxThreads + threadIdx.x;
      if (j >= hi) continue;
      const int64_t id0 = head + j * kVec;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        best = max_u64(best, draft_argmax_key(Logit<D>::to_float(pk[u].e[e]), id0 + e));
      }
    }
  }

#pragma unroll
  for (int d = kWarp / 2; d > 0; d >>= 1) best = max_u64(best, __shfl_xor_sync(kFullMask, best, d));
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (lane == 0) warp_best[warp] = best;
  __syncthreads();
  if (warp == 0) {
    best = lane < kArgmaxThreads / kWarp ? warp_best[lane] : 0;
#pragma unroll
    for (int d = kWarp / 2; d > 0; d >>= 1) best = max_u64(best, __shfl_xor_sync(kFullMask, best, d));
    if (lane == 0) block_best = best;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (parts > 1) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every block's key is in its shared memory
    if (part == 0 && threadIdx.x == 0) {
      for (int q = 1; q < parts; ++q) best = max_u64(best, *cluster.map_shared_rank(&block_best, q));
    }
    cluster.sync();  // a block's shared memory must outlive the leader's reads of it
  }
#endif
  if (part == 0 && threadIdx.x == 0) draft_update_write(p, b, draft_argmax_id(best));
}

__global__ void __launch_bounds__(kSlotWarpsPerBlock * kWarp)
    draft_model_accept_kernel(DraftModelAcceptParams p) {
  wait_for_primary_grid();
  allow_dependent_launch();
  const int lane = threadIdx.x % kWarp;
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kSlotWarpsPerBlock + threadIdx.x / kWarp;
  if (b >= p.batch) return;
  const DraftAcceptSlot a = draft_accept_slot(p, b);
  int64_t* row = p.pre_ids + b * p.pre_ids_stride + a.s + 1;
  for (int64_t i = lane; i < a.n; i += kWarp) row[i] = p.accept_tokens[b * p.width + i];
  // Every lane has read the slot's scalars before lane 0 overwrites them.
  __syncwarp();
  if (lane == 0) {
    p.step_idx[b] = a.s + a.n;
    p.mtp_draft_num[b] = 0;
  }
}

unsigned slot_blocks(int64_t batch) {
  return static_cast<unsigned>(ceil_div<int64_t>(batch, kSlotWarpsPerBlock));
}

template <LogitsDType D>
cudaError_t launch_update(const DraftModelUpdateParams& p, int parts, bool pdl, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(p.batch * parts));
  cfg.blockDim = dim3(kArgmaxThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (parts > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = static_cast<unsigned>(parts);
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = n ? attr : nullptr;
  cfg.numAttrs = n;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, draft_model_update_kernel<D>, p, parts);
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace

cudaError_t draft_model_preprocess_gpu(const DraftModelPreprocessParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const cudaError_t err = launch_dependent(draft_model_preprocess_kernel, dim3(slot_blocks(p.batch)),
                                           dim3(kSlotWarpsPerBlock * kWarp), stream, p);
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t draft_model_update_gpu(const DraftModelUpdateParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  int dev = 0, major = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (err != cudaSuccess) return err;
  // Clusters (distributed shared memory) and programmatic launches need sm_90.
  const int64_t row_bytes = p.vocab_size * logits_dtype_size(p.logits_dtype);
  int parts = static_cast<int>(std::min<int64_t>(kMaxParts, ceil_div<int64_t>(row_bytes, kSliceBytes)));
  if (major < 9 || p.batch > INT32_MAX / kMaxParts) parts = 1;
  const bool pdl = major >= 9;
  switch (p.logits_dtype) {
    case LogitsDType::kFloat16: return launch_update<LogitsDType::kFloat16>(p, parts, pdl, stream);
    case LogitsDType::kBFloat16: return launch_update<LogitsDType::kBFloat16>(p, parts, pdl, stream);
    default: return launch_update<LogitsDType::kFloat32>(p, parts, pdl, stream);
  }
}

cudaError_t draft_model_accept_gpu(const DraftModelAcceptParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const cudaError_t err = launch_dependent(draft_model_accept_kernel, dim3(slot_blocks(p.batch)),
                                           dim3(kSlotWarpsPerBlock * kWarp), stream, p);
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
