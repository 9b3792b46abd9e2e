// The inputs and in-place outputs that the n-gram and suffix proposers share: FastDeploy's nine
// share-input tensors (docs/contract/ngram.md#ngram_match) and their row strides. The ops' params
// structs start with it, so their layout and field names are these. No Paddle include.
#pragma once

#include <cstdint>

namespace fdspec {

struct DraftBatchParams {
  const int64_t* token_ids_all;     // [>= B, W] int64: prompt then generated tokens, -1 padded
  int64_t token_ids_stride;         // W (below the op's history bound)
  const int64_t* prompt_lens;       // [B] int64: P, clamped to [0, W]
  const int64_t* step_idx;          // [B] int64: s, generated tokens, clamped to [0, W - P]
  const int32_t* draft_token_num;   // [B] int32: per-slot draft cap
  int64_t* draft_tokens;            // [B, K + 1] int64, in place: columns 1 .. kept written
  int64_t draft_stride;             // K + 1 (>= 1; the op may bound it)
  int32_t* seq_lens_this_time;      // [B] int32, in place: 1 + drafts for decoding slots, 0 empty
  const int32_t* seq_lens_encoder;  // [B] int32: > 0 marks a prefill slot (left untouched)
  const int32_t* seq_lens_decoder;  // [B] int32: 0 marks an empty slot
  const int64_t* max_dec_len;       // [B] int64
};

}  // namespace fdspec
