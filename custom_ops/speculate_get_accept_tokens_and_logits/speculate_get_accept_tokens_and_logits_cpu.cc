// speculate_get_accept_tokens_and_logits: CPU implementation (docs/contract/logprobs.md), the
// reference walk as written.
#include <cstring>

#include "speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits.h"

namespace fdspec {

void compute_cu_batch_offset_cpu(const CuBatchOffsetParams& p) {
  p.cu_batch_token_offset[0] = 0;  // even for B = 0: readers take cu[B] as the valid-row count
  int64_t sum = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    sum += clamped_accept(p.accept_num[b], p.max_accept);
    p.cu_batch_token_offset[b + 1] = saturate_offset(sum);
  }
}

void get_accept_tokens_and_logits_cpu(const AcceptTokensLogitsParams& p) {
  compute_cu_batch_offset_cpu({p.cu_batch_token_offset, p.accept_num, p.batch, p.accept_stride});
  int64_t offset = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t n = clamped_accept(p.accept_num[b], p.accept_stride);
    const int64_t rows = p.seq_lens_encoder[b] > 0 ? min_of<int64_t>(n, 1) : n;
    for (int64_t i = 0; i < n && offset + i < p.out_rows; ++i) {
      const int64_t dst = offset + i;
      p.token_ids[dst] = p.accept_tokens[b * p.accept_stride + i];
      const int64_t src = static_cast<int64_t>(p.cu_seqlens_q_output[b]) + i;
      if (i < rows && src >= 0 && src < p.in_rows) {
        std::memcpy(p.target_logits + dst * p.row_bytes, p.logits + src * p.row_bytes, p.row_bytes);
      }
    }
    offset += n;
  }
}

}  // namespace fdspec
