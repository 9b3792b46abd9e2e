// Draft-model bookkeeping: CUDA implementations (rules in draft_model.h). No Paddle include.
//
// A step's kernels are tiny: their time is launch latency plus a few dependent trips to memory
// (each costs a fraction of a microsecond; benchmarks/kernels/bench_mtp_kernels.cu times them). So
// each kernel is a programmatic dependent of the work before it (common/cuda_utils.cuh: its launch
// overlaps its predecessor), loads a slot's scalars together (draft_model.h's *_load helpers)
// rather than one after another, and keeps what it read in registers for its writes. Design:
// docs/design/draft_model.md.
#include "draft_model/draft_model.h"

#include <cooperative_groups.h>

#include <algorithm>

#include "common/cuda_utils.cuh"
#include "common/logit_cuda.cuh"

namespace fdspec {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kSlotWarpsPerBlock =
    4;  // preprocess / accept: slots are tiny, small blocks spread out
// Update: the shape of a launch depends on the batch (docs/design/draft_model.md; the sweep that
// chose it: benchmarks/kernels/bench_mtp_kernels.cu). Up to B = SMs / 4 a row is split over a
// cluster of 256-thread blocks, one round of 4 loads per thread; up to B = SMs one 512-thread block
// per row, two rounds of 8 loads per thread, no cluster; beyond, one 256 x 8 block per row.
// Splitting a row costs the cluster launch and two cluster barriers, which pays only while the rows
// alone leave most SMs idle.
constexpr int kMaxParts = 8;  // slices of a row at most (the portable cluster size)

// The slot of the calling warp (preprocess, accept), after the programmatic-launch handshake.
__device__ __forceinline__ int64_t warp_slot() {
  wait_for_primary_grid();
  allow_dependent_launch();
  return static_cast<int64_t>(blockIdx.x) * kSlotWarpsPerBlock + threadIdx.x / kWarp;
}

__global__ void __launch_bounds__(kSlotWarpsPerBlock* kWarp)
    draft_model_greedy_preprocess_kernel(DraftModelGreedyPreprocessParams p) {
  const int64_t b = warp_slot();
  if (b >= p.batch) return;
  const int lane = threadIdx.x % kWarp;
  const DraftPreprocessSlot q =
      draft_preprocess_load(p, b);  // every lane: the kind steers the warp
  if (q.kind == DraftSlot::kPrefill) {
    int64_t* row = p.pre_ids + b * p.pre_ids_stride;
    for (int64_t i = lane; i < p.pre_ids_stride; i += kWarp) row[i] = -1;
  }
  // Lane 0 reads pre_ids[b, s] of a decoding slot, whose row no lane clears.
  if (lane == 0) {
    draft_preprocess_store(
        p, b, q, draft_preprocess_reads_newest(q) ? p.pre_ids[b * p.pre_ids_stride + q.s] : -1);
  }
}

__device__ __forceinline__ uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

// The largest draft_argmax_key of the warp, in every lane: the largest high half (the logit's
// order), then the largest low half (~id: the lowest id) among the lanes holding it. Two warp
// reductions instead of five dependent 64-bit shuffles.
__device__ __forceinline__ uint64_t warp_max_key(uint64_t key) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t hi = static_cast<uint32_t>(key >> 32), lo = static_cast<uint32_t>(key);
  const uint32_t top = __reduce_max_sync(kFullMask, hi);
  return (static_cast<uint64_t>(top) << 32) | __reduce_max_sync(kFullMask, hi == top ? lo : 0u);
#else
#pragma unroll
  for (int d = kWarp / 2; d > 0; d >>= 1) key = max_u64(key, __shfl_xor_sync(kFullMask, key, d));
  return key;
#endif
}

// An update launch: threads per block and 16-byte vectors per thread and round of loads.
template <int kThreads_, int kUnroll_>
struct UpdateShape {
  static constexpr int kThreads = kThreads_, kUnroll = kUnroll_;
  static constexpr int kWarps = kThreads / kWarp;
};
using SmallBatchUpdate =
    UpdateShape<256, 4>;                     // rows split over clusters: 16 KB per block and round
using MidBatchUpdate = UpdateShape<512, 8>;  // one block per row: 64 KB per round
using LargeBatchUpdate =
    UpdateShape<256, 8>;  // one block per row, two blocks per SM: 32 KB per round

