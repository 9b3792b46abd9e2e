// ngram_match: CUDA implementation (SPEC §1). No Paddle include.
//
// Kernel 1 (one block per slot) finds each decoding slot's best match with the budget-independent
// search of ngram_search.cuh: which window wins does not depend on the budget, only how many tokens
// of its continuation are kept. Kernel 2 (one block) then replays the sequential walk exactly.
//
// Kernel 2 is the walk of ngram_common/ngram_walk.cuh, which proves it exact. In ngram_match's terms:
// the processed slots are the decoding ones, with base length 1; between two of them G grows by the
// drafts kept plus the lengths of the prefill slots in between, so G never decreases.
#include "ngram_match/ngram_match.h"

#include "common/cuda_utils.cuh"
#include "ngram_common/ngram_search.cuh"
#include "ngram_common/ngram_walk.cuh"

namespace fdspec {
namespace {

struct SlotView {
  const int64_t* row;
  int64_t P;
  int64_t s;
};

__device__ __forceinline__ SlotView slot_view(const NgramMatchParams& p, int64_t b) {
  const int64_t W = p.token_ids_stride;
  SlotView v;
  v.row = p.token_ids_all + b * W;
  v.P = clamp_to<int64_t>(p.prompt_lens[b], 0, W);
  v.s = clamp_to<int64_t>(p.step_idx[b], 0, W - v.P);
  return v;
}

__device__ __forceinline__ NgramHaystacks slot_haystacks(const SlotView& v) {
  return NgramHaystacks{v.row, v.P, v.row + v.P, v.s, v.row + v.P + v.s - 1, v.s};
}

// The walk's decoding slots: not prefill, not empty. (A negative seq_lens_decoder takes this path too,
// as in the reference, though it was never counted in `unprocessed`.)
__device__ __forceinline__ bool is_decoding(int32_t enc, int32_t dec) { return enc <= 0 && dec != 0; }
__device__ __forceinline__ bool is_counted(int32_t enc, int32_t dec) { return enc > 0 || dec > 0; }

// Search problem of kernel 1. A decoding slot that is sure to give up whatever the earlier slots draft
// is not searched: G_b >= I + (lengths of the prefill slots before b), I being the initial
// `unprocessed`, since every earlier decoding slot adds at least 1 to S and removes 1 from L. With a
// batch larger than the threshold every slot gives up this way and the op reads no haystack at all.
// That bound costs O(B) reads per block, which stay in L2.
template <int kThreadsPerSlot>
struct NgramMatchSearch {
  static constexpr int kThreads = kThreadsPerSlot;
  NgramMatchParams p;

  __device__ SearchSlot slot(int64_t b) const {
    SearchSlot out;
    const int32_t enc = p.seq_lens_encoder[b];
    const int32_t dec = p.seq_lens_decoder[b];
    if (!is_decoding(enc, dec)) return out;  // not recorded: kernel 2 handles the slot
    out.record = true;

    int64_t counted = 0, prefill_before = 0;
    for (int64_t j = threadIdx.x; j < p.batch; j += kThreads) {
      const int32_t e = p.seq_lens_encoder[j];
      counted += is_counted(e, p.seq_lens_decoder[j]);
      if (j < b && e > 0) prefill_before += p.seq_lens_this_time[j];
    }
    counted = block_sum<kThreads>(counted);
    prefill_before = block_sum<kThreads>(prefill_before);
    if (counted + prefill_before >= p.threshold - 1) return out;

    const SlotView v = slot_view(p, b);
    if (ngram_match_slot_budget(p, b, v.s) <= 0) return out;
    out.h = slot_haystacks(v);
    out.cap = static_cast<int>(min_of<int64_t>(p.max_ngram_size, v.s));
    out.min_n = 1;
    out.search = true;
    return out;
  }

  // The result goes into the slot's seq_lens_this_time, whose input value a decoding slot never reads.
  __device__ void store(int64_t b, int32_t code) const { p.seq_lens_this_time[b] = code; }
};

// Kernel 2's view of the walk (ngram_common/ngram_walk.cuh): decoding slots are processed with base 1;
// prefill slots keep their length, empty ones 0. (A prefill slot with a negative length, which no
// runner produces, would break the walk's monotonicity; lengths are taken as given, as upstream does.)
struct NgramMatchWalk {
  struct Slot : WalkSlot {
    NgramMatch match;
  };
  NgramMatchParams p;

  __device__ int64_t batch() const { return p.batch; }
  __device__ int64_t threshold() const { return p.threshold; }

  __device__ Slot slot(int64_t b) const {
    Slot w;
    const int32_t enc = p.seq_lens_encoder[b];
    const int32_t dec = p.seq_lens_decoder[b];
    w.counted = is_counted(enc, dec);
    if (enc > 0) {
      w.base = p.seq_lens_this_time[b];
      return w;
    }
    if (dec == 0) return w;
    w.processed = true;
    w.base = 1;
    const SlotView v = slot_view(p, b);
    w.match = decode_search_result(p.seq_lens_this_time[b], slot_haystacks(v));
    w.untruncated = min_of<int64_t>(w.match.count, ngram_match_slot_budget(p, b, v.s));
    w.untruncated = max_of<int64_t>(w.untruncated, 0);
    return w;
  }

  __device__ void finish(int64_t b, const Slot& w, int64_t kept) const {
    if (!w.processed) {
      if (p.seq_lens_encoder[b] <= 0) p.seq_lens_this_time[b] = 0;  // empty slot; prefill untouched
      return;
    }
    int64_t* drafts = p.draft_tokens + b * p.draft_stride;
    for (int64_t k = 0; k < kept; ++k) drafts[1 + k] = w.match.src[k];
    p.seq_lens_this_time[b] = static_cast<int32_t>(1 + kept);
  }
};

}  // namespace

cudaError_t ngram_match_gpu(const NgramMatchParams& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  cudaError_t err = launch_ngram_search(NgramMatchSearch<kNgramSearchThreads>{p}, static_cast<int>(p.batch),
                                        p.max_ngram_size, stream);
  if (err != cudaSuccess) return err;
  err = launch_ngram_walk(NgramMatchWalk{p}, stream);
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
