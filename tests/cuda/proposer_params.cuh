// Parameters of the proposer ops (n-gram, hybrid, MTP) over one set of buffers, host or device,
// filled in one place for the harnesses and the benchmarks:
//   ngram_match, hybrid_mtp_ngram over a buffer set with the names ids, P, s, pre, dtn, drafts,
//   slt, enc, dec, mdl (ngram_match_vs_cpu.cu, hybrid_mtp_ngram_vs_cpu.cu, bench_ngram_kernels.cu);
//   the fused greedy MTP ops (custom_ops/draft_model) and the hybrid_mtp_ngram that ends their step
//   (draft_model_vs_cpu.cu, bench_mtp_kernels.cu, bench_mtp_state.cu);
//   FastDeploy's MTP bookkeeping ops (custom_ops/mtp_state: mtp_state_vs_cpu.cu,
//   bench_mtp_state.cu).
#pragma once

#include <cstdint>

#include "draft_batch_of.cuh"
#include "draft_model/draft_model.h"
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"
#include "mtp_state/mtp_state.h"
#include "ngram_match/ngram_match.h"

namespace harness {

// ngram_match over a buffer set (std::vector or DevVec: data() gives the first element): rows of
// ids W wide, of drafts K + 1.
template <class Buffers>
fdspec::NgramMatchParams ngram_match_params_of(Buffers& a, int64_t B, int64_t W, int64_t K,
                                               int max_ngram, int64_t max_draft, bool pad,
                                               int64_t threshold) {
  return {draft_batch_of(a, W, K), B, max_ngram, max_draft, pad, threshold};
}

// hybrid_mtp_ngram over a buffer set: rows of ids W wide, of pre D, of drafts K1.
template <class Buffers>
fdspec::HybridMtpNgramParams hybrid_params_of(Buffers& a, int64_t B, int64_t W, int64_t D,
                                              int64_t K1, int max_ngram, int min_ngram,
                                              int64_t max_draft, bool pad, int64_t threshold) {
  fdspec::HybridMtpNgramParams p;
  p.token_ids_all = a.ids.data();
  p.token_ids_stride = W;
  p.prompt_lens = a.P.data();
  p.pre_ids = a.pre.data();
  p.pre_ids_stride = D;
  p.step_idx = a.s.data();
  p.draft_tokens = a.drafts.data();
  p.draft_stride = K1;
  p.seq_lens_this_time = a.slt.data();
  p.seq_lens_decoder = a.dec.data();
  p.max_dec_len = a.mdl.data();
  p.batch = B;
  p.max_ngram_size = max_ngram;
  p.min_ngram_size = min_ngram;
  p.max_draft_tokens = max_draft;
  p.pad_to_max = pad;
  p.threshold = threshold;
  return p;
}

// The fused step's tensors: the accept + preprocess's params (the draft side that
// MTPProposer(ops="fused") keeps and the target's tensors it reads; their .preprocess() and
// .accept() give the other two ops'), and what the update and the hybrid_mtp_ngram also use.
struct FusedMtpPtrs {
  fdspec::DraftModelAcceptPreprocessParams ap;
  int64_t vocab;          // V
  int64_t* draft_tokens;  // [B, K + 1], in place: the target's drafts

  const fdspec::DraftModelAcceptPreprocessParams& accept_preprocess() const { return ap; }
  // The other two in their params structs' field order (draft_model.h, hybrid_mtp_ngram.h).
  // Draft-model step `substep` with its logits [>= B, V] of type `dtype`.
  fdspec::DraftModelGreedyUpdateParams update(
      const void* logits, int substep,
      fdspec::LogitsDType dtype = fdspec::LogitsDType::kFloat32) const {
    return {logits,
            dtype,
            vocab,
            ap.input_ids,
            ap.seq_lens_decoder,
            ap.step_idx,
            ap.pre_ids,
            ap.pre_ids_stride,
            ap.mtp_draft_num,
            draft_tokens,
            ap.width,
            ap.base_model_seq_lens_this_time,
            substep,
            ap.batch};
  }
  // hybrid_mtp_ngram after the draft model's steps: the draft side's pre_ids and lengths, the
  // target's drafts and seq_lens_this_time, prompts token_ids_all [>= B, W]; no padding.
  fdspec::HybridMtpNgramParams hybrid(const int64_t* token_ids_all, int64_t W,
                                      const int64_t* prompt_lens, int max_ngram, int min_ngram,
                                      int64_t max_draft, int64_t threshold) const {
    return {token_ids_all,
            W,
            prompt_lens,
            ap.pre_ids,
            ap.pre_ids_stride,
            ap.step_idx,
            draft_tokens,
            ap.width,
            ap.base_model_seq_lens_this_time,
            ap.seq_lens_decoder,
            ap.max_dec_len,
            ap.batch,
            max_ngram,
            min_ngram,
            max_draft,
            false,
            threshold};
  }
};

// FastDeploy's bookkeeping ops' tensors (draft_model_preprocess, draft_model_update,
// draft_model_postprocess, draft_model_set_value_by_flags): the draft side, then the target's (t*).
// As vectors, a list for HARNESS_VECTORS / HARNESS_MIRROR (harness.cuh), bools as bytes:
// clang-format off
#define MTP_STATE_ARRAYS(X)                                                                 \
  X(int64_t, draft) X(int64_t, input_ids) X(int64_t, step) X(int64_t, pre) X(int64_t, acc)  \
  X(int64_t, tstep) X(int64_t, max_dec) X(int64_t, tdraft) X(int64_t, next) X(int32_t, slt) \
  X(int32_t, enc) X(int32_t, dec) X(int32_t, acc_num) X(int32_t, tenc) X(int32_t, tdec)     \
  X(uint8_t, stop) X(uint8_t, tstop) X(uint8_t, nns)
// clang-format on
// As pointers, with the sizes:
struct MtpStatePtrs {
  int64_t B, W, D, L, N;  // slots, K + 1 (every token row), pre_ids and input_ids widths, tokens
                          // sampled (inter_next_tokens)
  int64_t *draft, *input_ids, *step, *pre, *acc, *tstep, *max_dec, *tdraft, *next;
  int32_t *slt, *enc, *dec, *acc_num, *tenc, *tdec;
  bool *stop, *tstop, *nns;

