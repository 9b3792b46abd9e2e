// hybrid_mtp_ngram: CPU implementation, the sequential walk of docs/contract/ngram.md#hybrid_mtp_ngram as
// written (with the clamps of hybrid_mtp_ngram.h).
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"

#include "ngram_common/ngram_search.h"

namespace fdspec {

void hybrid_mtp_ngram_cpu(const HybridMtpNgramParams& p) {
  const int64_t W = p.token_ids_stride;
  const int64_t D = p.pre_ids_stride;
  int32_t* slt = p.seq_lens_this_time;

  int64_t unprocessed = 0;
  for (int64_t b = 0; b < p.batch; ++b) unprocessed += p.seq_lens_decoder[b] > 0;

  int64_t prefix = 0;  // sum of the final seq_lens_this_time of slots before b
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t ori = hybrid_ori(p, b);
    slt[b] = static_cast<int32_t>(ori);
    const int64_t* prompt = p.token_ids_all + b * W;
    const int64_t* pre = p.pre_ids + b * D;
    const int64_t P = clamp_to<int64_t>(p.prompt_lens[b], 0, W);
    const int64_t s = clamp_to<int64_t>(p.step_idx[b], 0, D - 1);
    if (!hybrid_is_processed(p, b, ori, s)) {  // stays counted in `unprocessed`: upstream's quirk, kept
      prefix += ori;
      continue;
    }
    int64_t budget = hybrid_slot_budget(p, b, ori, s);
    --unprocessed;
    const int64_t S = prefix + ori;
    const int64_t L = unprocessed;
    if (S + budget + L > p.threshold) budget = p.threshold - S - L;
    if (S + L < p.threshold - 1) {
      const NgramHaystacks h{prompt, P, pre, s, pre + s, s};
      const NgramMatch m = ngram_search_host(h, p.max_ngram_size, p.min_ngram_size, budget);
      int64_t* drafts = p.draft_tokens + b * p.draft_stride;
      for (int64_t k = 0; k < m.count; ++k) drafts[ori + k] = m.src[k];
      slt[b] = static_cast<int32_t>(ori + m.count);
    }
    prefix += slt[b];
  }
}

}  // namespace fdspec
