// The rule of every tensor name that the ops' tables use: its dtype and its shape against the batch
// B, written once for the whole library (an op that takes `step_idx` takes it as int64 [B] / [B, 1],
// whichever op it is). An op's table then only lists its tensors in argument order:
//   c.tensors({rule::accept_tokens(accept_tokens), rule::accept_num(accept_num)}, "accept_num");
// Paddle binding layer.
#pragma once

#include "binding/binding_utils.h"

// X(name, dtype, how the shape relates to B). UNDEFINED: the op checks the dtype itself (logits:
// float32, float16 or bfloat16).
#define FDSPEC_TENSOR_RULES(X)                       \
  X(accept_num, INT32, kPerSlot)                     \
  X(accept_tokens, INT64, kRows)                     \
  X(base_model_draft_tokens, INT64, kRows)           \
  X(base_model_max_dec_len, INT64, kPerSlot)         \
  X(base_model_seq_lens_decoder, INT32, kPerSlot)    \
  X(base_model_seq_lens_encoder, INT32, kPerSlot)    \
  X(base_model_seq_lens_this_time, INT32, kPerSlot)  \
  X(base_model_stop_flags, BOOL, kPerSlot)           \
  X(draft_token_num, INT32, kPerSlot)                \
  X(draft_tokens, INT64, kRows)                      \
  X(end_tokens, INT64, kRank1)                       \
  X(input_ids, INT64, kPerSlot)                      \
  X(logits, UNDEFINED, kRows)                        \
  X(max_dec_len, INT64, kPerSlot)                    \
  X(mtp_draft_num, INT32, kPerSlot)                  \
  X(pre_ids, INT64, kRows)                           \
  X(prompt_lens, INT64, kPerSlot)                    \
  X(seq_lens_decoder, INT32, kPerSlot)               \
  X(seq_lens_encoder, INT32, kPerSlot)               \
  X(seq_lens_this_time, INT32, kPerSlot)             \
  X(step_idx, INT64, kPerSlot)                       \
  X(stop_flags, BOOL, kPerSlot)                      \
  X(suffix_meta, INT32, kRows)                       \
  X(suffix_probs, FLOAT32, kRows)                    \
  X(suffix_tokens, INT64, kRows)                     \
  X(target_tokens, INT64, kRows)                     \
  X(token_ids_all, INT64, kRows)

namespace fdspec {
namespace binding {
namespace rule {

#define FDSPEC_DEFINE_TENSOR_RULE(name, dtype, dim)                                         \
  inline OpChecks::Rule name(const paddle::Tensor& t) {                                     \
    return {#name, t, paddle::DataType::dtype, OpChecks::Dim::dim};                         \
  }
FDSPEC_TENSOR_RULES(FDSPEC_DEFINE_TENSOR_RULE)
#undef FDSPEC_DEFINE_TENSOR_RULE

}  // namespace rule
}  // namespace binding
}  // namespace fdspec
