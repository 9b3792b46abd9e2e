// speculate_draft_length_policy: CUDA implementation (rule in speculate_draft_length_policy.h). No
// Paddle include. One block decides for the whole batch; its phases are those of the CPU
// implementation, with the gain histogram in shared memory (integer atomics: order-free) and block
// scans where the CPU walks in order.
#include <cub/block/block_scan.cuh>

#include "common/cuda_utils.cuh"
#include "speculate_draft_length_policy/speculate_draft_length_policy.h"

namespace fdspec {
namespace {

// One block: a batch's decision is a few thousand integer operations, smaller than one wave.
constexpr int kPolicyThreads = 512;
constexpr int kTop = kPolicyGainLevels - 1;

using PolicyScan = cub::BlockScan<int64_t, kPolicyThreads>;

__global__ void __launch_bounds__(kPolicyThreads)
    policy_kernel(SpeculateDraftLengthPolicyParams p) {
  __shared__ typename PolicyScan::TempStorage scan;
  __shared__ int32_t count[kPolicyGainLevels];  // candidates per gain level v
  __shared__ int32_t above[kPolicyGainLevels];  // by rank r = kTop - v: candidates of higher gain
  __shared__ int64_t above_sum[kPolicyGainLevels];  // ... and the sum of their gains
  __shared__ unsigned long long scheduled_s, base_s, candidates_s, learners_s;
  __shared__ unsigned long long
      column_sum[kPolicyMaxDrafts];  // decoding slots' estimates, per position
  __shared__ long long best_s;
  __shared__ unsigned long long best_m_s;
  __shared__ int64_t cut_level_s, cut_take_s;
  const int tid = threadIdx.x;
  for (int v = tid; v < kPolicyGainLevels; v += kPolicyThreads) count[v] = 0;
  for (int i = tid; i < kPolicyMaxDrafts; i += kPolicyThreads) column_sum[i] = 0;
  if (tid == 0) {
    scheduled_s = base_s = candidates_s = learners_s = 0;
    best_s = -1;
    best_m_s = ~0ull;
  }
  __syncthreads();

  // Learn, and count the candidate drafts by gain (thread tid owns slots tid, tid + kPolicyThreads,
  // ...).
  int64_t scheduled = 0, base_tokens = 0, candidates = 0, learners = 0;
  for (int64_t b = tid; b < p.batch; b += kPolicyThreads) {
    const PolicySlot kind = policy_slot(p, b);
    if (kind == PolicySlot::kIdle) continue;
    ++scheduled;
    if (kind == PolicySlot::kPrefill) {
      base_tokens += p.seq_lens_this_time[b];
      continue;
    }
    policy_learn(p, b);
    ++learners;
    for (int64_t i = 0; i < p.max_drafts; ++i) {
      atomicAdd(&column_sum[i],
                static_cast<unsigned long long>(policy_q16(p.accept_ewma[b * p.max_drafts + i])));
    }
    base_tokens += 1;
    if (kind == PolicySlot::kDecoding) {
      const int64_t n = policy_avail(p, b);
      candidates += n;
      policy_gains(p, b, n, [&](int32_t g) { atomicAdd(&count[g], 1); });
    }
  }
  atomicAdd(&scheduled_s, static_cast<unsigned long long>(scheduled));
  atomicAdd(&base_s, static_cast<unsigned long long>(base_tokens));
  atomicAdd(&candidates_s, static_cast<unsigned long long>(candidates));
  atomicAdd(&learners_s, static_cast<unsigned long long>(learners));
  __syncthreads();

  // Exclusive scans of the counts and gain sums by rank (gain descending).
  int64_t carry = 0, carry_sum = 0;
  for (int r0 = 0; r0 < kPolicyGainLevels; r0 += kPolicyThreads) {
    const int r = r0 + tid;
    const int64_t c = r < kPolicyGainLevels ? count[kTop - r] : 0;
    int64_t ex = 0, ex_sum = 0, total = 0, total_sum = 0;
    PolicyScan(scan).ExclusiveSum(c, ex, total);
    __syncthreads();
    PolicyScan(scan).ExclusiveSum(c * (kTop - r), ex_sum, total_sum);
    __syncthreads();
    if (r < kPolicyGainLevels) {
      above[r] = static_cast<int32_t>(carry + ex);
      above_sum[r] = carry_sum + ex_sum;
    }
    carry += total;
    carry_sum += total_sum;
  }
  __syncthreads();

  // The objective at every m in 0 .. M; per thread the best (largest score, then smallest m).
  const int64_t S = static_cast<int64_t>(scheduled_s), N0 = static_cast<int64_t>(base_s);
  const int64_t M = static_cast<int64_t>(candidates_s);
  int64_t best = -1, best_m = 0;
  for (int64_t m = tid; m <= M; m += kPolicyThreads) {
    int64_t sum = 0;
    if (m > 0) {
      int lo = 0, hi = kTop;  // the largest rank r with above[r] < m (above[0] = 0 < m)
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (above[mid] < m)
          lo = mid;
        else
          hi = mid - 1;
      }
      sum = above_sum[lo] + int64_t{kTop - lo} * (m - above[lo]);
    }
    const int64_t s = policy_score(p, S, N0, m, sum);
    if (s > best) {
      best = s;
      best_m = m;
    }
  }
  atomicMax(&best_s, static_cast<long long>(best));
  __syncthreads();
  if (best == best_s) atomicMin(&best_m_s, static_cast<unsigned long long>(best_m));
  __syncthreads();
  if (tid == 0) {
    const int64_t m = static_cast<int64_t>(best_m_s);
    int64_t level = kPolicyGainLevels, take = 0;
    if (m > 0) {
      int lo = 0, hi = kTop;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (above[mid] < m)
          lo = mid;
        else
          hi = mid - 1;
      }
      level = kTop - lo;
      take = m - above[lo];
    }
    cut_level_s = level;
    cut_take_s = take;
  }
  __syncthreads();

