// Draft-model bookkeeping: CUDA implementations (rules in draft_model.h). No Paddle include.
//
// A step's kernels are tiny: their time is launch latency plus a few dependent trips to memory
// (each costs a fraction of a microsecond; tests/cuda/bench_mtp_kernels.cu times them). So each
// kernel is a programmatic dependent of the work before it (common/cuda_utils.cuh: its launch
// overlaps its predecessor), loads a slot's scalars together (draft_model.h's *_load helpers) rather
// than one after another, and keeps what it read in registers for its writes.
#include "draft_model/draft_model.h"

#include <cooperative_groups.h>

#include <algorithm>

#include "common/cuda_utils.cuh"
#include "common/logit_cuda.cuh"

namespace fdspec {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kSlotWarpsPerBlock = 4;  // preprocess / accept: slots are tiny, small blocks spread out
constexpr int kArgmaxThreads = 256;     // update: one block per slice of a drafting row
constexpr int kArgmaxUnroll = 4;        // 16-byte vectors in flight per thread: 16 KB per block
// A row is split into at most this many slices (the portable cluster size), and into no more than
// it takes to give the batch about kBlocksPerSm blocks per SM: at B = 1 .. 8 the rows still cover
// many SMs (one 128 KB row in one block streams at one SM's bandwidth), at B = 64 .. 256 each block
// loops over several rounds of loads instead of paying a block's fixed cost per 16 KB. On an H100
// (V = 32000 float32, tests/cuda/bench_mtp_kernels.cu) one block per SM beat 2 and 4 by 0.2 and
// 0.3 us per update at B = 64, by 0.9 and 2.9 us at B = 256, and tied at B = 1 and 8; 8 vectors per
// thread instead of 4 lost 1.9 us at B = 256.
constexpr int kMaxParts = 8;
constexpr int kBlocksPerSm = 1;

// The slot of the calling warp (preprocess, accept), after the programmatic-launch handshake.
__device__ __forceinline__ int64_t warp_slot() {
  wait_for_primary_grid();
  allow_dependent_launch();
  return static_cast<int64_t>(blockIdx.x) * kSlotWarpsPerBlock + threadIdx.x / kWarp;
}

__global__ void __launch_bounds__(kSlotWarpsPerBlock * kWarp)
    draft_model_preprocess_kernel(DraftModelPreprocessParams p) {
  const int64_t b = warp_slot();
  if (b >= p.batch) return;
  const int lane = threadIdx.x % kWarp;
  const DraftPreprocessSlot q = draft_preprocess_load(p, b);  // every lane: the kind steers the warp
  if (q.kind == DraftSlot::kPrefill) {
    int64_t* row = p.pre_ids + b * p.pre_ids_stride;
    for (int64_t i = lane; i < p.pre_ids_stride; i += kWarp) row[i] = -1;
  }
  // Lane 0 reads pre_ids[b, s] of a decoding slot, whose row no lane clears.
  if (lane == 0) {
    draft_preprocess_store(p, b, q, draft_preprocess_reads_newest(q) ? p.pre_ids[b * p.pre_ids_stride + q.s] : -1);
  }
}

__device__ __forceinline__ uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

// `parts` consecutive blocks share a slot's row (a thread-block cluster on sm_90+). Each block loads
// the slot's scalars, leaves if the slot does not draft (uniform in the cluster: no barrier waits for
// it; its logits row is not read), reduces its slice, and sends its key to the leader's shared
// memory; the leader writes with the scalars it loaded. A thread scans its elements in increasing id
// and keeps the first strict maximum as a float: NaN and -inf never win and -0 ties +0, so with the
// thread's first id as the start (whatever its value) its (value, id) has the largest
// draft_argmax_key among its elements; 64-bit keys are built only to reduce across threads.
// (Measured: issuing the first logits loads before the slot's scalars are known gains nothing.)
template <LogitsDType D>
__global__ void __launch_bounds__(kArgmaxThreads) draft_model_update_kernel(DraftModelUpdateParams p, int parts) {
  using T = typename Logit<D>::Storage;
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kRound = kArgmaxThreads * kArgmaxUnroll;  // vectors per block and round
  union Pack {
    uint4 v;
    T e[kVec];
  };
  __shared__ uint64_t warp_best[kArgmaxThreads / kWarp];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ uint64_t part_best[kMaxParts];  // the leader's: each block's key
#endif

  wait_for_primary_grid();
  allow_dependent_launch();
  const int part = static_cast<int>(blockIdx.x % parts);
  const int64_t b = blockIdx.x / parts;
  const int64_t V = p.vocab_size;
  const T* row = static_cast<const T*>(p.logits) + b * V;
  // Head: elements up to the first 16-byte boundary; body: whole vectors, split between the parts;
  // tail: the rest. Part 0 takes head and tail (64-bit keys: at most 2 * kVec elements).
  const int64_t misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16) / sizeof(T);
  const int64_t head = min_of<int64_t>(misalign == 0 ? 0 : kVec - misalign, V);
  const int64_t nvec = (V - head) / kVec;
  const int64_t tail = head + nvec * kVec;
  const int64_t per = ceil_div<int64_t>(nvec, parts);
  const int64_t lo = min_of<int64_t>(nvec, per * part), hi = min_of<int64_t>(nvec, lo + per);
  const uint4* body = reinterpret_cast<const uint4*>(row + head);

