// speculate_logprobs_topk: CUDA implementation (docs/contract/logprobs.md). No Paddle include.
//
// Each row is shared by `parts` blocks (a thread-block cluster on sm_90+); the grid covers all N
// rows because cu[B] is only known on the device. A block streams its slice of the row once in
// 16-byte vectors (narrower when the vocabulary or the pointer forbids it). Each thread keeps an
// online (max, sum-exp) pair and its count of logits >= the accepted token's (read once before the
// pass). Each warp keeps its top-k one entry per lane, sorted: a vector whose maximum cannot beat
// the warp's k-th entry costs one vote; candidates are inserted one at a time with a ballot (their
// position) and a shuffle (the shift). After the pass, warp 0 merges the warps' lists two at a time
// with a bitonic merge over its 32 lanes, and the cluster's leader merges the blocks' partials the
// same way, reading them from the other blocks' shared memory. The merge order differs from the
// CPU's sequential sum, so scores agree to rounding, while ids and ranks (comparisons and counts
// only) are identical. Design: docs/design/logprobs.md.
#include "speculate_logprobs_topk/speculate_logprobs_topk.h"

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>

#include "common/cuda_utils.cuh"
#include "common/logit_cuda.cuh"

namespace fdspec {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // vectors loaded before any is processed: 16 KB in flight per block
// Rows of at least this many logits are split in two: two blocks per row beat one (about 3 blocks
// per SM instead of 1 or 2 rows, evenly spread), while 3, 4 or 8 lose, since each block's warps
// repeat the warm-up of their top-k lists (docs/design/logprobs.md).
constexpr int64_t kSplitRowLogits = 8192;
constexpr int kMaxParts = 8;  // the portable cluster size
constexpr unsigned kFullMask = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Online log-sum-exp state, in base 2 internally (exp2f is one MUFU instruction).
struct SumExp {
  float m = kNegInf;
  float s = 0.0f;

  // s is NaN once a NaN logit was seen (as on the CPU, the row's scores become NaN): fmaxf skips
  // NaN in m, so the sums must carry it, also while m is still -inf.
  __device__ __forceinline__ void merge(float om, float os) {
    const float M = fmaxf(m, om);
    if (M == kNegInf) {  // both hold only -inf (sums 0) or NaN
      s += os;
      return;
    }
    s = s * exp2f((m - M) * kLog2e) + os * exp2f((om - M) * kLog2e);
    m = M;
  }
};

// A warp's top-k: lane j < k holds entry j, sorted by logprobs_better; other lanes hold the
// sentinel.
struct WarpTopK {
  float v = kNegInf;
  int32_t id = kNoEntryId;
  float kth_v = kNegInf;  // entry k - 1, the bar a candidate must pass (warp-uniform)
  int32_t kth_id = kNoEntryId;

  __device__ __forceinline__ void insert(float cv, int32_t cid, int k, int lane) {
    // The entries that stay ahead of the candidate are a prefix, so its position is their count.
    const bool ahead = lane < k && logprobs_better(v, id, cv, cid);
    const int pos = __popc(__ballot_sync(kFullMask, ahead));
    const float up_v = __shfl_up_sync(kFullMask, v, 1);
    const int32_t up_id = __shfl_up_sync(kFullMask, id, 1);
    if (lane < k && lane >= pos) {
      v = lane == pos ? cv : up_v;
      id = lane == pos ? cid : up_id;
    }
    kth_v = __shfl_sync(kFullMask, v, k - 1);
    kth_id = __shfl_sync(kFullMask, id, k - 1);
  }
};

// Sorts a bitonic sequence held one entry per lane into descending logprobs_better order.
__device__ __forceinline__ void bitonic_sort_desc(float& v, int32_t& id, int lane) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const float ov = __shfl_xor_sync(kFullMask, v, d);
    const int32_t oid = __shfl_xor_sync(kFullMask, id, d);
    const bool lower = (lane & d) == 0;  // the lower lane of the pair keeps the better entry
    if (lower == logprobs_better(ov, oid, v, id)) {
      v = ov;
      id = oid;
    }
  }
}

