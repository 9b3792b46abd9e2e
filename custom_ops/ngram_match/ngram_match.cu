// ngram_match: CUDA implementation (docs/contract/ngram.md#ngram_match). No Paddle include.
//
// Kernel 1 (one block, or a cluster, per slot) finds each decoding slot's best match with the
// budget-independent search of ngram_search.cuh: which window wins does not depend on the budget,
// only how many tokens of its continuation are kept. Kernel 2 (one block) is the walk of
// ngram_common/ngram_walk.cuh, exact here because a decoding slot's base is 1 and every other slot
// keeps its length (a negative prefill length, which no runner produces, sends it to its sequential
// form). The search result waits between the kernels in the decoding slot's own seq_lens_this_time
// entry, whose input value the walk never reads for such a slot (ngram_match_walk_slot): no
// workspace, graph capturable. Walk-free batches (ngram_walk.h's bound; the default T = 128 with B
// x (K + 1) plus the prefill slots' lengths and count below it): kernel 1's blocks write their
// slots' outputs and kernel 2 exits before its wait. The bound reads only inputs no kernel writes
// (a prefill slot's seq_lens_this_time is left untouched by every path), so kernel 2 reads them
// before the search ends. Design: docs/design/ngram.md.
#include "ngram_match/ngram_match.h"

#include "common/cuda_utils.cuh"
#include "ngram_common/ngram_launch.cuh"

namespace fdspec {
namespace {

// Search problem of kernel 1.
struct NgramMatchSearch : NgramOpView<NgramMatchParams> {
  __device__ WalkOutputs outputs() const { return ngram_match_outputs(p); }

  __device__ SearchSlot slot(int64_t b) const {
    const NgramMatchSlotIn in = ngram_match_slot_in(p, b);
    const NgramMatchView v = ngram_match_view(p, b, in);
    const WalkSlot w = ngram_match_walk_slot(p, b, in);
    SearchSlot out;
    out.walk = w;
    if (!w.processed) return out;  // not recorded: kernel 2 handles the slot
    out.record = true;
    out.h = ngram_match_haystacks(v);
    out.cap = static_cast<int>(min_of<int64_t>(p.max_ngram_size, v.s));
    out.min_n = 1;
    out.search = w.budget > 0;
    return out;
  }

  // The row whose first tokens are the prompt (the search's first haystack), for its L2 prefetch.
  __device__ const int64_t* row(int64_t b) const {
    return p.token_ids_all + b * p.token_ids_stride;
  }
  __device__ int64_t row_len() const { return p.token_ids_stride; }

  // A decoding slot that gives up whatever the earlier slots draft needs no search:
  // G_b >= I + (lengths of the prefill slots before b), I being the initial `unprocessed`, because
  // every earlier decoding slot adds at least 1 to S and takes 1 from L. With a batch larger than
  // the threshold every slot gives up this way and the op reads no haystack. The sum is at most
  // B * 2^31 (a count plus int32 lengths): a larger threshold cannot bind and nothing is read.
  __host__ __device__ bool threshold_may_bind() const {
    return p.threshold - 1 <= p.batch * (int64_t{1} << 31);
  }
  __device__ int64_t give_up_term(int64_t b, int64_t j) const {
    const int32_t e = p.seq_lens_encoder[j];
    return (e > 0 || p.seq_lens_decoder[j] > 0) + (j < b && e > 0 ? p.seq_lens_this_time[j] : 0);
  }
  __device__ bool gives_up(int64_t, int64_t total) const { return total >= p.threshold - 1; }

  __device__ void store(int64_t b, int32_t code) const { p.seq_lens_this_time[b] = code; }

  // The walk-free form (ngram_walk_free): slot b's outputs from its own search result, as the walk
  // writes them when every slot keeps its untruncated drafts. The bound's terms read only inputs no
  // block writes (a prefill slot's seq_lens_this_time is untouched).
  __device__ int64_t free_term(int64_t j) const { return ngram_match_walk_free_term(p, j); }
  // The same term, loaded with the slot's own facts and summed later.
  using FreeIn = NgramMatchSlotIn;
  __device__ FreeIn free_in(int64_t j) const { return ngram_match_slot_in(p, j); }
  __device__ int64_t free_of(int64_t j, const FreeIn& in) const {
    return ngram_match_walk_free_term(p, j, in);
  }
  // No lower bound of U follows from the parameters alone (empty slots add nothing).
  bool free_possible() const { return true; }
  int prefetch = 0;  // set by launch_ngram_op
};

// Kernel 2's view of the walk.
struct NgramMatchWalk : NgramOpView<NgramMatchParams> {
  __device__ WalkOutputs outputs() const { return ngram_match_outputs(p); }
  __device__ int64_t free_term(int64_t j) const { return ngram_match_walk_free_term(p, j); }

  __device__ DeviceWalkSlot slot(int64_t b) const {
    const NgramMatchSlotIn in = ngram_match_slot_in(p, b);
    const NgramMatchView v = ngram_match_view(p, b, in);
    DeviceWalkSlot w;
    static_cast<WalkSlot&>(w) = ngram_match_walk_slot(p, b, in);
    if (!w.processed) return w;
    const NgramMatch m = decode_search_result(p.seq_lens_this_time[b], ngram_match_haystacks(v));
    w.src = m.src;
    w.untruncated = max_of<int64_t>(min_of<int64_t>(m.count, w.budget), 0);
    return w;
  }
};

}  // namespace

cudaError_t ngram_match_gpu(const NgramMatchParams& p, cudaStream_t stream) {
  return launch_ngram_op(NgramMatchSearch{p}, NgramMatchWalk{p}, p.batch, p.max_ngram_size,
                         p.token_ids_stride, stream);
}

}  // namespace fdspec
