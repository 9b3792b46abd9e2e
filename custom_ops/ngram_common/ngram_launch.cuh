// The two launches of an n-gram op (ngram_match, hybrid_mtp_ngram): the search of ngram_search.cuh,
// then the walk of ngram_walk.cuh as its programmatic dependent (which exits at once when the batch
// is walk-free, ngram_walk.h; the search blocks then finish their slots). No Paddle include.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "common/cuda_utils.cuh"
#include "ngram_common/ngram_search.cuh"
#include "ngram_common/ngram_walk.cuh"

namespace fdspec {

// No allocation, no host synchronisation (CUDA-graph capturable). `max_tokens` bounds the tokens of a
// slot's two haystacks. Returns the launch status.
template <class Search, class Walk>
cudaError_t launch_ngram_op(const Search& search, const Walk& walk, int64_t batch, int max_n,
                            int64_t max_tokens, cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  cudaError_t err = launch_ngram_search(search, batch, max_n, max_tokens, stream);
  if (err != cudaSuccess) return err;
  err = launch_ngram_walk(walk, stream);
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
