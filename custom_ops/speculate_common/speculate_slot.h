// Slot states and end-token test shared by the verification and update ops. No Paddle include.
//
// A runner slot is in one of three states, read from its sequence lengths exactly as ngram_match
// reads them (docs/contract/ngram.md#ngram_match), so that every op of a decode step agrees on
// which slots take part:
//   prefill  seq_lens_encoder > 0: the prompt is processed this step, the target yields one token;
//   decoding otherwise, seq_lens_decoder != 0: the last accepted token plus the drafts are
//   verified; empty    otherwise (no request, or one that finished).
// A slot whose stop flag is set counts as empty whatever its lengths say. A prefill or decoding
// slot whose seq_lens_this_time is <= 0 was not scheduled this step (upstream's is_block_step): the
// verification and update ops leave it alone.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"

namespace fdspec {

enum class SlotKind : int { kEmpty = 0, kPrefill = 1, kDecoding = 2 };

FDSPEC_HD SlotKind slot_kind(bool stopped, int32_t enc, int32_t dec) {
  if (stopped) return SlotKind::kEmpty;
  if (enc > 0) return SlotKind::kPrefill;
  return dec != 0 ? SlotKind::kDecoding : SlotKind::kEmpty;
}

// True when `token` is one of the `n` end tokens (n is small: a handful of EOS ids).
FDSPEC_HD bool is_end_token(int64_t token, const int64_t* end_tokens, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (end_tokens[i] == token) return true;
  }
  return false;
}

}  // namespace fdspec