// The block's slice [lo, hi) of a row's vectors when `parts` blocks share the row.
__device__ __forceinline__ void slice_of(int64_t nvec, int part, int parts, int64_t& lo,
                                         int64_t& hi) {
  const int64_t per = ceil_div<int64_t>(nvec, parts);
  lo = min(nvec, per * part);
  hi = min(nvec, lo + per);
}

// A block's (or a cluster's) partial result over a slice of one row, in shared memory so that the
// cluster's leader can read it through distributed shared memory.
struct RowPartial {
  float top_v[32];
  int32_t top_id[32];
  float m;
  float s;
  int64_t rank;
};

// Warp 0 merges `other` (sorted, one entry per lane) into its own sorted list.
__device__ __forceinline__ void merge_sorted(float& v, int32_t& id, const float* other_v,
                                             const int32_t* other_id, int lane) {
  // Pairing entry j of one list with entry 31 - j of the other keeps the 32 best of the union, as a
  // bitonic sequence.
  const float ov = other_v[31 - lane];
  const int32_t oid = other_id[31 - lane];
  if (logprobs_better(ov, oid, v, id)) {
    v = ov;
    id = oid;
  }
  bitonic_sort_desc(v, id, lane);
}

template <LogitsDType D, int kVecBytes>
__global__ void __launch_bounds__(kThreads) logprobs_topk_kernel(LogprobsTopkParams p, int parts) {
  using Storage = typename Logit<D>::Storage;
  using Vec = typename VecOf<kVecBytes>::type;
  constexpr int kElems = kVecBytes / static_cast<int>(sizeof(Storage));
  union Pack {
    Vec vec;
    Storage e[kElems];
  };

  // `parts` consecutive blocks share a row; with more than one they form a cluster (sm_90+).
  const int part = static_cast<int>(blockIdx.x % parts);
  const int64_t r = blockIdx.x / parts;
  const int k = p.top_k;
  const int64_t cols = k + 1;
  int64_t* ids_out = p.logprob_token_ids + r * cols;
  float* scores_out = p.logprob_scores + r * cols;
  if (r >=
      logprobs_valid_rows(p)) {  // the whole cluster takes this branch: no cluster barrier waits
    if (part == 0 && threadIdx.x < cols) {
      ids_out[threadIdx.x] = kPadTokenId;
      scores_out[threadIdx.x] = kPadScore;
    }
    if (part == 0 && threadIdx.x == 0) p.logprob_ranks[r] = kPadRank;
    return;
  }

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t V = p.vocab;
  const Storage* row = static_cast<const Storage*>(p.logits) + r * V;
  const float scale = logprobs_row_scale(p, r);
  const int64_t token = p.token_ids[r];
  const bool token_ok = token >= 0 && token < V;
  const float token_x = token_ok ? Logit<D>::to_float(row[token]) * scale : 0.0f;

  SumExp se;
  int32_t rank = 0;  // a thread sees fewer than 2^24 entries (V <= 2^24)
  WarpTopK top;
  int64_t lo, hi;
  slice_of(V / kElems, part, parts, lo, hi);
  const Vec* vrow = reinterpret_cast<const Vec*>(row);
  for (int64_t base = lo; base < hi; base += int64_t{kThreads} * kUnroll) {
    Pack pk[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t vi = base + u * kThreads + threadIdx.x;
      if (vi < hi) pk[u].vec = vrow[vi];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t vi = base + u * kThreads + threadIdx.x;
      const bool valid = vi < hi;
      float x[kElems];
      float vmax = kNegInf;
#pragma unroll
      for (int j = 0; j < kElems; ++j) {
        x[j] = valid ? Logit<D>::to_float(pk[u].e[j]) * scale : kNegInf;
        vmax = fmaxf(vmax, x[j]);
        rank += valid && token_ok && x[j] >= token_x;
      }
      if (vmax > se.m) {
        se.s *= exp2f((se.m - vmax) * kLog2e);
        se.m = vmax;
      }
      {
        // exp2((x - m) log2 e), not exp2(x log2 e - m log2 e): the rounding of m log2 e would scale
        // every term by the same factor, up to 2^(ulp(m log2 e) / 2), 3e-4 relative for logits in
        // the thousands, where x - m is exact near the top of the row. With m = -inf every x here
        // is -inf (term 0) or NaN (term NaN, kept).
        const float m = se.m == kNegInf ? 0.0f : se.m;
#pragma unroll
        for (int j = 0; j < kElems; ++j) se.s += exp2f((x[j] - m) * kLog2e);
      }
      if (k == 0) continue;
      // Ties with the k-th value may still win on a lower id: the quick test lets them through.
      if (!__any_sync(kFullMask, valid && vmax >= top.kth_v)) continue;
      const int32_t first_id = static_cast<int32_t>(vi * kElems);
#pragma unroll
      for (int j = 0; j < kElems; ++j) {
        bool cand = valid && logprobs_better(x[j], first_id + j, top.kth_v, top.kth_id);
        for (unsigned mask = __ballot_sync(kFullMask, cand); mask != 0;
             mask = __ballot_sync(kFullMask, cand)) {
          const int src = __ffs(mask) - 1;
          top.insert(__shfl_sync(kFullMask, x[j], src), __shfl_sync(kFullMask, first_id + j, src),
                     k, lane);
          cand = cand && lane != src && logprobs_better(x[j], first_id + j, top.kth_v, top.kth_id);
        }
      }
    }
  }

  // Warp reductions, then warp 0 combines the block's warps into the block's partial.
  int64_t rank64 = rank;
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    se.merge(__shfl_xor_sync(kFullMask, se.m, d), __shfl_xor_sync(kFullMask, se.s, d));
    rank64 += __shfl_xor_sync(kFullMask, rank64, d);
  }
  __shared__ float s_m[kWarps], s_s[kWarps];
  __shared__ int64_t s_rank[kWarps];
  __shared__ float s_top_v[kWarps][32];
  __shared__ int32_t s_top_id[kWarps][32];
  if (lane == 0) {
    s_m[warp] = se.m;
    s_s[warp] = se.s;
    s_rank[warp] = rank64;
  }
  s_top_v[warp][lane] = top.v;
  s_top_id[warp][lane] = top.id;
  __syncthreads();

  SumExp total;
  int64_t total_rank = 0;
  float best_v = kNegInf;
  int32_t best_id = kNoEntryId;
  if (warp == 0) {
    if (lane < kWarps) {
      total = SumExp{s_m[lane], s_s[lane]};
      total_rank = s_rank[lane];
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      total.merge(__shfl_xor_sync(kFullMask, total.m, d), __shfl_xor_sync(kFullMask, total.s, d));
      total_rank += __shfl_xor_sync(kFullMask, total_rank, d);
    }
    best_v = s_top_v[0][lane];
    best_id = s_top_id[0][lane];
    for (int w = 1; w < kWarps && k > 0; ++w)
      merge_sorted(best_v, best_id, s_top_v[w], s_top_id[w], lane);
  }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (parts > 1) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    __shared__ RowPartial s_part;
    if (warp == 0) {
      s_part.top_v[lane] = best_v;
      s_part.top_id[lane] = best_id;
      if (lane == 0) {
        s_part.m = total.m;
        s_part.s = total.s;
        s_part.rank = total_rank;
      }
    }
    cluster.sync();  // every partial is in its block's shared memory
    if (part == 0 && warp == 0) {
      for (int q = 1; q < parts; ++q) {
        const RowPartial* other = cluster.map_shared_rank(&s_part, q);
        total.merge(other->m, other->s);
        total_rank += other->rank;
        if (k > 0) merge_sorted(best_v, best_id, other->top_v, other->top_id, lane);
      }
    }
    // A block's shared memory must outlive the leader's reads of it.
    cluster.sync();
  }
