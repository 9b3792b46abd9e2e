// Lanes of a warp per slot, for the decode-step kernels whose slots own a short row of W tokens
// (verify_draft_tokens, unified_update_model_status). No Paddle include.
//
// A slot gets G = 2^lg lanes (the power of two >= min(W, 32)); lane k holds column k of the slot's
// row (then k + G, ... for rows wider than 32), so that a row is read and written by neighbouring
// lanes in one round trip instead of by one thread column after column. A group never straddles a
// warp, so that the group's ballot answers "the first column where ...".
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace fdspec {

constexpr unsigned kFullWarp = 0xFFFFFFFFu;

// log2 of the lanes a slot of W >= 1 columns gets.
inline int slot_lanes_log2(int64_t width) {
  int lg = 0;
  while (lg < 5 && (int64_t{1} << lg) < width) ++lg;
  return lg;
}

struct SlotLanes {
  int64_t slot;   // this thread's slot (may be past the last one: the thread then only votes)
  int lane;       // its column within each chunk of G columns
  int shift;      // the group's first lane within the warp
  unsigned mask;  // the group's lanes, unshifted: (1 << G) - 1
};

__device__ __forceinline__ SlotLanes slot_lanes(int lg) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  SlotLanes s;
  s.slot = t >> lg;
  s.lane = static_cast<int>(t & ((1 << lg) - 1));
  s.shift = static_cast<int>(threadIdx.x & 31) & ~((1 << lg) - 1);
  s.mask = lg == 5 ? kFullWarp : (1u << (1 << lg)) - 1u;
  return s;
}

// The group's votes of `pred`, bit k = lane k. Every lane of the warp must call it.
__device__ __forceinline__ unsigned group_ballot(const SlotLanes& s, bool pred) {
  return (__ballot_sync(kFullWarp, pred) >> s.shift) & s.mask;
}

// Lane l of the warp keeps end_tokens[l] (l < E) from one load; warp_is_end_token compares a
// token with all E of them through shuffles (32 more loads per lane only past 32 end tokens).
__device__ __forceinline__ int64_t warp_end_tokens(const int64_t* end_tokens, int64_t e) {
  const int l = static_cast<int>(threadIdx.x & 31);
  return l < e ? end_tokens[l] : 0;
}
__device__ __forceinline__ bool warp_is_end_token(int64_t token, int64_t first32,
                                                  const int64_t* end_tokens, int64_t e) {
  const int l = static_cast<int>(threadIdx.x & 31);
  bool eos = false;
  for (int64_t e0 = 0; e0 < e; e0 += 32) {  // the same trip count in every lane
    const int64_t mine = e0 == 0 ? first32 : (e0 + l < e ? end_tokens[e0 + l] : 0);
    const int count = static_cast<int>(e - e0 < 32 ? e - e0 : 32);
    for (int i = 0; i < count; ++i) eos |= __shfl_sync(kFullWarp, mine, i) == token;
  }
  return eos;
}

}  // namespace fdspec