// `parts` consecutive blocks share a slot's row (a thread-block cluster on sm_90+). Each block
// issues the loads of the slot's scalars and of its first round of logits together (one round
// trip), then leaves if the slot does not draft (uniform in the cluster: no barrier waits for it;
// those loads go unused), reduces its slice, and each warp sends its key to the leader's shared
// memory (through distributed shared memory in a cluster); the leader's first warp reduces the keys
// and writes with the scalars it loaded. A thread scans its elements in increasing id and keeps the
// first strict maximum as a float: NaN and -inf never win and -0 ties +0, so with the thread's
// first id as the start (whatever its value) its (value, id) has the largest draft_argmax_key among
// its elements; 64-bit keys are built only to reduce across threads.
template <LogitsDType D, class S>
__global__ void __launch_bounds__(S::kThreads)
    draft_model_greedy_update_kernel(DraftModelGreedyUpdateParams p, int parts) {
  using T = typename Logit<D>::Storage;
  constexpr int kThreads = S::kThreads, kUnroll = S::kUnroll;
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kRound = kThreads * kUnroll;  // vectors per block and round
  union Pack {
    uint4 v;
    T e[kVec];
  };
  __shared__ uint64_t keys[kMaxParts * S::kWarps];  // the leader's: one key per warp of the cluster

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
  Pack pk[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t j = lo + u * kThreads + threadIdx.x;
    if (j < hi) pk[u].v = load16_nc_now(body + j);
  }
  if (!draft_update_takes(p, slot)) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Announces this block to the cluster early; the wait below, before the first write into the
  // leader's shared memory, then finds every block of the cluster started.
  if (parts > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif

  uint64_t best = 0;
  if (part == 0) {
    for (int64_t i = threadIdx.x; i < head; i += kThreads) {
      best = max_u64(best, draft_argmax_key(Logit<D>::to_float(row[i]), i));
    }
    for (int64_t i = tail + threadIdx.x; i < V; i += kThreads) {
      best = max_u64(best, draft_argmax_key(Logit<D>::to_float(row[i]), i));
    }
  }
  if (lo + threadIdx.x < hi) {
    float top = -__int_as_float(0x7F800000);  // -inf: nothing beats it but a larger value
    uint32_t top_id = static_cast<uint32_t>(head + (lo + threadIdx.x) * kVec);
    for (int64_t base = lo;;) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t j = base + u * kThreads + threadIdx.x;
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
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t j = base + u * kThreads + threadIdx.x;
        if (j < hi) pk[u].v = __ldg(body + j);
      }
    }
    best = max_u64(best, draft_argmax_key(top, top_id));
  }

  best = warp_max_key(best);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (parts > 1) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every block has started
    if (lane == 0) *cluster.map_shared_rank(&keys[part * S::kWarps + warp], 0) = best;
    cluster.sync();  // the keys are in the leader's shared memory, which no other block reads
    if (part != 0) return;
  } else
#endif
  {
    if (lane == 0) keys[warp] = best;
    __syncthreads();
  }
  if (warp != 0) return;
  best = 0;
  for (int q = lane; q < parts * S::kWarps; q += kWarp) best = max_u64(best, keys[q]);
  best = warp_max_key(best);
  if (lane == 0) draft_update_write(p, b, slot, draft_argmax_id(best));
}

__global__ void __launch_bounds__(kSlotWarpsPerBlock* kWarp)
    draft_model_accept_kernel(DraftModelAcceptParams p) {
  const int64_t b = warp_slot();
  if (b >= p.batch) return;
  const int lane = threadIdx.x % kWarp;
  // Each lane loads its accepted token with the slot's scalars (one round trip, whatever n is).
  const int64_t* accepted = p.accept_tokens + b * p.width;
  const int64_t token = lane < p.width ? accepted[lane] : -1;
  const DraftAcceptSlot a = draft_accept_slot(p, b);
  int64_t* row = p.pre_ids + b * p.pre_ids_stride + a.s + 1;
  for (int64_t i = lane; i < a.n; i += kWarp) row[i] = i < kWarp ? token : accepted[i];
  // Every lane has read the slot's scalars before lane 0 overwrites them.
  __syncwarp();
  if (lane == 0) {
    p.step_idx[b] = a.s + a.n;
    p.mtp_draft_num[b] = 0;
  }
}

// draft_model_accept then draft_model_greedy_preprocess on a slot, in one warp. The lanes load the
// slot's accepted tokens (columns < 32) with both ops' scalars; after the accept the slot's step is
// s + n, so a decoding slot's newest token is the last accepted one (n >= 1, already in a lane) or
// pre_ids[b, s] (n = 0: the only dependent load, of an entry no lane writes).
__global__ void __launch_bounds__(kSlotWarpsPerBlock* kWarp)
    draft_model_accept_preprocess_kernel(DraftModelAcceptPreprocessParams p) {
  const int64_t b = warp_slot();
  if (b >= p.batch) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t D = p.pre_ids_stride;
  const int64_t* accepted = p.accept_tokens + b * p.width;
  const int64_t token = lane < p.width ? accepted[lane] : -1;
  const DraftModelGreedyPreprocessParams pre = p.preprocess();
  DraftPreprocessSlot q = draft_preprocess_load(pre, b);  // the kind, the target's max_dec_len
  const DraftAcceptSlot a = draft_accept_slot(p.accept(), b);
  int64_t* row = p.pre_ids + b * D;
  if (q.kind == DraftSlot::kPrefill) {
    for (int64_t i = lane; i < D; i += kWarp) row[i] = -1;  // the accept's writes would be cleared
  } else {
    q.s = a.s + a.n;  // the preprocess's verified step after the accept (no drafts left)
    for (int64_t i = lane; i < a.n; i += kWarp) row[a.s + 1 + i] = i < kWarp ? token : accepted[i];
  }
  const int64_t last = __shfl_sync(
      kFullMask, token, static_cast<int>(min_of<int64_t>(max_of<int64_t>(a.n - 1, 0), kWarp - 1)));
  // Every lane has read the slot's scalars before lane 0 overwrites them.
  __syncwarp();
  if (lane == 0) {
    int64_t newest = -1;
    if (draft_preprocess_reads_newest(q))
      newest = a.n >= 1 ? (a.n <= kWarp ? last : accepted[a.n - 1]) : row[q.s];
    draft_preprocess_store(pre, b, q, newest);
  }
}