#endif
  if (part != 0 || warp != 0) return;

  // x - lse as (x - m) - log(s): x - m is exact near the top of the row, so large logits (|x| in
  // the thousands) keep the precision of the small difference instead of the ulp of lse.
  const bool empty = total.m == kNegInf;  // every logit -inf: scores are the logits, clipped
  const float log_s = empty ? 0.0f : logf(total.s);
  const auto score = [&](float x) {
    return logprobs_clip(p.raw_logits || empty ? x : (x - total.m) - log_s);
  };
  if (lane == 0) {
    ids_out[0] = token;
    scores_out[0] = token_ok ? score(token_x) : kPadScore;
    p.logprob_ranks[r] = token_ok ? total_rank : kPadRank;
  }
  if (lane < k) {
    const bool entry = best_id != kNoEntryId;
    ids_out[1 + lane] = entry ? best_id : kPadTokenId;
    scores_out[1 + lane] = entry ? score(best_v) : kPadScore;
  }
}

template <LogitsDType D>
int logprobs_vec_bytes(const LogprobsTopkParams& p) {
  const int elem = D == LogitsDType::kFloat32 ? 4 : 2;
  const uint64_t mix =
      static_cast<uint64_t>(p.vocab * elem) | reinterpret_cast<uintptr_t>(p.logits);
  for (int w = 16; w > elem; w /= 2) {
    if (mix % w == 0) return w;
  }
  return elem;
}

