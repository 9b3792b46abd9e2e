// verify_draft_tokens: CUDA implementation (rule in verify_draft_tokens.h). No Paddle include.
//
// G lanes per output row (speculate_common/slot_lanes.cuh), lane k at position k: the row's state,
// drafts and end tokens leave in one round trip, the position's target (or candidates) in a second;
// group ballots find the first rejected draft and the first emitted token that ends the row, and
// the row (tokens, then -1) is written by neighbouring lanes at once.
#include "verify_draft_tokens/verify_draft_tokens.h"

#include "common/cuda_utils.cuh"
#include "speculate_common/slot_lanes.cuh"

namespace fdspec {
namespace {

constexpr int kVerifyThreads = 128;

// Whether `draft` is among the first candidate_lens[r] candidates of packed row r; every candidate
// is read whatever the length, so that the loads leave together.
__device__ __forceinline__ bool topp_accepts(const VerifyDraftTokensParams& p, int64_t r,
                                             int64_t draft) {
  const int64_t C = p.num_candidates;
  const int64_t len = p.candidate_lens[r];
  const int64_t* ids = p.candidate_ids + r * C;
  bool hit = false;
  for (int64_t c = 0; c < C; ++c) hit |= c < len && ids[c] == draft;
  return hit;
}

__global__ void __launch_bounds__(kVerifyThreads)
    verify_draft_tokens_kernel(VerifyDraftTokensParams p, int lg) {
  wait_for_primary_grid();
  allow_dependent_launch();
  const SlotLanes g = slot_lanes(lg);
  const int64_t b = g.slot;
  const bool row = b < p.rows;
  const int64_t W = p.width, E = p.num_end_tokens, T = p.token_rows;
  const bool topp = p.strategy == VerifyStrategy::kTopp;
  // Round trip 1: the end tokens, the row's state and its drafts.
  const int64_t ends = warp_end_tokens(p.end_tokens, E);
  bool skip = true;
  int32_t enc = 0, reasoning = 0;
  int64_t slt = 0, r0 = -1, s = 0, max_dec = 0;
  if (row) {
    skip = static_cast<bool>(p.is_block_step[b] | p.stop_flags[b]);  // both loads at once
    enc = p.seq_lens_encoder[b];
    reasoning = p.reasoning_status[b];
    if (p.step_idx != nullptr) s = p.step_idx[b];
    if (p.max_dec_len != nullptr) max_dec = p.max_dec_len[b];
    if (b < p.batch) {
      slt = p.seq_lens_this_time[b];
      r0 = p.cu_seqlens_q_output[b];
    }
  }
  const bool active = row && b < p.batch && !skip && slt > 0 && r0 >= 0 && r0 < T;
  const int64_t positions = active ? min_of<int64_t>(min_of<int64_t>(slt, T - r0), W) : 0;
  const bool checked = !p.reject_all && enc == 0 && reasoning != 1;
  const int64_t drafts = checked && positions > 0 ? positions - 1 : 0;
  const int64_t end0 = __shfl_sync(kFullWarp, ends, 0);
  int64_t* out = p.step_output_ids + b * W;
  const int64_t* in = p.step_input_ids + b * W;
  // Tokens emitted; -1 while the row is open (it closes by position `drafts`, which never passes).
  int64_t n = active ? -1 : 0;
  for (int64_t c0 = 0; c0 < W; c0 += int64_t{1} << lg) {
    const int64_t k = c0 + g.lane;
    const bool is_draft = n < 0 && k < drafts;
    const int64_t draft = row && k + 1 < W ? in[k + 1] : 0;
    // Round trip 2: the position's target token or candidates.
    bool pass = false;
    int64_t target = 0;
    if (n < 0 && k < positions) {
      if (!topp) target = p.target_tokens[r0 + k];
      if (is_draft)
        pass = p.accept_all || (topp ? topp_accepts(p, r0 + k, draft) : target == draft);
    }
    const bool at_max = p.max_dec_len != nullptr && add_sat(s, k + 1) >= max_dec;
    const bool draft_eos = warp_is_end_token(draft, ends, p.end_tokens, E);
    const unsigned fails = group_ballot(g, !pass);
    const unsigned stops = group_ballot(g, pass && (draft_eos || at_max));
    int64_t token = draft;
    bool eos = draft_eos;
    int64_t fin = -1;  // the position that emits the target's token, in this chunk
    if (n < 0) {
      const int f = fails != 0 ? __ffs(static_cast<int>(fails)) - 1 : 32;
      const unsigned before = f >= 32 ? stops : stops & ((1u << f) - 1u);
      if (before != 0) {
        n = c0 + __ffs(static_cast<int>(before));
      } else if (fails != 0) {
        fin = c0 + f;
        n = fin + 1;
      }
    }
    if (k == fin) {
      token = topp ? verify_topp_draw(p, b, r0 + k, static_cast<uint64_t>(s) + k) : target;
    }
    const bool fin_eos = warp_is_end_token(token, ends, p.end_tokens, E);
    if (k == fin) eos = fin_eos;
    const bool emitted = n < 0 || k < n;
    if (emitted && k == (n < 0 ? -2 : n - 1) && at_max && !eos && E > 0) token = end0;
    if (row && k < W) out[k] = emitted ? token : -1;
  }
  if (row && g.lane == 0) p.step_output_len[b] = static_cast<int32_t>(max_of<int64_t>(n, 0));
}

}  // namespace

cudaError_t verify_draft_tokens_gpu(const VerifyDraftTokensParams& p, cudaStream_t stream) {
  if (p.rows <= 0) return cudaSuccess;
  const int lg = slot_lanes_log2(p.width);
  const int64_t blocks = ceil_div<int64_t>(p.rows << lg, kVerifyThreads);
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  const cudaError_t err =
      launch_dependent(verify_draft_tokens_kernel, dim3(static_cast<unsigned>(blocks)),
                       dim3(kVerifyThreads), stream, p, lg);
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
