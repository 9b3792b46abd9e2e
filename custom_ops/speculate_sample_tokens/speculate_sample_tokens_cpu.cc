// speculate_sample_tokens: CPU implementation (docs/contract/sampling.md). No Paddle include.
//
// The definition in the header, written as directly as possible: weigh every entry, sort those that
// carry weight, cut top-k, min-p and top-p, draw. The GPU reaches the same token without sorting.
#include <algorithm>
#include <vector>

#include "speculate_sample_tokens/speculate_sample_tokens.h"

namespace fdspec {
namespace {

float logit_at(const SampleTokensParams& p, int64_t r, int64_t v) {
  return logit_as_float(p.logits, p.dtype, r * p.vocab + v);
}

struct Weighed {
  uint64_t ord;
  uint64_t w;
  int bucket;
  uint32_t id;
};

int64_t sample_row(const SampleTokensParams& p, int64_t r, std::vector<Weighed>& es) {
  const SampleRowParams rp = sample_row_params(p, r);
  uint64_t best = 0;
  for (int64_t v = 0; v < p.vocab; ++v) {
    best = std::max(best, sample_ord(sample_key(logit_at(p, r, v)), static_cast<uint32_t>(v)));
  }
  const float M = sample_key_to_float(static_cast<uint32_t>(best >> 32));
  if (rp.greedy || !(M >= -FLT_MAX && M <= FLT_MAX)) return sample_ord_id(best);

  es.clear();
  for (int64_t v = 0; v < p.vocab; ++v) {
    const float x = logit_at(p, r, v);
    const float t = sample_t(x, M, rp.c);
    const uint64_t w = sample_weight(t);
    if (w >= rp.min_weight) {
      es.push_back({sample_ord(sample_key(x), static_cast<uint32_t>(v)), w, sample_bucket(t),
                    static_cast<uint32_t>(v)});
    }
  }
  std::sort(es.begin(), es.end(), [](const Weighed& a, const Weighed& b) { return a.ord > b.ord; });
  // The maximum itself always carries 2^40 >= min_weight, so `es` is not empty.
  const size_t n_a = rp.top_k > 0 ? std::min(es.size(), static_cast<size_t>(rp.top_k)) : es.size();
  uint64_t mass_a = 0;
  for (size_t i = 0; i < n_a; ++i) mass_a += es[i].w;
  const uint64_t target = sample_topp_target(mass_a, rp.p24);
  size_t n_s = 0;
  uint64_t mass_s = 0;
  while (n_s < n_a && mass_s < target) mass_s += es[n_s++].w;

  es.resize(n_s);
  std::sort(es.begin(), es.end(), [](const Weighed& a, const Weighed& b) {
    return a.bucket != b.bucket ? a.bucket < b.bucket : a.id < b.id;
  });
  const uint64_t u = sample_draw_in(rp, mass_s);
  uint64_t cum = 0;
  for (const Weighed& e : es) {
    cum += e.w;
    if (u < cum) return e.id;
  }
  return es.back().id;  // unreachable: u < mass_s
}

}  // namespace

void sample_tokens_cpu(const SampleTokensParams& p) {
  const int64_t valid = sample_valid_rows(p);
  std::vector<Weighed> es;
  for (int64_t r = 0; r < p.rows; ++r) {
    p.sampled_tokens[r] = r < valid ? sample_row(p, r, es) : kSamplePadToken;
  }
}

}  // namespace fdspec
