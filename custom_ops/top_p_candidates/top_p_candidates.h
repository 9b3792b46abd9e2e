// top_p_candidates: kernel layer (CPU implementation and CUDA launcher). No Paddle include.
//
// The candidate sets that verify_draft_tokens' TOPP strategy checks drafts against (FastDeploy's op
// of this name, newest signature: rows map to slots through batch ids; contract:
// docs/contract/decode_step.md#top_p_candidates). Per packed row t of probs [T, V], with
// b = batch_id_per_token_output[t] and C = candidates_len:
//   outputs of the row zeroed first (ids 0, scores 0, length 0);
//   b outside [0, B): nothing more (a padding row);
//   the probabilities are ranked by value, larger first, equal values by smaller token id (NaN
//   ranks as -inf); picks k = 0, 1, .. take the next in rank, write id and score (the input's own
//   bits) to column k, and add the score (as float) to a float running sum; the first k where the
//   sum reaches top_p[b] (sum >= top_p) ends the row with length k + 1; when the sum never reaches
//   top_p within min(C, V) picks (top_p > 1, rounding at top_p == 1, a NaN), the length is min(C,
//   V): every pick.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/fdspec_common.h"
#include "common/half_bits.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

struct TopPCandidatesParams {
  const void* probs;  // [T, V] float32 / float16 / bfloat16 (`dtype`)
  LogitsDType dtype;
  int64_t token_rows;  // T (0: no-op)
  int64_t vocab;       // V
  const void* top_p;   // [B] float32 or `dtype` (`top_p_dtype`)
  LogitsDType top_p_dtype;
  int64_t num_slots;         // B
  const int32_t* batch_ids;  // [T] int32: slot of each row, < 0 for padding
  void* scores;              // [T, C] `dtype`, written: the picked probabilities
  int64_t* ids;              // [T, C] int64, written: the picked token ids
  int32_t* lens;             // [T] int32, written: the candidate set's length
  int64_t num_candidates;    // C >= 1
};

// Element k of a float32 / float16 / bfloat16 array, widened exactly to float.
FDSPEC_HD float load_as_float(const void* base, LogitsDType d, int64_t k) {
  if (d == LogitsDType::kFloat32) return static_cast<const float*>(base)[k];
  const uint16_t h = static_cast<const uint16_t*>(base)[k];
#if defined(__CUDA_ARCH__)
  if (d == LogitsDType::kBFloat16) return __uint_as_float(static_cast<uint32_t>(h) << 16);
  return __half2float(__ushort_as_half(h));
#else
  return d == LogitsDType::kBFloat16 ? bfloat16_bits_to_float(h) : float16_bits_to_float(h);
#endif
}

// The ranking key of a probability: its value, NaN as -inf (so the order is total).
FDSPEC_HD float topp_rank_key(float v) { return v != v ? -__builtin_huge_valf() : v; }

// True when (ka, ia) ranks before (kb, ib).
FDSPEC_HD bool topp_ranks_before(float ka, int64_t ia, float kb, int64_t ib) {
  return ka > kb || (ka == kb && ia < ib);
}

FDSPEC_HD void topp_copy_score(const TopPCandidatesParams& p, int64_t dst, int64_t src) {
  if (p.dtype == LogitsDType::kFloat32) {
    static_cast<float*>(p.scores)[dst] = static_cast<const float*>(p.probs)[src];
  } else {
    static_cast<uint16_t*>(p.scores)[dst] = static_cast<const uint16_t*>(p.probs)[src];
  }
}

FDSPEC_HD void topp_zero_row(const TopPCandidatesParams& p, int64_t t, int64_t from) {
  const int64_t C = p.num_candidates;
  for (int64_t k = from; k < C; ++k) {
    p.ids[t * C + k] = 0;
    if (p.dtype == LogitsDType::kFloat32) {
      static_cast<float*>(p.scores)[t * C + k] = 0.0f;
    } else {
      static_cast<uint16_t*>(p.scores)[t * C + k] = 0;
    }
  }
}

// The row's top_p, or a NaN marker (false) for a padding row.
FDSPEC_HD bool topp_row_top_p(const TopPCandidatesParams& p, int64_t t, float* top_p) {
  const int64_t b = p.batch_ids[t];
  if (b < 0 || b >= p.num_slots) return false;
  *top_p = load_as_float(p.top_p, p.top_p_dtype, b);
  return true;
}

void top_p_candidates_cpu(const TopPCandidatesParams& p);

#ifdef FDSPEC_WITH_CUDA
// One block per row: each pick is a block-wide arg-best over the vocabulary (the next element in
// rank after the previous pick), so a row costs about length * V loads. No allocation, no host
// synchronisation (CUDA-graph capturable). Returns the launch status.
cudaError_t top_p_candidates_gpu(const TopPCandidatesParams& p, cudaStream_t stream);
#endif

}  // namespace fdspec
