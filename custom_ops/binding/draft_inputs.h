// The tensors that every op of the n-gram/suffix family takes first, in this order (ngram_match,
// suffix_match, suffix_cache_query): declared, checked and read once here. Paddle binding layer.
#pragma once

#include <vector>

#include "binding/tensor_rules.h"

namespace fdspec {
namespace binding {

// The nine share-input tensors (docs/contract/ngram.md#ngram_match): the history, the slot state
// and the two in-place outputs of the batch budget walk.
struct DraftInputs {
  const paddle::Tensor& token_ids_all;     // int64 [>= B, W]
  const paddle::Tensor& prompt_lens;       // int64 [B] / [B, 1]
  const paddle::Tensor& step_idx;          // int64 [B] / [B, 1]
  const paddle::Tensor& draft_token_num;   // int32 [B]
  paddle::Tensor& draft_tokens;            // int64 [>= B, K + 1], written
  paddle::Tensor& seq_lens_this_time;      // int32 [B], written; defines B
  const paddle::Tensor& seq_lens_encoder;  // int32 [B]
  const paddle::Tensor& seq_lens_decoder;  // int32 [B]
  const paddle::Tensor& max_dec_len;       // int64 [B] / [B, 1]
};

// Checks the nine tensors followed by the op's own (`extra`, in argument order) as one table, fills
// the fields they give every family params struct (pointers, strides, batch) and returns B.
template <class Params>
int64_t check_draft_inputs(const OpChecks& c, const DraftInputs& in,
                           std::initializer_list<OpChecks::Rule> extra, Params& p) {
  std::vector<OpChecks::Rule> table = {
      rule::token_ids_all(in.token_ids_all, &p.token_ids_all),
      rule::prompt_lens(in.prompt_lens, &p.prompt_lens),
      rule::step_idx(in.step_idx, &p.step_idx),
      rule::draft_token_num(in.draft_token_num, &p.draft_token_num),
      rule::draft_tokens(in.draft_tokens, &p.draft_tokens),
      rule::seq_lens_this_time(in.seq_lens_this_time, &p.seq_lens_this_time),
      rule::seq_lens_encoder(in.seq_lens_encoder, &p.seq_lens_encoder),
      rule::seq_lens_decoder(in.seq_lens_decoder, &p.seq_lens_decoder),
      rule::max_dec_len(in.max_dec_len, &p.max_dec_len)};
  for (const OpChecks::Rule& r : extra) table.push_back(r);
  p.batch = c.tensors(table, "seq_lens_this_time");
  p.token_ids_stride = in.token_ids_all.shape()[1];
  p.draft_stride = in.draft_tokens.shape()[1];
  return p.batch;
}

}  // namespace binding
}  // namespace fdspec
