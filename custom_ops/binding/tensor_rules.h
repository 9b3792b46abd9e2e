// The rule of every tensor name that the ops' tables use: its dtype and its shape against the batch
// B, written once for the whole library (an op that takes `step_idx` takes it as int64 [B] / [B,
// 1], whichever op it is). An op's table then only lists its tensors in argument order, each with
// the params field that takes its data pointer (FDSPEC_TENSOR below when the field has the tensor's
// name):
//   c.tensors({rule::accept_tokens(accept_tokens, &p.accept_tokens), FDSPEC_TENSOR(p, accept_num)},
//             "accept_num");
// Paddle binding layer.
#pragma once

#include "binding/binding_utils.h"

// X(name, dtype, how the shape relates to B). UNDEFINED: the op checks the dtype itself (logits:
// float32, float16 or bfloat16).
#define FDSPEC_TENSOR_RULES(X)                      \
  X(accept_ewma, INT32, kRows)                      \
  X(accept_num, INT32, kPerSlot)                    \
  X(accept_nums, INT32, kPerSlot)                   \
  X(accept_tokens, INT64, kRows)                    \
  X(base_model_draft_tokens, INT64, kRows)          \
  X(base_model_max_dec_len, INT64, kPerSlot)        \
  X(base_model_seq_lens_decoder, INT32, kPerSlot)   \
  X(base_model_seq_lens_encoder, INT32, kPerSlot)   \
  X(base_model_seq_lens_this_time, INT32, kPerSlot) \
  X(base_model_stop_flags, BOOL, kPerSlot)          \
  X(cost_table, INT64, kRank1)                      \
  X(cu_seqlens_q_output, INT32, kVector)            \
  X(draft_len, INT32, kPerSlot)                     \
  X(draft_opt_out, BOOL, kPerSlot)                  \
  X(draft_probe, INT64, kPerSlot)                   \
  X(draft_token_num, INT32, kPerSlot)               \
  X(draft_tokens, INT64, kRows)                     \
  X(end_ids, INT64, kVector)                        \
  X(end_tokens, INT64, kRank1)                      \
  X(input_ids, INT64, kPerSlot)                     \
  X(inter_next_tokens, INT64, kVector)              \
  X(is_block_step, BOOL, kPerSlot)                  \
  X(is_paused, BOOL, kPerSlot)                      \
  X(last_seq_lens_this_time, INT32, kPerSlot)       \
  X(logits, UNDEFINED, kRows)                       \
  X(max_dec_len, INT64, kPerSlot)                   \
  X(mtp_draft_num, INT32, kPerSlot)                 \
  X(not_need_stop, BOOL, kVector)                   \
  X(pre_ids, INT64, kRows)                          \
  X(pre_ids_all, INT64, kRows)                      \
  X(prompt_lens, INT64, kPerSlot)                   \
  X(reasoning_status, INT32, kPerSlot)              \
  X(seeds, INT64, kPerSlot)                         \
  X(seq_lens_decoder, INT32, kPerSlot)              \
  X(seq_lens_encoder, INT32, kPerSlot)              \
  X(seq_lens_this_time, INT32, kPerSlot)            \
  X(step_idx, INT64, kPerSlot)                      \
  X(step_input_ids, INT64, kRows)                   \
  X(step_output_ids, INT64, kRows)                  \
  X(step_output_len, INT32, kPerSlot)               \
  X(stop_flags, BOOL, kPerSlot)                     \
  X(suffix_meta, INT32, kRows)                      \
  X(suffix_probs, FLOAT32, kRows)                   \
  X(suffix_tokens, INT64, kRows)                    \
  X(target_model_draft_tokens, INT64, kRows)        \
  X(target_model_seq_lens_decoder, INT32, kPerSlot) \
  X(target_model_seq_lens_encoder, INT32, kPerSlot) \
  X(target_model_step_idx, INT64, kPerSlot)         \
  X(target_model_stop_flags, BOOL, kPerSlot)        \
  X(target_tokens, INT64, kRows)                    \
  X(token_ids_all, INT64, kRows)                    \
  X(topp, FLOAT32, kPerSlot)

