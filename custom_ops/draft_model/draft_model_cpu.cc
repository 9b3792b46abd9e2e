// Draft-model bookkeeping: CPU implementations of the rules in draft_model.h.
#include "draft_model/draft_model.h"

namespace fdspec {

void draft_model_greedy_preprocess_cpu(const DraftModelGreedyPreprocessParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const DraftPreprocessSlot q = draft_preprocess_load(p, b);
    draft_preprocess_store(
        p, b, q, draft_preprocess_reads_newest(q) ? p.pre_ids[b * p.pre_ids_stride + q.s] : -1);
    if (q.kind == DraftSlot::kPrefill) {
      int64_t* row = p.pre_ids + b * p.pre_ids_stride;
      for (int64_t i = 0; i < p.pre_ids_stride; ++i) row[i] = -1;
    }
  }
}

void draft_model_greedy_update_cpu(const DraftModelGreedyUpdateParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const DraftUpdateSlot u = draft_update_load(p, b);
    if (!draft_update_takes(p, u)) continue;
    uint64_t best = 0;  // below every key: the lowest key is that of id 2^32 - 1
    for (int64_t v = 0; v < p.vocab_size; ++v) {
      const uint64_t key =
          draft_argmax_key(logit_as_float(p.logits, p.logits_dtype, b * p.vocab_size + v), v);
      best = key > best ? key : best;
    }
    draft_update_write(p, b, u, draft_argmax_id(best));
  }
}

void draft_model_accept_cpu(const DraftModelAcceptParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const DraftAcceptSlot a = draft_accept_slot(p, b);
    int64_t* row = p.pre_ids + b * p.pre_ids_stride + a.s + 1;
    const int64_t* accepted = p.accept_tokens + b * p.width;
    for (int64_t i = 0; i < a.n; ++i) row[i] = accepted[i];
    p.step_idx[b] = a.s + a.n;
    p.mtp_draft_num[b] = 0;
  }
}

void draft_model_accept_preprocess_cpu(const DraftModelAcceptPreprocessParams& p) {
  draft_model_accept_cpu(p.accept());
  draft_model_greedy_preprocess_cpu(p.preprocess());
}

}  // namespace fdspec
