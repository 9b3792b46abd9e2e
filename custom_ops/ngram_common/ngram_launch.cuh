// The two launches of an n-gram op (ngram_match, hybrid_mtp_ngram): the search of ngram_search.cuh,
// itself a programmatic dependent of the work before it on the stream (on compute capability 9.0+:
// its blocks wait for that work before their first read, and only then let the walk launch), then
// the walk of ngram_walk.cuh as its programmatic dependent (which exits at once when the batch is
// walk-free, ngram_walk.h; the search blocks then finish their slots). No Paddle include.
// Design: docs/design/ngram.md.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "common/cuda_utils.cuh"
#include "ngram_common/ngram_search.cuh"
#include "ngram_common/ngram_walk.cuh"

namespace fdspec {

// The members that an op's Search and Walk share: its params, the walk-free flag launch_ngram_op
// sets in both, and the batch and threshold they read.
template <class Params>
struct NgramOpView {
  Params p;
  bool try_free = true;  // set by launch_ngram_op

  __device__ int64_t batch() const { return p.batch; }
  __device__ int64_t threshold() const { return p.threshold; }
};

// No allocation, no host synchronisation (CUDA-graph capturable). `max_tokens` bounds the tokens of
// a slot's two haystacks. Returns the launch status.
template <class Search, class Walk>
cudaError_t launch_ngram_op(const Search& search, const Walk& walk, int64_t batch, int max_n,
                            int64_t max_tokens, cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  DeviceFacts dev;  // cached per device
  cudaError_t err = current_device_facts(&dev);
  if (err != cudaSuccess) return err;
  // The walk-free test (the same flag for both kernels) runs only where it may hold
  // (Search::free_possible(), from the parameters) and where every search block is resident at once
  // (ngram_search_one_wave: B <= SMs, 2 x SMs for 512-thread blocks). With a second wave the walk
  // block starts only when the last search blocks do, and its test before the wait, a round trip
  // and a barrier, would lengthen a short op (measured at B = 256 where every slot gives up).
  KernelFeatures f;  // the search kernels' (one image), which the shape depends on
  err = kernel_features(
      ngram_search_kernel<0, kNgramSearchStages, false, kNgramSearchThreads, Search>, &f);
  if (err != cudaSuccess) return err;
  const NgramSearchShape sh = ngram_search_shape(batch, max_tokens, dev, f);
  Search s = search;
  Walk w = walk;
  s.try_free = w.try_free = ngram_search_one_wave(batch, sh, dev) && search.free_possible();
  s.prefetch = ngram_prefetch_bytes(sh, search.threshold_may_bind(), f);
  err = launch_ngram_search(s, batch, max_n, sh, stream);
  if (err != cudaSuccess) return err;
  err = launch_ngram_walk(w, stream);
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
