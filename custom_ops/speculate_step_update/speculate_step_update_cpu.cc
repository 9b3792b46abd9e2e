// speculate_step_update: CPU implementation of the per-slot rule in speculate_step_update.h.
#include "speculate_step_update/speculate_step_update.h"

namespace fdspec {

void speculate_step_update_cpu(const SpeculateStepUpdateParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const StepUpdateSlot u = step_update_slot(p, b);
    int64_t* row = p.token_ids_all + b * p.token_ids_stride + u.row;
    const int64_t* accepted = p.accept_tokens + b * p.width;
    for (int64_t i = 0; i < u.n; ++i) row[i] = accepted[i];
    step_update_write_scalars(p, b, u);
  }
}

}  // namespace fdspec