  const DraftUpdateSlot slot = draft_update_load(p, b);
  if (!draft_update_takes(p, slot)) return;
  Pack pk[kArgmaxUnroll];
#pragma unroll
  for (int u = 0; u < kArgmaxUnroll; ++u) {
    const int64_t j = lo + u * kArgmaxThreads + threadIdx.x;
    if (j < hi) pk[u].v = __ldg(body + j);
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Announces this block to the cluster early; the wait below, before the first write into the
  // leader's shared memory, then finds every block of the cluster started.
  if (parts > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif

  uint64_t best = 0;
  if (part == 0) {
    for (int64_t i = threadIdx.x; i < head; i += kArgmaxThreads) {
      best = max_u64(best, draft_argmax_key(Logit<D>::to_float(row[i]), i));
    }
    for (int64_t i = tail + threadIdx.x; i < V; i += kArgmaxThreads) {
      best = max_u64(best, draft_argmax_key(Logit<D>::to_float(row[i]), i));
    }
  }
  if (lo + threadIdx.x < hi) {
    float top = -__int_as_float(0x7F800000);  // -inf: nothing beats it but a larger value
    uint32_t top_id = static_cast<uint32_t>(head + (lo + threadIdx.x) * kVec);
    for (int64_t base = lo;;) {
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; ++u) {
        const int64_t j = base + u * kArgmaxThreads + threadIdx.x;
        if (j >= hi) continue;
        const uint32_t id0 = static_cast<uint32_t>(head + j * kVec);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float x = Logit<D>::to_float(pk[u].e[e]);
          if (x > top) {
            top = x;
            top_id = id0 + e;
          }
        }
      }
      base += kRound;
      if (base >= hi) break;
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; ++u) {
        const int64_t j = base + u * kArgmaxThreads + threadIdx.x;
        if (j < hi) pk[u].v = __ldg(body + j);
      }
    }
    best = max_u64(best, draft_argmax_key(top, top_id));
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
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (parts > 1) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every block has started
    if (threadIdx.x == 0) *cluster.map_shared_rank(&part_best[part], 0) = best;
    cluster.sync();  // the keys are in the leader's shared memory, which no block reads after this
    if (part != 0) return;
    if (threadIdx.x == 0) {
      for (int q = 1; q < parts; ++q) best = max_u64(best, part_best[q]);
    }
  }
#endif
  if (part == 0 && threadIdx.x == 0) draft_update_write(p, b, slot, draft_argmax_id(best));
}

__global__ void __launch_bounds__(kSlotWarpsPerBlock * kWarp)
    draft_model_accept_kernel(DraftModelAcceptParams p) {
  const int64_t b = warp_slot();
  if (b >= p.batch) return;
  const int lane = threadIdx.x % kWarp;
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
  int dev = 0, major = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  // Clusters (distributed shared memory) and programmatic launches need sm_90. No more parts than
  // rounds of loads in a row (each part reads at least one round), nor than the SMs want.
  const int64_t row_vecs = p.vocab_size * logits_dtype_size(p.logits_dtype) / 16;
  int64_t parts = ceil_div<int64_t>(int64_t{kBlocksPerSm} * sms, p.batch);
  parts = std::min<int64_t>({parts, kMaxParts, ceil_div<int64_t>(row_vecs, kArgmaxThreads * kArgmaxUnroll)});
  if (major < 9 || parts < 1 || p.batch > INT32_MAX / kMaxParts) parts = 1;
  const bool pdl = major >= 9;
  switch (p.logits_dtype) {
    case LogitsDType::kFloat16: return launch_update<LogitsDType::kFloat16>(p, static_cast<int>(parts), pdl, stream);
    case LogitsDType::kBFloat16: return launch_update<LogitsDType::kBFloat16>(p, static_cast<int>(parts), pdl, stream);
    default: return launch_update<LogitsDType::kFloat32>(p, static_cast<int>(parts), pdl, stream);
  }
}

cudaError_t draft_model_accept_gpu(const DraftModelAcceptParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const cudaError_t err = launch_dependent(draft_model_accept_kernel, dim3(slot_blocks(p.batch)),
                                           dim3(kSlotWarpsPerBlock * kWarp), stream, p);
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