// A warp-per-slot kernel (preprocess, accept, both fused) over p.batch slots, as a programmatic
// dependent of the work before it.
template <class Params>
cudaError_t launch_per_slot(void (*kernel)(Params), const Params& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(ceil_div<int64_t>(p.batch, kSlotWarpsPerBlock)));
  const cudaError_t err =
      launch_dependent(kernel, grid, dim3(kSlotWarpsPerBlock * kWarp), stream, p);
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

template <LogitsDType D, class S>
cudaError_t launch_update(const DraftModelGreedyUpdateParams& p, int parts, cudaStream_t stream) {
  KernelFeatures f;
  const cudaError_t ferr = kernel_features(draft_model_greedy_update_kernel<D, S>, &f);
  if (ferr != cudaSuccess) return ferr;
  const bool pdl = f.pdl;
  if (!f.clusters) parts = 1;  // planned from the same image's features: a guard only
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(p.batch * parts));
  cfg.blockDim = dim3(S::kThreads);
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
  const cudaError_t err =
      cudaLaunchKernelEx(&cfg, draft_model_greedy_update_kernel<D, S>, p, parts);
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

template <class S>
cudaError_t launch_update_as(const DraftModelGreedyUpdateParams& p, int parts,
                             cudaStream_t stream) {
  switch (p.logits_dtype) {
    case LogitsDType::kFloat16:
      return launch_update<LogitsDType::kFloat16, S>(p, parts, stream);
    case LogitsDType::kBFloat16:
      return launch_update<LogitsDType::kBFloat16, S>(p, parts, stream);
    default:
      return launch_update<LogitsDType::kFloat32, S>(p, parts, stream);
  }
}

}  // namespace

cudaError_t draft_model_greedy_preprocess_gpu(const DraftModelGreedyPreprocessParams& p,
                                              cudaStream_t stream) {
  return launch_per_slot(draft_model_greedy_preprocess_kernel, p, stream);
}

cudaError_t draft_model_greedy_update_gpu(const DraftModelGreedyUpdateParams& p,
                                          cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  DeviceFacts dev;
  cudaError_t err = current_device_facts(&dev);
  if (err != cudaSuccess) return err;
  const int sms = dev.sms;
  // Clusters (distributed shared memory) need sm_90 code and an sm_90 device (kernel_features;
  // every instantiation of the kernel comes from one image).
  KernelFeatures f;
  err = kernel_features(draft_model_greedy_update_kernel<LogitsDType::kFloat32, SmallBatchUpdate>,
                        &f);
  if (err != cudaSuccess) return err;
  // A batch of at most a quarter as many rows as SMs splits each row into slices, as many as fill
  // the SMs, at most kMaxParts and no more than the row has rounds of loads; larger batches give a
  // row one block.
  if (f.clusters && p.batch * 4 <= sms) {
    const int64_t row_vecs = p.vocab_size * logits_dtype_size(p.logits_dtype) / 16;
    const int64_t parts = std::max<int64_t>(
        1, std::min<int64_t>({ceil_div<int64_t>(sms, p.batch), kMaxParts,
                              ceil_div<int64_t>(row_vecs, SmallBatchUpdate::kThreads *
                                                              SmallBatchUpdate::kUnroll)}));
    return launch_update_as<SmallBatchUpdate>(p, static_cast<int>(parts), stream);
  }
  if (p.batch <= sms) return launch_update_as<MidBatchUpdate>(p, 1, stream);
  return launch_update_as<LargeBatchUpdate>(p, 1, stream);
}

cudaError_t draft_model_accept_preprocess_gpu(const DraftModelAcceptPreprocessParams& p,
                                              cudaStream_t stream) {
  return launch_per_slot(draft_model_accept_preprocess_kernel, p, stream);
}

cudaError_t draft_model_accept_gpu(const DraftModelAcceptParams& p, cudaStream_t stream) {
  return launch_per_slot(draft_model_accept_kernel, p, stream);
}

}  // namespace fdspec
