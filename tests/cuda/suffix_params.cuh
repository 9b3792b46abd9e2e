// The suffix harnesses' suffix_match parameters from their buffers, filled in one place (used by
// suffix_match_vs_cpu.cu and suffix_cache_vs_cpu.cu, whose buffer sets carry the same names).
#pragma once

#include <cstdint>

#include "draft_batch_of.cuh"
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

// d: the buffers ids, P, s, dtn, drafts, slt, enc, dec, mdl, stoks, sprobs, smeta.
template <typename Buffers>
fdspec::SuffixMatchParams suffix_match_params_of(Buffers& d, const SuffixScalars& x) {
  // The shared inputs, then the op's own fields in suffix_match.h's order.
  return {harness::draft_batch_of(d, x.W, x.K),
          d.stoks.data(),
          d.sprobs.data(),
          d.smeta.data(),
          x.B,
          x.depth,
          x.factor,
          x.offset,
          x.min_prob,
          x.max_draft,
          x.pad,
          x.threshold};
}
