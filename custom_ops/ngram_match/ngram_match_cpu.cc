// ngram_match: CPU implementation, the sequential walk of docs/contract/ngram.md#ngram_match as written.
#include "ngram_match/ngram_match.h"

#include "ngram_common/ngram_search.h"

namespace fdspec {

void ngram_match_cpu(const NgramMatchParams& p) {
  const int64_t W = p.token_ids_stride;
  const int32_t* enc = p.seq_lens_encoder;
  const int32_t* dec = p.seq_lens_decoder;
  int32_t* slt = p.seq_lens_this_time;

  int64_t unprocessed = 0;
  for (int64_t b = 0; b < p.batch; ++b) unprocessed += (enc[b] > 0 || dec[b] > 0);

  int64_t prefix = 0;  // sum of the final seq_lens_this_time of slots before b
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t* row = p.token_ids_all + b * W;
    const int64_t P = clamp_to<int64_t>(p.prompt_lens[b], 0, W);
    const int64_t s = clamp_to<int64_t>(p.step_idx[b], 0, W - P);
    int64_t budget = ngram_match_slot_budget(p, b, s);

    if (enc[b] > 0) {  // prefill slot: untouched, but its length counts against the budget
      prefix += slt[b];
      continue;
    }
    if (dec[b] == 0) {
      slt[b] = 0;
      continue;
    }
    slt[b] = 1;
    --unprocessed;
    const int64_t S = prefix + 1;
    const int64_t L = unprocessed;  // prefill slots stay counted here: upstream's quirk, kept
    if (S + budget + L > p.threshold) budget = p.threshold - S - L;
    if (S + L < p.threshold - 1) {
      // With s = 0 there is no newest token (no pattern size fits): point at the row, not before it.
      const NgramHaystacks h{row, P, row + P, s, row + P + (s > 0 ? s - 1 : 0), s};
      const NgramMatch m = ngram_search_host(h, p.max_ngram_size, 1, budget);
      int64_t* drafts = p.draft_tokens + b * p.draft_stride;
      for (int64_t k = 0; k < m.count; ++k) drafts[1 + k] = m.src[k];
      slt[b] = static_cast<int32_t>(1 + m.count);
    }
    prefix += slt[b];
  }
}

}  // namespace fdspec
