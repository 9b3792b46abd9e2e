// Checks shared by the Paddle bindings of FastDeploy's MTP bookkeeping ops: one wording of the
// width and not_need_stop errors.
#pragma once

#include <cstdint>
#include <string>

#include "binding/tensor_rules.h"

namespace fdspec::binding {

// The column count of a 2-D tensor, at least `min_cols` (a named error otherwise).
inline int64_t columns_at_least(const OpChecks& c, const paddle::Tensor& t, const char* name,
                                int64_t min_cols) {
  const int64_t w = t.shape()[1];
  c.that(w >= min_cols, std::string(name) + " must have at least " + std::to_string(min_cols) +
                            " column(s), got shape " + shape_str(t));
  return w;
}

// not_need_stop: the one flag [0] the op writes on the tensors' place (never copied to the host).
inline void check_not_need_stop(const OpChecks& c, const paddle::Tensor& not_need_stop) {
  c.that(not_need_stop.numel() >= 1,
         "not_need_stop must have at least one element, got shape " + shape_str(not_need_stop));
}

}  // namespace fdspec::binding
