// unified_update_model_status: CPU implementation of the slot rule in
// unified_update_model_status.h.
#include "unified_update_model_status/unified_update_model_status.h"

namespace fdspec {

void unified_update_model_status_cpu(const UnifiedUpdateModelStatusParams& p) {
  bool any = false;
  for (int64_t b = 0; b < p.rows; ++b) any = unified_update_slot(p, b) || any;
  p.has_running_seqs[0] = any;
}

}  // namespace fdspec
