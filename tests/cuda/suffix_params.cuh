// The suffix harnesses' suffix_match parameters from their buffers, filled in one place (used by
// suffix_match_vs_cpu.cu and suffix_cache_vs_cpu.cu, whose buffer sets carry the same names).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "suffix_match/suffix_match.h"

// What a harness's step sets beside its buffers.
struct SuffixScalars {
  int64_t W, K, B;
  int depth;
  float factor, offset, min_prob;
  int max_draft;
  bool pad;
  int64_t threshold;
};

// A buffer's first element: a harness vector's ptr(), a host vector's data().
template <typename V>
auto buffer_ptr(V& v) -> decltype(v.ptr()) {
  return v.ptr();
}
template <typename T>
T* buffer_ptr(std::vector<T>& v) {
  return v.data();
}

// The parameters are filled in the struct's field order; this says that order has not changed
// (several neighbours share a type, which the compiler would not catch).
constexpr bool suffix_match_fields_in_order() {
  using P = fdspec::SuffixMatchParams;
  const size_t at[] = {
      offsetof(P, token_ids_all),    offsetof(P, token_ids_stride),   offsetof(P, prompt_lens),
      offsetof(P, step_idx),         offsetof(P, draft_token_num),    offsetof(P, draft_tokens),
      offsetof(P, draft_stride),     offsetof(P, seq_lens_this_time), offsetof(P, seq_lens_encoder),
      offsetof(P, seq_lens_decoder), offsetof(P, max_dec_len),        offsetof(P, suffix_tokens),
      offsetof(P, suffix_probs),     offsetof(P, suffix_meta),        offsetof(P, batch),
      offsetof(P, max_tree_depth),   offsetof(P, max_spec_factor),    offsetof(P, max_spec_offset),
      offsetof(P, min_token_prob),   offsetof(P, max_draft_tokens),   offsetof(P, pad_to_max),
      offsetof(P, threshold)};
  for (size_t i = 1; i < sizeof(at) / sizeof(at[0]); ++i) {
    if (at[i] <= at[i - 1]) return false;
  }
  return sizeof(at) / sizeof(at[0]) == 22;
}
static_assert(suffix_match_fields_in_order(), "SuffixMatchParams changed: update the list below");

// d: the buffers ids, P, s, dtn, drafts, slt, enc, dec, mdl, stoks, sprobs, smeta.
template <typename Buffers>
fdspec::SuffixMatchParams suffix_match_params_of(Buffers& d, const SuffixScalars& x) {
  return {buffer_ptr(d.ids),
          x.W,
          buffer_ptr(d.P),
          buffer_ptr(d.s),
          buffer_ptr(d.dtn),
          buffer_ptr(d.drafts),
          x.K + 1,
          buffer_ptr(d.slt),
          buffer_ptr(d.enc),
          buffer_ptr(d.dec),
          buffer_ptr(d.mdl),
          buffer_ptr(d.stoks),
          buffer_ptr(d.sprobs),
          buffer_ptr(d.smeta),
          x.B,
          x.depth,
          x.factor,
          x.offset,
          x.min_prob,
          x.max_draft,
          x.pad,
          x.threshold};
}
