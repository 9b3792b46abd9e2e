// Philox-4x32-10, the counter-based generator of every random draw in the library (CPU and GPU give
// the same numbers bit for bit). No Paddle or CUDA include: compiled by g++ in a CPU-only build.
//
// A draw is named, never stateful: key = the request's 64-bit seed, counter = (position, stream).
// `position` counts what the draw is for (a request's output token j); `stream` says which op
// draws, so two ops never share numbers. Replaying a captured graph draws new numbers only because
// the position it reads from a device tensor has advanced. Design: docs/design/randomness.md.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"

namespace fdspec {

// Which draw of a request a counter names. One list for the whole library.
enum class RngStream : uint32_t {
  kSample = 0,      // the target's sampled token at output position j (sampling op)
  kVerifyTopp = 1,  // verify_draft_tokens' TOPP draw from the candidate set at output position j
};

struct Philox4x32 {
  uint32_t v[4];
};

FDSPEC_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// The 10-round Philox-4x32 bijection of Salmon et al. (SC'11), as in Random123 and cuRAND.
FDSPEC_HD Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u,
                     kW1 = 0xBB67AE85u;  // key schedule (golden ratio, sqrt(3) - 1)
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, ctr.v[0], &hi0, &lo0);
    philox_mulhilo(kM1, ctr.v[2], &hi1, &lo1);
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
  }
  return ctr;
}

// The four words drawn for (seed, position, stream); `lane` (0..2^32-1) names a further block of
// four words when one draw needs more.
FDSPEC_HD Philox4x32 philox_draw(uint64_t seed, uint64_t position, RngStream stream,
                                 uint32_t lane = 0) {
  const Philox4x32 ctr{{static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32),
                        static_cast<uint32_t>(stream), lane}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// A word's top 24 bits as a float in [0, 1): exact in binary32, so CPU and GPU agree bit for bit.
FDSPEC_HD float philox_to_unit_float(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// The first uniform of a draw, in [0, 1).
FDSPEC_HD float philox_uniform(uint64_t seed, uint64_t position, RngStream stream) {
  return philox_to_unit_float(philox_draw(seed, position, stream).v[0]);
}

}  // namespace fdspec
