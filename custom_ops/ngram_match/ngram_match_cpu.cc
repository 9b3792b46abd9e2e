// ngram_match: CPU implementation, the walk of docs/contract/ngram.md#ngram_match
// (ngram_common/ngram_walk.h) with this op's slots and haystacks.
#include "ngram_match/ngram_match.h"

#include "ngram_common/ngram_search.h"

namespace fdspec {

void ngram_match_cpu(const NgramMatchParams& p) {
  ngram_walk_host(
      p.batch, p.threshold, ngram_match_outputs(p),
      [&](int64_t b) { return ngram_match_walk_slot(p, b, ngram_match_slot_in(p, b)); },
      [&](int64_t b, int64_t budget) {
        return ngram_search_host(ngram_match_haystacks(ngram_match_view(p, b)), p.max_ngram_size, 1,
                                 budget);
      });
}

}  // namespace fdspec
