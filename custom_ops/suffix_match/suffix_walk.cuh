// suffix_match's batch budget walk on the device: the adapter that lets ngram_common's walk
// (ngram_common/ngram_walk.cuh) read suffix drafts, and the in-block finish used where the budget
// cannot bind. Shared by suffix_match.cu and suffix_cache.cu (the global cache's winners take the
// same walk). CUDA only.
// Design: docs/design/suffix_match.md.
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

  // Prefill: a fixed length of max(seq_lens_this_time, 0), written back as that; empty: 0;
  // decoding: base 1 and the search's draft (suffix_meta's length, suffix_tokens' row), padded in
  // graph mode.
  __device__ DeviceWalkSlot slot(int64_t b) const {
    const int64_t K = p.draft_stride - 1;
    return slot(
        b, p.seq_lens_encoder[b], p.seq_lens_decoder[b], [&] { return p.suffix_meta[2 * b]; },
        p.suffix_tokens + b * K);
  }
  // The same from what a search block holds: the slot's lengths, and its draft's length (read only
  // for a decoding slot) and tokens.
  template <class Drafted>
  __device__ DeviceWalkSlot slot(int64_t b, int32_t enc, int32_t dec, Drafted drafted,
                                 const int64_t* src) const {
    DeviceWalkSlot w;
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
    w.untruncated = clamp_to<int64_t>(drafted(), 0, K);
    w.src = src;
    return w;
  }
};

// Slot b's outcome written as the walk writes it when the budget cannot bind (every draft kept), by
// warp 0 of the block, a lane per column, from what the block holds: the slot's encoder and decoder
// lengths and its draft, `drafted` tokens at `draft` in shared memory. Thread 0 reading back the
// suffix row and length the block had just written put a chain of round trips at the end of every
// block (the length, then each token's load after the store before it).
__device__ __forceinline__ void suffix_finish_slot(const SuffixMatchParams& p, int64_t b,
                                                   int32_t enc, int32_t dec, int64_t drafted,
                                                   const int64_t* draft) {
  __syncthreads();  // the draft is complete, and every thread has read what the outputs overwrite
  if (threadIdx.x >= 32) return;
  const SuffixWalk walk{p};
  const DeviceWalkSlot w = walk.slot(b, enc, dec, [&] { return drafted; }, draft);
  ngram_walk_finish(walk.outputs(), b, w, w.src, w.processed ? w.untruncated : 0,
                    static_cast<int>(threadIdx.x), 32);
}

}  // namespace fdspec
