// suffix_match's batch budget walk on the device: the adapter that lets ngram_common's walk
// (ngram_common/ngram_walk.cuh) read suffix drafts, and the in-block finish used where the budget
// cannot bind. Shared by suffix_match.cu and suffix_cache.cu (the global cache's winners take the
// same walk). CUDA only.
#pragma once

#include "ngram_common/ngram_walk.cuh"
#include "suffix_match/suffix_match.h"

namespace fdspec {

struct SuffixWalk {
  SuffixMatchParams p;

  __device__ int64_t batch() const { return p.batch; }
  __device__ int64_t threshold() const { return p.threshold; }
  __device__ WalkOutputs outputs() const {
    return WalkOutputs{p.draft_tokens, p.draft_stride, p.seq_lens_this_time,
                       graph_pad_length(p.pad_to_max, p.max_draft_tokens, p.draft_stride)};
  }

  // Prefill: a fixed length of max(seq_lens_this_time, 0), written back as that; empty: 0; decoding:
  // base 1 and the search's draft (suffix_meta's length, suffix_tokens' row), padded in graph mode.
  __device__ DeviceWalkSlot slot(int64_t b) const {
    DeviceWalkSlot w;
    const int32_t enc = p.seq_lens_encoder[b];
    const int32_t dec = p.seq_lens_decoder[b];
    w.counted = suffix_is_counted(enc, dec);
    if (enc > 0) {
      w.base = max_of<int32_t>(p.seq_lens_this_time[b], 0);
      return w;
    }
    if (dec == 0) return w;
    const int64_t K = p.draft_stride - 1;
    w.processed = true;
    w.padded = p.pad_to_max;
    w.base = 1;
    w.budget = K;
    w.untruncated = clamp_to<int64_t>(p.suffix_meta[2 * b], 0, K);
    w.src = p.suffix_tokens + b * K;
    return w;
  }
};

// Slot b's outcome written as the walk writes it when the budget cannot bind (every draft kept):
// after every thread of the block has written the slot's suffix outputs, thread 0 writes its
// draft_tokens and seq_lens_this_time (suffix_budget_never_binds decides on the host).
__device__ __forceinline__ void suffix_finish_slot(const SuffixMatchParams& p, int64_t b) {
  __syncthreads();  // the slot's suffix_tokens row and suffix_meta are written
  if (threadIdx.x == 0) {
    const SuffixWalk walk{p};
    const DeviceWalkSlot w = walk.slot(b);
    ngram_walk_finish(walk.outputs(), b, w, w.src, w.processed ? w.untruncated : 0);
  }
}

}  // namespace fdspec
