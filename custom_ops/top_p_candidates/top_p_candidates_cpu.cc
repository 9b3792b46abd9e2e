// top_p_candidates: CPU implementation of the row rule in top_p_candidates.h.
#include "top_p_candidates/top_p_candidates.h"

#include <algorithm>
#include <vector>

namespace fdspec {

void top_p_candidates_cpu(const TopPCandidatesParams& p) {
  const int64_t C = p.num_candidates, V = p.vocab;
  const int64_t picks = min_of<int64_t>(C, V);
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::vector<float> key(static_cast<size_t>(V));
  for (int64_t t = 0; t < p.token_rows; ++t) {
    topp_zero_row(p, t, 0);
    p.lens[t] = 0;
    float top_p = 0.0f;
    if (!topp_row_top_p(p, t, &top_p) || picks <= 0) continue;
    const int64_t base = t * V;
    for (int64_t v = 0; v < V; ++v) {
      order[v] = v;
      key[v] = topp_rank_key(load_as_float(p.probs, p.dtype, base + v));
    }
    std::partial_sort(order.begin(), order.begin() + picks, order.end(), [&](int64_t a, int64_t b) {
      return topp_ranks_before(key[a], a, key[b], b);
    });
    float sum = 0.0f;
    int64_t len = picks;
    for (int64_t k = 0; k < picks; ++k) {
      p.ids[t * C + k] = order[k];
      topp_copy_score(p, t * C + k, base + order[k]);
      sum += load_as_float(p.probs, p.dtype, base + order[k]);
      if (sum >= top_p) {
        len = k + 1;
        break;
      }
    }
    p.lens[t] = static_cast<int32_t>(len);
  }
}

}  // namespace fdspec
