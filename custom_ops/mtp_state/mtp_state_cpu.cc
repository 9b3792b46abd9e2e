// FastDeploy's MTP bookkeeping ops: sequential CPU implementations (rules in mtp_state.h).
#include "mtp_state/mtp_state.h"

#include <cstring>

namespace fdspec {

void mtp_preprocess_cpu(const MtpPreprocessParams& p) {
  bool any = false;
  for (int64_t b = 0; b < p.batch; ++b) {
    int64_t* target = p.target_model_draft_tokens + b * p.target_draft_stride;
    for (int64_t i = 1; i < p.target_draft_stride; ++i) target[i] = -1;
    const MtpPreprocessSlot s = mtp_preprocess_load(p, b);
    mtp_preprocess_store(p, b, s);
    any = any || s.runs;
  }
  p.not_need_stop[0] = any;
}

void mtp_update_cpu(const MtpUpdateParams& p) {
  int64_t rank = 0, stopped = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const MtpUpdateSlot s = mtp_update_load(p, b);
    if (s.len <= 0) continue;
    const int64_t token = rank < p.next_tokens_len ? p.inter_next_tokens[rank] : -1;
    ++rank;
    stopped += s.stopped;
    mtp_update_store(p, b, s, token);
  }
  p.not_need_stop[0] = stopped < p.batch;
}

void mtp_postprocess_cpu(const MtpPostprocessParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) mtp_postprocess_slot(p, b);
}

void mtp_set_value_by_flags_cpu(const MtpSetValueByFlagsParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) mtp_set_value_by_flags_slot(p, b);
}

void hidden_gather_cpu(const HiddenGatherParams& p) {
  const char* in = static_cast<const char*>(p.input);
  char* out = static_cast<char*>(p.out);
  const size_t row = static_cast<size_t>(p.row_bytes);
  int64_t in_off = 0, out_off = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const HiddenSlotPlan q = hidden_slot_plan(p, b);
    for (int64_t j = 0; j < q.out_count; ++j) {
      const int64_t dst = out_off + j, src = in_off + q.first + j;
      if (dst >= p.rows) break;
      if (j < q.copy && src >= 0 && src < p.rows) {
        std::memcpy(out + dst * row, in + src * row, row);
      } else {
        std::memset(out + dst * row, 0, row);
      }
    }
    in_off += q.in_count;
    out_off += q.out_count;
  }
  if (out_off < p.rows) std::memset(out + out_off * row, 0, (p.rows - out_off) * row);
  p.output_token_num[0] = static_cast<int32_t>(out_off);
}

}  // namespace fdspec
