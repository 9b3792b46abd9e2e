// speculate_verify_greedy: CPU implementation of the per-slot rule in speculate_verify_greedy.h.
#include "speculate_verify_greedy/speculate_verify_greedy.h"

namespace fdspec {

void speculate_verify_greedy_cpu(const SpeculateVerifyGreedyParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t D = verify_num_drafts(p, b);
    if (D < 0) {
      p.accept_num[b] = 0;
      continue;
    }
    int64_t first_cut = 0;
    while (!verify_cut(p, b, first_cut, D)) ++first_cut;  // ends: cut(D) holds
    const int64_t n = verify_accept_count(p, b, first_cut);
    const int64_t* target = p.target_tokens + b * p.width;
    int64_t* accepted = p.accept_tokens + b * p.width;
    for (int64_t j = 0; j < n; ++j) accepted[j] = target[j];
    p.accept_num[b] = static_cast<int32_t>(n);
  }
}

}  // namespace fdspec