  // Each decoding slot keeps its gains above the cut and, in slot order, the first of those at it.
  const int64_t cut_level = cut_level_s, cut_take = cut_take_s;
  int64_t tied_carry = 0;
  for (int64_t b0 = 0; b0 < p.batch; b0 += kPolicyThreads) {
    const int64_t b = b0 + tid;
    PolicySlot kind = PolicySlot::kIdle;
    int64_t higher = 0, tied = 0;
    if (b < p.batch) {
      kind = policy_slot(p, b);
      if (kind == PolicySlot::kDecoding) {
        policy_gains(p, b, policy_avail(p, b), [&](int32_t g) {
          higher += g > cut_level;
          tied += g == cut_level;
        });
      }
    }
    int64_t tied_before = 0, tied_total = 0;
    PolicyScan(scan).ExclusiveSum(tied, tied_before, tied_total);
    __syncthreads();
    if (b < p.batch) {
      const int64_t k = higher + clamp_to<int64_t>(cut_take - (tied_carry + tied_before), 0, tied);
      if (kind == PolicySlot::kPrefill) {  // a new request: the batch's mean estimates
        const int64_t n = static_cast<int64_t>(learners_s);
        for (int64_t i = 0; i < p.max_drafts; ++i) {
          p.accept_ewma[b * p.max_drafts + i] =
              policy_start(p, static_cast<int64_t>(column_sum[i]), n);
        }
      }
      const bool drafting = kind == PolicySlot::kDecoding || kind == PolicySlot::kOptedOut;
      p.draft_probe[b] = drafting ? policy_probe(p, b, k) : -1;  // reads slt before its write
      if (drafting) p.seq_lens_this_time[b] = static_cast<int32_t>(1 + k);
      p.draft_len[b] = static_cast<int32_t>(k);
    }
    tied_carry += tied_total;
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
  policy_kernel<<<1, kPolicyThreads, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
