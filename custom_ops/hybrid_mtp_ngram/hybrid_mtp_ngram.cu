// hybrid_mtp_ngram: CUDA implementation (docs/contract/ngram.md#hybrid_mtp_ngram). No Paddle
// include.
//
// Kernel 1 (one block, or a cluster, per slot) finds each processed slot's best match with the
// budget-independent search of ngram_search.cuh (haystacks: the prompt, then pre_ids[0 .. s); the
// pattern ends at pre_ids[s]). Kernel 2 (one block) is the walk of ngram_common/ngram_walk.cuh.
// The search result waits between the kernels in the slot's seq_lens_this_time entry, packed with
// the input length ori the walk still needs: -(ori + M * c), M = hybrid_max_ori(p), c = 0 for no
// match, else 1 + the continuation's start (the binding checks that it fits an int32). No
// workspace: graph capturable and re-entrant on concurrent streams. Walk-free batches
// (hybrid_walk_free_term, the same for every value an entry can hold) let kernel 1 write the final
// outputs and kernel 2 exit before its wait. Design: docs/design/ngram.md.
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"

#include "common/cuda_utils.cuh"
#include "ngram_common/ngram_launch.cuh"

namespace fdspec {
namespace {

// Slot j's walk-free term from its seq_lens_this_time entry as it is now.
__device__ __forceinline__ int64_t hybrid_free_term_now(const HybridMtpNgramParams& p, int64_t j) {
  const int32_t entry = *static_cast<const volatile int32_t*>(p.seq_lens_this_time + j);
  return hybrid_walk_free_term(p, j, entry);
}

// Search problem of kernel 1. A processed slot that is sure to give up whatever the earlier slots
// draft is not searched: G_b >= I + ori_b - 1, I being the initial `unprocessed`, since every
// earlier processed slot adds at least 1 to S and removes 1 from L, and other lengths are >= 0.
// Only seq_lens_decoder (never written) of other slots is read: their seq_lens_this_time entries
// are being rewritten by their own blocks.
struct HybridSearch : NgramOpView<HybridMtpNgramParams> {
  __device__ WalkOutputs outputs() const { return hybrid_outputs(p); }

  __device__ SearchSlot slot(int64_t b) const {
    SearchSlot out;
    const int32_t raw = p.seq_lens_this_time[b];
    const HybridView v = hybrid_view(p, b);
    out.walk = hybrid_walk_slot(p, b, max_of<int64_t>(raw, 0), v.s);
    if (!out.walk.processed) {
      out.record = raw < 0;  // store() writes the clamped 0
      return out;
    }
    out.record = true;
    out.h = hybrid_haystacks(v);
    out.cap = static_cast<int>(min_of<int64_t>(p.max_ngram_size, v.s));
    out.min_n = p.min_ngram_size;
    out.search = true;
    return out;
  }

  // The row whose first tokens are the prompt (the search's first haystack), for its L2 prefetch.
  __device__ const int64_t* row(int64_t b) const {
    return p.token_ids_all + b * p.token_ids_stride;
  }
  __device__ int64_t row_len() const { return p.token_ids_stride; }

  // Only a processed slot (which slot() recorded with search set) is asked: the sum of I and ori_b.
  // It is at most B + 2^31 - 1: a larger threshold cannot bind and nothing is read.
  __host__ __device__ bool threshold_may_bind() const { return p.threshold <= p.batch + INT32_MAX; }
  __device__ int64_t give_up_term(int64_t b, int64_t j) const {
    return (p.seq_lens_decoder[j] > 0) + (j == b ? max_of<int64_t>(p.seq_lens_this_time[b], 0) : 0);
  }
  __device__ bool gives_up(int64_t, int64_t total) const { return total >= p.threshold; }

  // Called once per recorded slot, after every thread has read the slot's input entry.
  __device__ void store(int64_t b, int32_t code) const {
    const int64_t ori = max_of<int64_t>(p.seq_lens_this_time[b], 0);
    const HybridView v = hybrid_view(p, b);
    if (!hybrid_walk_slot(p, b, ori, v.s).processed) {
      p.seq_lens_this_time[b] = 0;
      return;
    }
    int64_t c = 0;
    if (code != kNoMatch) {
      const int64_t start = code & (kSeg1Bit - 1);
      c = 1 + ((code & kSeg1Bit) ? v.P + start : start);
    }
    p.seq_lens_this_time[b] = static_cast<int32_t>(-(ori + hybrid_max_ori(p) * c));
  }

  // The walk-free form (ngram_walk_free): slot b's outputs from its own search result, as the walk
  // writes them when every slot keeps its untruncated drafts (its entry is still the input). The
  // bound's terms read other slots' entries while their blocks may rewrite them:
  // hybrid_walk_free_term is the same for every value an entry takes (a volatile load: one value,
  // read once).
  __device__ int64_t free_term(int64_t j) const { return hybrid_free_term_now(p, j); }
  // The same term, loaded with the slot's own facts and summed later (the entry read once).
  struct FreeIn {
    int32_t entry, decoder;
  };
  __device__ FreeIn free_in(int64_t j) const {
    return FreeIn{*static_cast<const volatile int32_t*>(p.seq_lens_this_time + j),
                  p.seq_lens_decoder[j]};
  }
  __device__ int64_t free_of(int64_t, const FreeIn& in) const {
    return hybrid_walk_free_term(p, in.entry, in.decoder);
  }
  // Every term is at least A (hybrid_walk_free_term), so U >= B x A.
  bool free_possible() const { return hybrid_may_be_walk_free(p); }
  int prefetch = 0;  // set by launch_ngram_op
};

// Kernel 2's view of the walk: a negative entry is a processed slot's packed (ori, match).
struct HybridWalk : NgramOpView<HybridMtpNgramParams> {
  __device__ WalkOutputs outputs() const { return hybrid_outputs(p); }
  // Read before the walk waits for the search (which may be rewriting the entry): see HybridSearch.
  __device__ int64_t free_term(int64_t j) const { return hybrid_free_term_now(p, j); }

  __device__ DeviceWalkSlot slot(int64_t b) const {
    const int32_t entry = p.seq_lens_this_time[b];
    const HybridView v = hybrid_view(p, b);
    DeviceWalkSlot w;
    if (entry >= 0) {  // not processed: the entry is its (clamped) ori
      static_cast<WalkSlot&>(w) = hybrid_walk_slot(p, b, entry, v.s);
      return w;
    }
    const int64_t M = hybrid_max_ori(p);
    const int64_t packed = -static_cast<int64_t>(entry) - 1;
    const int64_t ori = packed % M + 1;
    const int64_t c = packed / M;
    static_cast<WalkSlot&>(w) = hybrid_walk_slot(p, b, ori, v.s);
    if (c == 0) return w;
    const int64_t start = c - 1;
    const bool in_prompt = start < v.P;
    w.src = in_prompt ? v.prompt + start : v.pre + (start - v.P);
    const int64_t avail = in_prompt ? v.P - start : v.s - (start - v.P);
    w.untruncated = min_of<int64_t>(avail, w.budget);
    return w;
  }
};

}  // namespace

cudaError_t hybrid_mtp_ngram_gpu(const HybridMtpNgramParams& p, cudaStream_t stream) {
  return launch_ngram_op(HybridSearch{p}, HybridWalk{p}, p.batch, p.max_ngram_size,
                         p.token_ids_stride + p.pre_ids_stride, stream);
}

}  // namespace fdspec
