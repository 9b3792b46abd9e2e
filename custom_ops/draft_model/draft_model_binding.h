// Shape checks shared by the Paddle bindings that take the verified tokens (draft_model_accept and
// draft_model_accept_preprocess): one wording of the errors, one place that reads the two widths.
#pragma once

#include <cstdint>

#include "binding/tensor_rules.h"

namespace fdspec::binding {

// Checks that accept_tokens and pre_ids have a column each and returns their widths.
inline void check_accept_widths(const OpChecks& c, const paddle::Tensor& accept_tokens,
                                const paddle::Tensor& pre_ids, int64_t* width,
                                int64_t* pre_ids_stride) {
  *width = accept_tokens.shape()[1];
  *pre_ids_stride = pre_ids.shape()[1];
  c.that(*width >= 1, "accept_tokens must have at least one column (K + 1), got shape " +
                          shape_str(accept_tokens))
      .that(*pre_ids_stride >= 1,
            "pre_ids must have at least one column, got shape " + shape_str(pre_ids));
}

}  // namespace fdspec::binding
