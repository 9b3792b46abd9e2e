// naive_update_model_status: CPU implementation of the slot rule in naive_update_model_status.h.
#include "naive_update_model_status/naive_update_model_status.h"

namespace fdspec {

void naive_update_model_status_cpu(const NaiveUpdateModelStatusParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) naive_update_slot(p, b);
}

}  // namespace fdspec