  // The fields the preprocess and the update share (same names in both params structs).
  template <class P>
  P draft_side() const {
    P p{};
    p.draft_tokens = draft;
    p.draft_tokens_stride = W;
    p.pre_ids = pre;
    p.pre_ids_stride = D;
    p.stop_flags = stop;
    p.seq_lens_this_time = slt;
    p.seq_lens_encoder = enc;
    p.seq_lens_decoder = dec;
    p.step_idx = step;
    p.not_need_stop = nns;
    p.max_dec_len = max_dec;
    p.batch = B;
    return p;
  }
  fdspec::MtpPreprocessParams preprocess(int64_t num_model_step, bool splitwise) const {
    auto p = draft_side<fdspec::MtpPreprocessParams>();
    p.input_ids = input_ids;
    p.input_ids_stride = L;
    p.accept_tokens = acc;
    p.accept_stride = W;
    p.accept_num = acc_num;
    p.target_model_seq_lens_encoder = tenc;
    p.target_model_seq_lens_decoder = tdec;
    p.target_model_step_idx = tstep;
    p.target_model_stop_flags = tstop;
    p.target_model_draft_tokens = tdraft;
    p.target_draft_stride = W;
    p.num_model_step = num_model_step;
    p.is_splitwise_prefill = splitwise;
    return p;
  }
  fdspec::MtpUpdateParams update(int64_t substep) const {
    auto p = draft_side<fdspec::MtpUpdateParams>();
    p.inter_next_tokens = next;
    p.next_tokens_len = N;
    p.base_model_draft_tokens = tdraft;
    p.base_draft_stride = W;
    p.substep = substep;
    return p;
  }
  // The short ones in their params structs' field order (custom_ops/mtp_state/mtp_state.h).
  // target_slt: the target's seq_lens_this_time.
  fdspec::MtpPostprocessParams postprocess(int32_t* target_slt) const {
    return {tdraft, W, target_slt, tenc, tstop, B};
  }
  fdspec::MtpSetValueByFlagsParams set_value_by_flags() const {
    return {draft, W, pre, D, stop, slt, step, B};
  }
};

// The MtpStatePtrs of a set of vectors with those names (std::vector or DevVec; bools as bytes).
template <class S>
MtpStatePtrs mtp_state_ptrs(S& s, int64_t B, int64_t W, int64_t D, int64_t L, int64_t N) {
  return {B,
          W,
          D,
          L,
          N,
          s.draft.data(),
          s.input_ids.data(),
          s.step.data(),
          s.pre.data(),
          s.acc.data(),
          s.tstep.data(),
          s.max_dec.data(),
          s.tdraft.data(),
          s.next.data(),
          s.slt.data(),
          s.enc.data(),
          s.dec.data(),
          s.acc_num.data(),
          s.tenc.data(),
          s.tdec.data(),
          reinterpret_cast<bool*>(s.stop.data()),
          reinterpret_cast<bool*>(s.tstop.data()),
          reinterpret_cast<bool*>(s.nns.data())};
}

// The hidden-state gathers' parameters: `rows` rows of `row_bytes` from `in` to `out`.
inline fdspec::HiddenGatherParams hidden_gather_params(fdspec::HiddenGather kind, const void* in,
                                                       void* out, int32_t* count, int64_t rows,
                                                       int64_t row_bytes, const int32_t* slt,
                                                       const int32_t* enc, const int32_t* acc,
                                                       const int32_t* base, const int32_t* last,
                                                       int64_t batch) {
  return {kind, in, out, count, rows, row_bytes, slt, enc, acc, base, last, batch};
}

}  // namespace harness
