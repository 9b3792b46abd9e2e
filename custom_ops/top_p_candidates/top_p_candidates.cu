// top_p_candidates: CUDA implementation (rule in top_p_candidates.h). No Paddle include.
#include "top_p_candidates/top_p_candidates.h"

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kToppThreads = 256;
constexpr int kToppWarps = kToppThreads / 32;

struct Ranked {
  float key;
  int64_t id;  // -1: none
};

__device__ __forceinline__ Ranked better(Ranked a, Ranked b) {
  if (a.id < 0) return b;
  if (b.id < 0) return a;
  return topp_ranks_before(a.key, a.id, b.key, b.id) ? a : b;
}

__global__ void __launch_bounds__(kToppThreads) top_p_candidates_kernel(TopPCandidatesParams p) {
  __shared__ Ranked warp_best[kToppWarps];
  __shared__ Ranked pick;
  __shared__ bool done;
  const int64_t t = blockIdx.x;
  const int64_t C = p.num_candidates, V = p.vocab;
  const int64_t picks = min_of<int64_t>(C, V);
  for (int64_t k = threadIdx.x; k < C; k += kToppThreads) {
    p.ids[t * C + k] = 0;
    if (p.dtype == LogitsDType::kFloat32) {
      static_cast<float*>(p.scores)[t * C + k] = 0.0f;
    } else {
      static_cast<uint16_t*>(p.scores)[t * C + k] = 0;
    }
  }
  float top_p = 0.0f;
  const bool active = topp_row_top_p(p, t, &top_p) && picks > 0;
  if (threadIdx.x == 0) p.lens[t] = 0;
  if (!active) return;  // uniform over the block
  __syncthreads();      // the zeroing above before the picks' writes
  const int64_t base = t * V;
  Ranked prev{0.0f, -1};
  float sum = 0.0f;  // thread 0's running sum
  for (int64_t k = 0; k < picks; ++k) {
    Ranked best{0.0f, -1};
    for (int64_t v = threadIdx.x; v < V; v += kToppThreads) {
      const float key = topp_rank_key(load_as_float(p.probs, p.dtype, base + v));
      if (prev.id >= 0 && !topp_ranks_before(prev.key, prev.id, key, v)) continue;
      best = better(best, Ranked{key, v});
    }
    for (int off = 16; off > 0; off >>= 1) {
      Ranked o;
      o.key = __shfl_down_sync(0xFFFFFFFFu, best.key, off);
      o.id = __shfl_down_sync(0xFFFFFFFFu, best.id, off);
      best = better(best, o);
    }
    if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
    __syncthreads();
    if (threadIdx.x == 0) {
      Ranked b = warp_best[0];
      for (int w = 1; w < kToppWarps; ++w) b = better(b, warp_best[w]);
      pick = b;
      p.ids[t * C + k] = b.id;
      topp_copy_score(p, t * C + k, base + b.id);
      sum += load_as_float(p.probs, p.dtype, base + b.id);
      const bool reached = sum >= top_p;
      done = reached || k + 1 == picks;
      if (done) p.lens[t] = static_cast<int32_t>(reached ? k + 1 : picks);
    }
    __syncthreads();
    if (done) return;
    prev = pick;
    __syncthreads();  // `pick` and `done` are rewritten next round
  }
}

}  // namespace

cudaError_t top_p_candidates_gpu(const TopPCandidatesParams& p, cudaStream_t stream) {
  if (p.token_rows <= 0) return cudaSuccess;
  top_p_candidates_kernel<<<static_cast<unsigned>(p.token_rows), kToppThreads, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
