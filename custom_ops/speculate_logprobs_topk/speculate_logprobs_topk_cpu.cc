// speculate_logprobs_topk: CPU implementation (docs/contract/logprobs.md). Straightforward passes
// over each row; the log-sum-exp accumulates in double.
#include <cmath>
#include <limits>
#include <vector>

#include "speculate_logprobs_topk/speculate_logprobs_topk.h"

namespace fdspec {
namespace {

void write_padding(const LogprobsTopkParams& p, int64_t r) {
  const int64_t cols = p.top_k + 1;
  for (int64_t c = 0; c < cols; ++c) {
    p.logprob_token_ids[r * cols + c] = kPadTokenId;
    p.logprob_scores[r * cols + c] = kPadScore;
  }
  p.logprob_ranks[r] = kPadRank;
}

}  // namespace

void logprobs_topk_cpu(const LogprobsTopkParams& p) {
  const int64_t V = p.vocab;
  const int k = p.top_k;
  const int64_t cols = k + 1;
  const int64_t valid = logprobs_valid_rows(p);
  std::vector<float> x(V);
  std::vector<float> top_v(k);
  std::vector<int32_t> top_i(k);
  for (int64_t r = 0; r < p.rows; ++r) {
    if (r >= valid) {
      write_padding(p, r);
      continue;
    }
    const float scale = logprobs_row_scale(p, r);
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < V; ++v) {
      x[v] = logit_as_float(p.logits, p.dtype, r * V + v) * scale;
      m = x[v] > m ? x[v] : m;
    }
    double lse = 0.0;  // every logit -inf: scores stay -inf, clipped
    if (m != -std::numeric_limits<float>::infinity()) {
      double s = 0.0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(x[v]) - m);
      lse = m + std::log(s);
    }
    auto score = [&](float xv) {
      return logprobs_clip(p.raw_logits ? xv : static_cast<float>(static_cast<double>(xv) - lse));
    };

    // Insertion into a sorted list, as the GPU's per-warp lists do; NaN never enters.
    for (int j = 0; j < k; ++j) {
      top_v[j] = -std::numeric_limits<float>::infinity();
      top_i[j] = kNoEntryId;
    }
    for (int64_t v = 0; v < V && k > 0; ++v) {
      const int32_t id = static_cast<int32_t>(v);
      if (!logprobs_better(x[v], id, top_v[k - 1], top_i[k - 1])) continue;
      int j = k - 1;
      for (; j > 0 && logprobs_better(x[v], id, top_v[j - 1], top_i[j - 1]); --j) {
        top_v[j] = top_v[j - 1];
        top_i[j] = top_i[j - 1];
      }
      top_v[j] = x[v];
      top_i[j] = id;
    }

    int64_t* ids = p.logprob_token_ids + r * cols;
    float* scores = p.logprob_scores + r * cols;
    const int64_t token = p.token_ids[r];
    ids[0] = token;
    if (token >= 0 && token < V) {
      int64_t rank = 0;
      for (int64_t v = 0; v < V; ++v) rank += x[v] >= x[token];
      scores[0] = score(x[token]);
      p.logprob_ranks[r] = rank;
    } else {
      scores[0] = kPadScore;
      p.logprob_ranks[r] = kPadRank;
    }
    for (int j = 0; j < k; ++j) {
      const bool entry = top_i[j] != kNoEntryId;
      ids[1 + j] = entry ? top_i[j] : kPadTokenId;
      scores[1 + j] = entry ? score(top_v[j]) : kPadScore;
    }
  }
}

}  // namespace fdspec
