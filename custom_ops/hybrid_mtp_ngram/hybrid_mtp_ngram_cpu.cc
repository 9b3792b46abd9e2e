// hybrid_mtp_ngram: CPU implementation, the walk of docs/contract/ngram.md#hybrid_mtp_ngram
// (ngram_common/ngram_walk.h) with this op's slots and haystacks (and the clamps of
// hybrid_mtp_ngram.h).
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"

#include "ngram_common/ngram_search.h"

namespace fdspec {

void hybrid_mtp_ngram_cpu(const HybridMtpNgramParams& p) {
  ngram_walk_host(
      p.batch, p.threshold, hybrid_outputs(p),
      [&](int64_t b) { return hybrid_walk_slot(p, b, hybrid_ori(p, b), hybrid_view(p, b).s); },
      [&](int64_t b, int64_t budget) {
        return ngram_search_host(hybrid_haystacks(hybrid_view(p, b)), p.max_ngram_size,
                                 p.min_ngram_size, budget);
      });
}

}  // namespace fdspec
