// speculate_draft_length_policy: CUDA implementation (rule in speculate_draft_length_policy.h). No
// Paddle include. One block decides for the whole batch, a thread per slot; its phases are those of
// the CPU implementation, with the gain histogram in shared memory (32-bit atomics: order-free) and
// block reductions and scans where the CPU walks in order. No atomic that every thread applies to
// one shared address: those serialise the block (64-bit ones on shared memory may be CAS loops).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common/cuda_utils.cuh"
#include "speculate_draft_length_policy/speculate_draft_length_policy.h"

namespace fdspec {
namespace {

constexpr int kTop = kPolicyGainLevels - 1;
constexpr unsigned kFull = 0xFFFFFFFFu;

// Per-thread counts of phase 1, summed over the block (slot counts below B (K + 1) <= 2^29).
struct PolicyTotals {
  int64_t base_tokens;
  int32_t scheduled, candidates, learners, prefills;
};
struct PolicyTotalsSum {
  __device__ PolicyTotals operator()(const PolicyTotals& a, const PolicyTotals& b) const {
    return {a.base_tokens + b.base_tokens, a.scheduled + b.scheduled, a.candidates + b.candidates,
            a.learners + b.learners, a.prefills + b.prefills};
  }
};

// Candidates of a gain level and the sum of their gains, scanned by rank (gain descending).
struct PolicyLevel {
  int64_t gain_sum;
  int32_t count;
};
struct PolicyLevelSum {
  __device__ PolicyLevel operator()(const PolicyLevel& a, const PolicyLevel& b) const {
    return {a.gain_sum + b.gain_sum, a.count + b.count};
  }
};

// The best score and the smallest m reaching it.
struct PolicyBest {
  int64_t score, m;
};
struct PolicyBestOf {
  __device__ PolicyBest operator()(const PolicyBest& a, const PolicyBest& b) const {
    return (a.score > b.score || (a.score == b.score && a.m < b.m)) ? a : b;
  }
};

__device__ __forceinline__ int64_t warp_sum(int64_t v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  return v;
}

// The largest rank r with above[r] < m (m >= 1; above[0] = 0): the level of the m-th candidate.
__device__ __forceinline__ int policy_rank_of(const int32_t* above, int64_t m) {
  int lo = 0, hi = kTop;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (above[mid] < m)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Decoding or opted out: the slots that learn and define a new request's estimates.
__device__ __forceinline__ bool policy_learns(PolicySlot kind) {
  return kind == PolicySlot::kDecoding || kind == PolicySlot::kOptedOut;
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads) policy_kernel(SpeculateDraftLengthPolicyParams p) {
  constexpr int kWarps = kThreads / 32;
  constexpr int kItems = (kPolicyGainLevels + kThreads - 1) / kThreads;  // levels per thread
  using TotalsReduce = cub::BlockReduce<PolicyTotals, kThreads>;
  using LevelScan = cub::BlockScan<PolicyLevel, kThreads>;
  using BestReduce = cub::BlockReduce<PolicyBest, kThreads>;
  using TieScan = cub::BlockScan<int64_t, kThreads>;
  __shared__ union {
    typename TotalsReduce::TempStorage totals;
    typename LevelScan::TempStorage levels;
    typename BestReduce::TempStorage best;
    typename TieScan::TempStorage ties;
    int64_t column_part[kWarps][kPolicyMaxDrafts];  // per warp: its learning slots' estimates
  } tmp;
  __shared__ int32_t count[kPolicyGainLevels];  // candidates per gain level v
  __shared__ int32_t above[kPolicyGainLevels];  // by rank r = kTop - v: candidates of higher gain
  __shared__ int64_t above_sum[kPolicyGainLevels];  // ... and the sum of their gains
  __shared__ int64_t column[kPolicyMaxDrafts];      // the learning slots' estimates per position
  __shared__ PolicyTotals totals_s;
  __shared__ int64_t best_m_s;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t B = p.batch, K = p.max_drafts;
  for (int v = tid; v < kPolicyGainLevels; v += kThreads) count[v] = 0;
  __syncthreads();

  // 1. Learn, and count the candidate drafts by gain (thread tid owns slots tid, tid + kThreads..).
  PolicyTotals mine{0, 0, 0, 0, 0};
  for (int64_t b = tid; b < B; b += kThreads) {
    const PolicySlot kind = policy_slot(p, b);
    if (kind == PolicySlot::kIdle) continue;
    ++mine.scheduled;
    if (kind == PolicySlot::kPrefill) {
      mine.base_tokens += p.seq_lens_this_time[b];
      ++mine.prefills;
      continue;
    }
    policy_learn(p, b);
    ++mine.learners;
    mine.base_tokens += 1;
    if (kind == PolicySlot::kDecoding) {
      const int64_t n = policy_avail(p, b);
      mine.candidates += n;
      policy_gains(p, b, n, [&](int32_t g) { atomicAdd(&count[g], 1); });
    }
  }
  const PolicyTotals block_totals = TotalsReduce(tmp.totals).Reduce(mine, PolicyTotalsSum());
  if (tid == 0) totals_s = block_totals;
  __syncthreads();
  const PolicyTotals t = totals_s;

  // A new request arrives: the learning slots' estimates per position, per warp (this thread's
  // own rows, written above).
  const bool starts = t.prefills > 0 && t.learners > 0;
  if (starts) {
    for (int64_t i = 0; i < K; ++i) {
      int64_t s = 0;
      for (int64_t b = tid; b < B; b += kThreads) {
        if (policy_learns(policy_slot(p, b))) s += policy_q16(p.accept_ewma[b * K + i]);
      }
      s = warp_sum(s);
      if (lane == 0) tmp.column_part[warp][i] = s;
    }
    __syncthreads();
    if (tid < K) {
      int64_t s = 0;
      for (int w = 0; w < kWarps; ++w) s += tmp.column_part[w][tid];
      column[tid] = s;
    }
    __syncthreads();  // tmp is the level scan's next
  }

  // 2. Exclusive scan of the counts and gain sums by rank, kItems consecutive ranks per thread.
  PolicyLevel item[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int r = tid * kItems + j;
    const int32_t c = r < kPolicyGainLevels ? count[kTop - r] : 0;
    item[j] = {int64_t{c} * (kTop - r), c};
  }
  LevelScan(tmp.levels).ExclusiveScan(item, item, PolicyLevel{0, 0}, PolicyLevelSum());
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int r = tid * kItems + j;
    if (r < kPolicyGainLevels) {
      above[r] = item[j].count;
      above_sum[r] = item[j].gain_sum;
    }
  }
  __syncthreads();

  // 3. The objective at every m in 0 .. M, a contiguous run of m per thread (one search of its
  // level, then a walk); the block's best (largest score, then smallest m).
  PolicyBest best{-1, 0};
  const int64_t chunk = (int64_t{t.candidates} + kThreads) / kThreads;  // ceil((M + 1) / threads)
  const int64_t m_begin = tid * chunk, m_end = min_of<int64_t>(m_begin + chunk, t.candidates + 1);
  if (m_begin < m_end) {
    int r = m_begin > 0 ? policy_rank_of(above, m_begin) : 0;
    for (int64_t m = m_begin; m < m_end; ++m) {
      int64_t sum = 0;
      if (m > 0) {
        while (r < kTop && above[r + 1] < m) ++r;
        sum = above_sum[r] + int64_t{kTop - r} * (m - above[r]);
      }
      const int64_t s = policy_score(p, t.scheduled, t.base_tokens, m, sum);
      if (s > best.score) best = {s, m};  // m grows: the first of equal scores is the smallest
    }
  }
  const PolicyBest block_best = BestReduce(tmp.best).Reduce(best, PolicyBestOf());
  if (tid == 0) best_m_s = block_best.m;
  __syncthreads();

  // 4. The cut: every gain above cut_level and the first cut_take of those at it, in slot order. A
  // scan over the slots is needed only when some of the tied gains are cut.
  const int64_t m_star = best_m_s;
  int64_t cut_level = kPolicyGainLevels, cut_take = 0;
  if (m_star > 0) {
    const int r = policy_rank_of(above, m_star);
    cut_level = kTop - r;
    cut_take = m_star - above[r];
  }
  const bool split_ties = m_star > 0 && cut_take < count[cut_level];
  int64_t tied_carry = 0;
  for (int64_t b0 = 0; b0 < B; b0 += kThreads) {  // uniform trip count: the scan needs every thread
    const int64_t b = b0 + tid;
    PolicySlot kind = PolicySlot::kIdle;
    int64_t higher = 0, tied = 0;
    if (b < B) {
      kind = policy_slot(p, b);
      if (kind == PolicySlot::kDecoding && m_star > 0) {
        policy_gains(p, b, policy_avail(p, b), [&](int32_t g) {
          higher += g > cut_level;
          tied += g == cut_level;
        });
      }
    }
    int64_t kept_tied = tied;
    if (split_ties) {
      int64_t tied_before = 0, tied_total = 0;
      TieScan(tmp.ties).ExclusiveSum(tied, tied_before, tied_total);
      __syncthreads();  // tmp.ties is reused by the next chunk
      kept_tied = clamp_to<int64_t>(cut_take - (tied_carry + tied_before), 0, tied);
      tied_carry += tied_total;
    }
    if (b >= B) continue;
    const int64_t k = higher + kept_tied;
    if (kind == PolicySlot::kPrefill) {  // a new request: the batch's mean estimates
      for (int64_t i = 0; i < K; ++i) {
        p.accept_ewma[b * K + i] = policy_start(p, starts ? column[i] : 0, t.learners);
      }
    }
    const bool drafting = policy_learns(kind);
    p.draft_probe[b] = drafting ? policy_probe(p, b, k) : -1;  // reads slt before its write
    if (drafting) p.seq_lens_this_time[b] = static_cast<int32_t>(1 + k);
    p.draft_len[b] = static_cast<int32_t>(k);
  }
}

}  // namespace

cudaError_t speculate_draft_length_policy_gpu(const SpeculateDraftLengthPolicyParams& p,
                                              cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  if (p.table_len < 1 || p.max_drafts < 0 || p.max_drafts > kPolicyMaxDrafts ||
      p.batch * (p.max_drafts + 1) > kPolicyMaxCandidates) {
    return cudaErrorInvalidValue;
  }
  // A thread per slot up to 256 slots, then 512 threads (a 1024-thread block would be held to 64
  // registers and spill); a small batch takes a small block (fewer warps to sync).
  if (p.batch <= 256) {
    policy_kernel<256><<<1, 256, 0, stream>>>(p);
  } else {
    policy_kernel<512><<<1, 512, 0, stream>>>(p);
  }
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
