// suffix_match's checked parameters, shared by the ops that run its search and walk (suffix_match,
// suffix_cache_query). Paddle binding layer.
#pragma once

#include "binding/draft_inputs.h"
#include "suffix_match/suffix_match.h"

namespace fdspec {
namespace binding {

// Checks suffix_match's tensors and attributes by name (errors prefixed with `op`), resolves the
// threshold, and returns the kernel parameters.
SuffixMatchParams suffix_match_params(const char* op, const DraftInputs& in,
                                      paddle::Tensor& suffix_tokens, paddle::Tensor& suffix_probs,
                                      paddle::Tensor& suffix_meta, int max_tree_depth,
                                      float max_spec_factor, float max_spec_offset,
                                      float min_token_prob, int max_draft_tokens, bool pad_to_max,
                                      int64_t threshold);

}  // namespace binding
}  // namespace fdspec
