// naive_update_model_status: kernel layer (CPU implementation and CUDA launcher). No Paddle
// include.
//
// FastDeploy's post-sampling step of plain (non-speculative) decoding (contract:
// docs/contract/decode_step.md#naive_update_model_status). Per slot b < B (B = the length of
// seq_lens_this_time), with N = the length of next_tokens and x = cu_seqlens_q_output[b + 1] - 1
// (the slot's last packed output row):
//   seq_lens_this_time[b] > 0 and 0 <= x < N: step_output row b column 0 = next_tokens[x],
//     accept_num = 1, seq_lens_this_time = 1;
//   otherwise: accept_num = 0, seq_lens_this_time = 0 (x outside the packed tokens: the slot has no
//     sampled token, so it is treated as not running rather than reading outside the tensor).
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {

struct NaiveUpdateModelStatusParams {
  int64_t* accept_tokens;              // [>= B, W] int64, in place: column 0
  int64_t width;                       // W >= 1
  int32_t* accept_num;                 // [>= B] int32, in place
  int32_t* seq_lens_this_time;         // [B] int32, in place
  const int64_t* next_tokens;          // [N] int64: the sampled tokens, packed
  int64_t num_tokens;                  // N
  const int32_t* cu_seqlens_q_output;  // [>= B + 1] int32
  int64_t batch;                       // B (0: no-op)
};

FDSPEC_HD void naive_update_slot(const NaiveUpdateModelStatusParams& p, int64_t b) {
  const int64_t x = int64_t{p.cu_seqlens_q_output[b + 1]} - 1;
  if (p.seq_lens_this_time[b] > 0 && x >= 0 && x < p.num_tokens) {
    p.accept_tokens[b * p.width] = p.next_tokens[x];
    p.accept_num[b] = 1;
    p.seq_lens_this_time[b] = 1;
  } else {
    p.accept_num[b] = 0;
    p.seq_lens_this_time[b] = 0;
  }
}

void naive_update_model_status_cpu(const NaiveUpdateModelStatusParams& p);

#ifdef FDSPEC_WITH_CUDA
// One thread per slot, any B. No allocation, no host synchronisation (CUDA-graph capturable).
cudaError_t naive_update_model_status_gpu(const NaiveUpdateModelStatusParams& p,
                                          cudaStream_t stream);
#endif

}  // namespace fdspec