namespace fdspec {
namespace binding {
namespace rule {

// The element type of a dtype: Paddle's own mapping, and void for UNDEFINED (no data pointer is
// bound for it).
template <paddle::DataType D>
struct ElemOf : phi::DataTypeToCppType<D> {};
template <>
struct ElemOf<paddle::DataType::UNDEFINED> {
  using type = void;
};

// rule::name(t): check only. rule::name(t, &p.field): check, then p.field = the data pointer; a
// `T*` field (the op writes the tensor) needs a non-const tensor, a `const T*` field takes either.
#define FDSPEC_DEFINE_TENSOR_RULE(name, dtype, dim)                                              \
  inline OpChecks::Rule name(const paddle::Tensor& t) {                                          \
    return {#name, t, paddle::DataType::dtype, OpChecks::Dim::dim};                              \
  }                                                                                              \
  inline OpChecks::Rule name(const paddle::Tensor& t,                                            \
                             const ElemOf<paddle::DataType::dtype>::type** field) {              \
    return {#name, t, paddle::DataType::dtype, OpChecks::Dim::dim, field};                       \
  }                                                                                              \
  inline OpChecks::Rule name(paddle::Tensor& t, ElemOf<paddle::DataType::dtype>::type** field) { \
    return {#name, t, paddle::DataType::dtype, OpChecks::Dim::dim, field, &t};                   \
  }
FDSPEC_TENSOR_RULES(FDSPEC_DEFINE_TENSOR_RULE)
#undef FDSPEC_DEFINE_TENSOR_RULE

}  // namespace rule
}  // namespace binding
}  // namespace fdspec

// The row of the op's tensor parameter `name` whose data pointer goes to the params field of the
// same name: `c.tensors({FDSPEC_TENSOR(p, accept_tokens), FDSPEC_TENSOR(p, accept_num)},
// "accept_num")`.
#define FDSPEC_TENSOR(params, name) ::fdspec::binding::rule::name(name, &(params).name)

// FDSPEC_TENSORS(p, a, b, c): the rows FDSPEC_TENSOR(p, a), FDSPEC_TENSOR(p, b), FDSPEC_TENSOR(p,
// c), for up to 12 tensors, so that an op's table names each of its tensors once:
//   c.tensors({FDSPEC_TENSORS(p, accept_tokens, accept_num)}, "accept_num")
#define FDSPEC_TENSORS(params, ...) \
  FDSPEC_PP_CAT(FDSPEC_TENSORS_, FDSPEC_PP_COUNT(__VA_ARGS__))(params, __VA_ARGS__)
#define FDSPEC_PP_CAT(a, b) FDSPEC_PP_CAT_(a, b)
#define FDSPEC_PP_CAT_(a, b) a##b
#define FDSPEC_PP_COUNT(...) FDSPEC_PP_COUNT_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define FDSPEC_PP_COUNT_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, n, ...) n
#define FDSPEC_TENSORS_1(p, x) FDSPEC_TENSOR(p, x)
#define FDSPEC_TENSORS_2(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_1(p, __VA_ARGS__)
#define FDSPEC_TENSORS_3(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_2(p, __VA_ARGS__)
#define FDSPEC_TENSORS_4(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_3(p, __VA_ARGS__)
#define FDSPEC_TENSORS_5(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_4(p, __VA_ARGS__)
#define FDSPEC_TENSORS_6(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_5(p, __VA_ARGS__)
#define FDSPEC_TENSORS_7(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_6(p, __VA_ARGS__)
#define FDSPEC_TENSORS_8(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_7(p, __VA_ARGS__)
#define FDSPEC_TENSORS_9(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_8(p, __VA_ARGS__)
#define FDSPEC_TENSORS_10(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_9(p, __VA_ARGS__)
#define FDSPEC_TENSORS_11(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_10(p, __VA_ARGS__)
#define FDSPEC_TENSORS_12(p, x, ...) FDSPEC_TENSOR(p, x), FDSPEC_TENSORS_11(p, __VA_ARGS__)
