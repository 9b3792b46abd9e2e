// The nine shared inputs of the n-gram and suffix ops (speculate_common/draft_batch.h) over a
// harness's or benchmark's buffer set, host (std::vector) or device (DevVec), whose buffers carry
// the names ids, P, s, dtn, drafts, slt, enc, dec, mdl.
#pragma once

#include <cstdint>

#include "speculate_common/draft_batch.h"

namespace harness {

// Rows of ids W wide, of drafts K + 1.
template <class Buffers>
fdspec::DraftBatchParams draft_batch_of(Buffers& a, int64_t W, int64_t K) {
  fdspec::DraftBatchParams p;
  p.token_ids_all = a.ids.data();
  p.token_ids_stride = W;
  p.prompt_lens = a.P.data();
  p.step_idx = a.s.data();
  p.draft_token_num = a.dtn.data();
  p.draft_tokens = a.drafts.data();
  p.draft_stride = K + 1;
  p.seq_lens_this_time = a.slt.data();
  p.seq_lens_encoder = a.enc.data();
  p.seq_lens_decoder = a.dec.data();
  p.max_dec_len = a.mdl.data();
  return p;
}

}  // namespace harness