template <LogitsDType D, int kVecBytes>
cudaError_t launch_logprobs(const LogprobsTopkParams& p, int parts, cudaStream_t stream) {
  // Clusters (and distributed shared memory) need sm_90 code and an sm_90 device.
  KernelFeatures f;
  const cudaError_t ferr = kernel_features(logprobs_topk_kernel<D, kVecBytes>, &f);
  if (ferr != cudaSuccess) return ferr;
  if (!f.clusters) parts = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(p.rows * parts));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (parts > 1) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(parts);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  const cudaError_t err = cudaLaunchKernelEx(&cfg, logprobs_topk_kernel<D, kVecBytes>, p, parts);
  return err != cudaSuccess ? err : FDSPEC_LAUNCH_STATUS(stream);
}

template <LogitsDType D>
cudaError_t dispatch_vec(const LogprobsTopkParams& p, int parts, cudaStream_t stream) {
  switch (logprobs_vec_bytes<D>(p)) {
    case 16:
      return launch_logprobs<D, 16>(p, parts, stream);
    case 8:
      return launch_logprobs<D, 8>(p, parts, stream);
    case 4:
      return launch_logprobs<D, 4>(p, parts, stream);
    default:
      if constexpr (D == LogitsDType::kFloat32) {
        return launch_logprobs<D, 4>(p, parts, stream);
      } else {
        return launch_logprobs<D, 2>(p, parts, stream);
      }
  }
}

}  // namespace

cudaError_t logprobs_topk_gpu(const LogprobsTopkParams& p, cudaStream_t stream, int parts) {
  if (p.rows <= 0) return cudaSuccess;
  if (parts <= 0) parts = p.vocab >= kSplitRowLogits ? 2 : 1;
  // The grid must stay within 2^31 - 1 blocks (clusters: launch_logprobs).
  if (p.rows > INT32_MAX / kMaxParts) parts = 1;
  parts = std::min(parts, kMaxParts);
  switch (p.dtype) {
    case LogitsDType::kFloat16:
      return dispatch_vec<LogitsDType::kFloat16>(p, parts, stream);
    case LogitsDType::kBFloat16:
      return dispatch_vec<LogitsDType::kBFloat16>(p, parts, stream);
    default:
      return dispatch_vec<LogitsDType::kFloat32>(p, parts, stream);
  }
}

}  // namespace fdspec
