// Draft-model bookkeeping: CUDA implementations (rules in draft_model.h). No Paddle include.
//
// Each kernel is launched as a programmatic dependent (common/cuda_utils.cuh): it waits for the work
// before it on the stream, then lets the next kernel start its launch, which hides most of the launch
// latency of a step made of several tiny kernels.
#include "draft_model/draft_model.h"

#include <cuda_fp16.h>

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kSlotWarpsPerBlock = 4;  // preprocess / accept: slots are tiny, small blocks spread out
constexpr int kArgmaxThreads = 512;     // update: one block per drafting row
constexpr int kArgmaxUnroll = 4;        // 16-byte vectors in flight per thread: 32 KB per block

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

template <LogitsDType D>
__global__ void __launch_bounds__(kArgmaxThreads) draft_model_update_kernel(DraftModelUpdateParams p) {
  using T = typename Logit<D>::Storage;
  constexpr int kVec = 16 / sizeof(T);
  using Vec = typename VecOf<16>::type;
  union Pack {
    Vec v;
    T e[kVec];
  };
  __shared__ uint64_t warp_best[kArgmaxThreads / kWarp];

  wait_for_primary_grid();
  allow_dependent_launch();
  const int64_t b = blockIdx.x;
  if (!draft_update_takes(p, b)) return;  // uniform in the block
  const int64_t V = p.vocab_size;
  const T* row = static_cast<const T*>(p.logits) + b * V;
  uint64_t best = 0;

  // Head: elements up to the first 16-byte boundary; body: whole vectors; tail: the rest.
  const int64_t misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16) / sizeof(T);
  const int64_t head = min_of<int64_t>(misalign == 0 ? 0 : kVec - misalign, V);
  const int64_t nvec = (V - head) / kVec;
  const int64_t tail = head + nvec * kVec;
  for (int64_t i = threadIdx.x; i < head; i += kArgmaxThreads) {
    best = max_u64(best, draft_argmax_key(Logit<D>::to_float(row[i]), i));
  }
  for (int64_t i = tail + threadIdx.x; i < V; i += kArgmaxThreads) {
    best = max_u64(best, draft_argmax_key(Logit<D>::to_float(row[i]), i));
  }
  const Vec* body = reinterpret_cast<const Vec*>(row + head);
  for (int64_t base = 0; base < nvec; base += int64_t{kArgmaxThreads} * kArgmaxUnroll) {
    Pack pk[kArgmaxUnroll];
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int64_t j = base + u * kArgmaxThreads + threadIdx.x;
      if (j < nvec) pk[u].v = __ldg(body + j);
    }
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int64_t j = base + u * kArgmaxThreads + threadIdx.x;
      if (j >= nvec) continue;
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
  if (warp != 0) return;
  best = lane < kArgmaxThreads / kWarp ? warp_best[lane] : 0;
#pragma unroll
  for (int d = kWarp / 2; d > 0; d >>= 1) best = max_u64(best, __shfl_xor_sync(kFullMask, best, d));
  if (lane == 0) draft_update_write(p, b, draft_argmax_id(best));
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

}  // namespace

cudaError_t draft_model_preprocess_gpu(const DraftModelPreprocessParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const cudaError_t err = launch_dependent(draft_model_preprocess_kernel, dim3(slot_blocks(p.batch)),
                                           dim3(kSlotWarpsPerBlock * kWarp), stream, p);
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t draft_model_update_gpu(const DraftModelUpdateParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(p.batch)), block(kArgmaxThreads);
  cudaError_t err;
  switch (p.logits_dtype) {
    case LogitsDType::kFloat16:
      err = launch_dependent(draft_model_update_kernel<LogitsDType::kFloat16>, grid, block, stream, p);
      break;
    case LogitsDType::kBFloat16:
      err = launch_dependent(draft_model_update_kernel<LogitsDType::kBFloat16>, grid, block, stream, p);
      break;
    default:
      err = launch_dependent(draft_model_update_kernel<LogitsDType::kFloat32>, grid, block, stream, p);
  }
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t draft_model_accept_gpu(const DraftModelAcceptParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const cudaError_t err = launch_dependent(draft_model_accept_kernel, dim3(slot_blocks(p.batch)),
                                           dim3(kSlotWarpsPerBlock * kWarp), stream, p);
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
