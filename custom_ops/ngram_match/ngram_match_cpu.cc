// ngram_match: CPU implementation, the walk of docs/contract/ngram.md#ngram_match (ngram_common/ngram_walk.h) with this op's
// slots and haystacks.
#include "ngram_match/ngram_match.h"

#include "ngram_common/ngram_search.h"

namespace fdspec {
namespace {

struct NgramMatchHostWalk {
  const NgramMatchParams& p;

  int64_t batch() const { return p.batch; }
  int64_t threshold() const { return p.threshold; }
  WalkOutputs outputs() const { return ngram_match_outputs(p); }
  WalkSlot slot(int64_t b) const { return ngram_match_walk_slot(p, b, ngram_match_view(p, b).s); }

  NgramMatch search(int64_t b, int64_t budget) const {
    return ngram_search_host(ngram_match_haystacks(ngram_match_view(p, b)), p.max_ngram_size, 1,
                             budget);
  }
};

}  // namespace

void ngram_match_cpu(const NgramMatchParams& p) { ngram_walk_host(NgramMatchHostWalk{p}); }

}  // namespace fdspec
