// speculate_get_accept_tokens_and_logits and speculate_compute_cu_batch_offset: kernel layer (CPU
// implementation and CUDA launchers). No Paddle include. Contract: docs/contract/logprobs.md.
//
// B = batch; K + 1 = accept_stride; N = rows of the outputs; R = rows of `logits`; V = vocabulary.
// Every accept_num[b] is clamped to [0, max_accept] (K + 1 for the gather) wherever it is used, the
// offsets included, so the offsets, the token ids and the logits rows always agree; no write lands
// outside [0, N) (rows that would are dropped) and no read outside [0, R).
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

// Largest vocabulary the gather and the logprob kernels accept (row bytes and grid sizes stay far
// from the int32 and gridDim.y limits).
constexpr int64_t kMaxVocab = int64_t{1} << 24;

struct CuBatchOffsetParams {
  int32_t*
      cu_batch_token_offset;  // [>= B + 1] int32, in place: [0] = 0, [b + 1] = [b] + clamp(accept)
  const int32_t* accept_num;  // [>= B] int32
  int64_t batch;              // B (0: only [0] = 0 is written)
  int64_t max_accept;         // upper clamp of accept_num (< 0: none; the lower clamp is 0)
};

struct AcceptTokensLogitsParams {
  int64_t* token_ids;            // [N] int64, in place: token_ids[cu[b] + i] = accept_tokens[b, i]
  unsigned char* target_logits;  // [N, V] (row_bytes each), in place: the accepted tokens' rows
  const unsigned char* logits;   // [R, V] target model output rows, same dtype
  int64_t row_bytes;             // V * element size (float32, float16 or bfloat16: a byte copy)
  int64_t out_rows;              // N
  int64_t in_rows;               // R
  int32_t* cu_batch_token_offset;      // [B + 1] int32, in place: recomputed (CuBatchOffsetParams)
  const int32_t* cu_seqlens_q_output;  // [>= B] int32: first row of slot b in `logits`
  const int32_t* seq_lens_encoder;     // [B] int32: > 0 marks a prefill slot (one output row)
  const int32_t* accept_num;           // [B] int32: clamped to [0, K + 1]
  const int64_t* accept_tokens;        // [B, K + 1] int64
  int64_t accept_stride;               // K + 1 (>= 1)
  int64_t batch;                       // B (0: only cu_batch_token_offset[0] = 0 is written)
};

// The clamp every user of accept_num applies.
FDSPEC_HD int64_t clamped_accept(int32_t accept, int64_t max_accept) {
  const int64_t a = max_of<int64_t>(accept, 0);
  return max_accept < 0 ? a : min_of<int64_t>(a, max_accept);
}

// Offsets are int32 tensors: a running sum past INT32_MAX (only with an unclamped, absurd
// accept_num) saturates instead of wrapping.
FDSPEC_HD int32_t saturate_offset(int64_t v) {
  return v > INT32_MAX ? INT32_MAX : static_cast<int32_t>(v);
}

void compute_cu_batch_offset_cpu(const CuBatchOffsetParams& p);
void get_accept_tokens_and_logits_cpu(const AcceptTokensLogitsParams& p);

#ifdef FDSPEC_WITH_CUDA
// One block scanning the batch in chunks. No allocation, no host synchronisation.
cudaError_t compute_cu_batch_offset_gpu(const CuBatchOffsetParams& p, cudaStream_t stream);

// One kernel for batches up to kFusedOffsetMaxBatch (each block sums the accept counts of the slots
// before its own), else the offset scan followed by the gather. Blocks copy 16-byte vectors when
// the rows and both base pointers allow it, narrower ones otherwise. No allocation, no host
// synchronisation: CUDA-graph capturable.
cudaError_t get_accept_tokens_and_logits_gpu(const AcceptTokensLogitsParams& p,
                                             cudaStream_t stream);
#endif

}  // namespace fdspec
