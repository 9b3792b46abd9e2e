// suffix_cache: Paddle bindings of the global cache's ops (docs/contract/suffix.md, "The global
// cache"): suffix_cache_insert, suffix_cache_finish, suffix_cache_evict, suffix_cache_query and
// suffix_cache_step (the insert, then the query), each taking the cache's state (one byte tensor)
// and its configuration; suffix_cache_layout and suffix_cache_init, the state's layout and initial
// bytes for the Python SuffixCache (suffix_cache_state.h). Named checks, place dispatch.
#include <string>
#include <vector>

#include "suffix_cache/suffix_cache_state.h"
#include "suffix_match/suffix_match_binding.h"

namespace {

using paddle::DataType;

// The configuration attribute, checked (`what`: the op's name for it in errors).
fdspec::SuffixCacheConfig checked_config(const fdspec::binding::OpChecks& c,
                                         const std::vector<int64_t>& v) {
  c.that(v.size() == fdspec::kSuffixCacheConfigFields,
         "cache_config must have " + std::to_string(fdspec::kSuffixCacheConfigFields) +
             " values (rows, width, slots, key_len, max_occurrences, vocab_size, pair_vocab, "
             "line_planes), got " +
             std::to_string(v.size()));
  const fdspec::SuffixCacheConfig cfg{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  const std::string err = fdspec::suffix_cache_config_error(cfg);
  c.that(err.empty(), "cache_config: " + err);
  return cfg;
}

// The state tensor, checked against its configuration, into the kernels' view; `batch` slots must
// fit its per-slot parts.
fdspec::SuffixCacheStateView state_view(const fdspec::binding::OpChecks& c,
                                        const paddle::Tensor& state,
                                        const std::vector<int64_t>& config, int64_t batch) {
  const fdspec::SuffixCacheConfig cfg = checked_config(c, config);
  const int64_t total = fdspec::suffix_cache_layout(cfg).total;
  c.dtype(state, "cache_state", DataType::UINT8).rank(state, "cache_state", 1);
  c.that(state.numel() == total,
         "cache_state must have " + std::to_string(total) +
             " bytes (the layout of cache_config: SuffixCache.allocate), got " +
             fdspec::binding::shape_str(state))
      .that(reinterpret_cast<uintptr_t>(state.data<uint8_t>()) % 16 == 0,
            "cache_state must be 16-byte aligned (the GPU scan reads its statistics 16 bytes at a "
            "time)")
      .that(batch <= cfg.slots, "the batch must have at most the cache's slots = " +
                                    std::to_string(cfg.slots) + ", got " + std::to_string(batch));
  return fdspec::suffix_cache_state_view(cfg, const_cast<uint8_t*>(state.data<uint8_t>()));
}

// The insert's arguments, checked (op: the name its errors carry).
fdspec::SuffixCacheInsertParams insert_params(const char* op, const paddle::Tensor& token_ids_all,
                                              const paddle::Tensor& prompt_lens,
                                              const paddle::Tensor& step_idx,
                                              const paddle::Tensor& seq_lens_encoder,
                                              const paddle::Tensor& seq_lens_decoder,
                                              const paddle::Tensor& cache_state,
                                              const std::vector<int64_t>& cache_config) {
  const fdspec::binding::OpChecks c(op);
  FDSPEC_CHECK_DEFINED(c, token_ids_all, prompt_lens, step_idx, seq_lens_encoder, seq_lens_decoder,
                       cache_state);
  fdspec::SuffixCacheInsertParams p;
  p.batch = c.tensors(
      {FDSPEC_TENSORS(p, token_ids_all, prompt_lens, step_idx, seq_lens_encoder, seq_lens_decoder)},
      "seq_lens_encoder");
  c.that(token_ids_all.shape()[1] < fdspec::kMaxSuffixHistory,
         "token_ids_all is wider than the supported maximum of 2^30 tokens");
  c.same_place_as(token_ids_all, "token_ids_all", {{"cache_state", cache_state}});
  const fdspec::SuffixCacheStateView v = state_view(c, cache_state, cache_config, p.batch);
  p.token_ids_stride = token_ids_all.shape()[1];
  p.cache = v.cache;
  p.slots = v.slots;
  p.counter = v.counter;
  return p;
}

// The query's arguments, checked; the state's view from the insert's checks when given.
fdspec::SuffixCacheQueryParams query_params(
    const char* op, const fdspec::binding::DraftInputs& in, paddle::Tensor& suffix_tokens,
    paddle::Tensor& suffix_probs, paddle::Tensor& suffix_meta, paddle::Tensor& suffix_source,
    const paddle::Tensor& cache_state, const std::vector<int64_t>& cache_config, int max_tree_depth,
    float max_spec_factor, float max_spec_offset, float min_token_prob, int max_draft_tokens,
    bool pad_to_max, int64_t threshold) {
  FDSPEC_CHECK_DEFINED(fdspec::binding::OpChecks(op), suffix_source, cache_state);
  fdspec::SuffixCacheQueryParams q;
  q.m = fdspec::binding::suffix_match_params(
      op, in, suffix_tokens, suffix_probs, suffix_meta, max_tree_depth, max_spec_factor,
      max_spec_offset, min_token_prob, max_draft_tokens, pad_to_max, threshold);
  const fdspec::binding::OpChecks c(op);
  const int64_t B = q.m.batch;
  c.dtype(suffix_source, "suffix_source", DataType::INT32).rank(suffix_source, "suffix_source", 1);
  c.that(suffix_source.numel() >= B, "suffix_source must have at least B = " + std::to_string(B) +
                                         " elements, got " +
                                         fdspec::binding::shape_str(suffix_source))
      .that(B <= fdspec::kMaxSuffixCacheBatch, "the batch must have at most " +
                                                   std::to_string(fdspec::kMaxSuffixCacheBatch) +
                                                   " slots, got " + std::to_string(B));
#ifdef FDSPEC_WITH_CUDA
  if (!in.token_ids_all.is_cpu()) {  // the scan keeps ~50 B per slot in a block's shared memory
    int64_t max_batch = 0;
    fdspec::binding::check_cuda(fdspec::suffix_cache_max_batch_gpu(&max_batch), op);
    c.that(B <= max_batch,
           "on this GPU (its shared memory per block) the batch must have at most " +
               std::to_string(max_batch) + " slots, got " + std::to_string(B));
  }
#endif
  c.same_place_as(in.token_ids_all, "token_ids_all",
                  {{"suffix_source", suffix_source}, {"cache_state", cache_state}});
  const fdspec::SuffixCacheStateView v = state_view(c, cache_state, cache_config, B);
  q.cache = v.cache;
  q.source = suffix_source.data<int32_t>();
  q.cand = v.cand;
  q.stat = v.stat;
  q.line_mask = v.line_mask;
  q.max_occurrences = v.max_occurrences;
  return q;
}

}  // namespace

void SuffixCacheInsert(const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
                       const paddle::Tensor& step_idx, const paddle::Tensor& seq_lens_encoder,
                       const paddle::Tensor& seq_lens_decoder, paddle::Tensor& cache_state,
                       const std::vector<int64_t>& cache_config) {
  constexpr const char* kOp = "suffix_cache_insert";
  const fdspec::SuffixCacheInsertParams p =
      insert_params(kOp, token_ids_all, prompt_lens, step_idx, seq_lens_encoder, seq_lens_decoder,
                    cache_state, cache_config);
  FDSPEC_RUN_ON_PLACE(kOp, token_ids_all, p, fdspec::suffix_cache_insert_cpu,
                      fdspec::suffix_cache_insert_gpu);
}

void SuffixCacheFinish(const paddle::Tensor& finished, paddle::Tensor& cache_state,
                       const std::vector<int64_t>& cache_config) {
  constexpr const char* kOp = "suffix_cache_finish";
  const fdspec::binding::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, finished, cache_state);
  const int64_t B = c.batch(finished, "finished");
  c.dtype(finished, "finished", DataType::INT32).per_slot(finished, "finished", B);
  c.same_place_as(finished, "finished", {{"cache_state", cache_state}});
  const fdspec::SuffixCacheStateView v = state_view(c, cache_state, cache_config, B);
  FDSPEC_RUN_ON_PLACE_WITH(kOp, finished, fdspec::suffix_cache_finish_cpu,
                           fdspec::suffix_cache_finish_gpu, finished.data<int32_t>(), v.slots, B);
}

void SuffixCacheEvict(paddle::Tensor& cache_state, int64_t keep,
                      const std::vector<int64_t>& cache_config) {
  constexpr const char* kOp = "suffix_cache_evict";
  const fdspec::binding::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, cache_state);
  c.that(keep >= 0, "keep must be >= 0, got " + std::to_string(keep));
  const fdspec::SuffixCacheStateView v = state_view(c, cache_state, cache_config, 0);
  FDSPEC_RUN_ON_PLACE_WITH(kOp, cache_state, fdspec::suffix_cache_evict_cpu,
                           fdspec::suffix_cache_evict_gpu, v.cache, v.counter, keep);
}

// suffix_cache_query, and with kStep suffix_cache_step: the insert, then the query (the insert's
// arguments are among the query's: checked as by the two ops, all before anything runs; on the GPU
// one launch sequence, suffix_cache_step_gpu).
template <bool kStep>
void SuffixCacheQueryOrStep(const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
                            const paddle::Tensor& step_idx, const paddle::Tensor& draft_token_num,
                            paddle::Tensor& draft_tokens, paddle::Tensor& seq_lens_this_time,
                            const paddle::Tensor& seq_lens_encoder,
                            const paddle::Tensor& seq_lens_decoder,
                            const paddle::Tensor& max_dec_len, paddle::Tensor& suffix_tokens,
                            paddle::Tensor& suffix_probs, paddle::Tensor& suffix_meta,
                            paddle::Tensor& suffix_source, paddle::Tensor& cache_state,
                            int max_tree_depth, float max_spec_factor, float max_spec_offset,
                            float min_token_prob, int max_draft_tokens, bool pad_to_max,
                            int64_t threshold, const std::vector<int64_t>& cache_config) {
  constexpr const char* kOp = kStep ? "suffix_cache_step" : "suffix_cache_query";
  fdspec::SuffixCacheInsertParams ins;
  if (kStep) {
    ins = insert_params(kOp, token_ids_all, prompt_lens, step_idx, seq_lens_encoder,
                        seq_lens_decoder, cache_state, cache_config);
  }
  const fdspec::SuffixCacheQueryParams q =
      query_params(kOp,
                   {token_ids_all, prompt_lens, step_idx, draft_token_num, draft_tokens,
                    seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, max_dec_len},
                   suffix_tokens, suffix_probs, suffix_meta, suffix_source, cache_state,
                   cache_config, max_tree_depth, max_spec_factor, max_spec_offset, min_token_prob,
                   max_draft_tokens, pad_to_max, threshold);
  if (kStep) {
    FDSPEC_RUN_ON_PLACE_WITH(kOp, token_ids_all, fdspec::suffix_cache_step_cpu,
                             fdspec::suffix_cache_step_gpu, ins, q);
  } else {
    FDSPEC_RUN_ON_PLACE(kOp, token_ids_all, q, fdspec::suffix_cache_query_cpu,
                        fdspec::suffix_cache_query_gpu);
  }
}

// The layout of a configuration, into `layout` (int64 [2 * kSuffixParts + 2], host): each part's
// offset, then each part's bytes, then the state's bytes and the bytes per line of 32 positions.
void SuffixCacheLayoutOp(paddle::Tensor& layout, const std::vector<int64_t>& cache_config) {
  constexpr const char* kOp = "suffix_cache_layout";
  const fdspec::binding::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, layout);
  c.dtype(layout, "layout", DataType::INT64)
      .that(layout.is_cpu(), "layout must be on the CPU")
      .that(layout.numel() == 2 * fdspec::kSuffixParts + 2,
            "layout must have " + std::to_string(2 * fdspec::kSuffixParts + 2) + " elements, got " +
                fdspec::binding::shape_str(layout));
  const fdspec::SuffixCacheLayout l = fdspec::suffix_cache_layout(checked_config(c, cache_config));
  int64_t* out = layout.data<int64_t>();
  for (int p = 0; p < fdspec::kSuffixParts; ++p) {
    out[p] = l.offset[p];
    out[fdspec::kSuffixParts + p] = l.bytes[p];
  }
  out[2 * fdspec::kSuffixParts] = l.total;
  out[2 * fdspec::kSuffixParts + 1] = l.line_bytes;
}

// An empty cache's state, written into `cache_state` (host; SuffixCache copies it to its place).
void SuffixCacheInit(paddle::Tensor& cache_state, const std::vector<int64_t>& cache_config) {
  constexpr const char* kOp = "suffix_cache_init";
  const fdspec::binding::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, cache_state);
  c.that(cache_state.is_cpu(), "cache_state must be on the CPU");
  state_view(c, cache_state, cache_config, 0);
  fdspec::suffix_cache_state_init(checked_config(c, cache_config), cache_state.data<uint8_t>());
}

PD_BUILD_OP(suffix_cache_insert)
    .Inputs({"token_ids_all", "prompt_lens", "step_idx", "seq_lens_encoder", "seq_lens_decoder",
             "cache_state"})
    .Attrs({"cache_config: std::vector<int64_t>"}) FDSPEC_INPLACE_OUTPUTS("cache_state")
    .SetKernelFn(PD_KERNEL(SuffixCacheInsert));

PD_BUILD_OP(suffix_cache_finish)
    .Inputs({"finished", "cache_state"})
    .Attrs({"cache_config: std::vector<int64_t>"}) FDSPEC_INPLACE_OUTPUTS("cache_state")
    .SetKernelFn(PD_KERNEL(SuffixCacheFinish));

PD_BUILD_OP(suffix_cache_evict)
    .Inputs({"cache_state"})
    .Attrs({"keep: int64_t", "cache_config: std::vector<int64_t>"})
        FDSPEC_INPLACE_OUTPUTS("cache_state")
    .SetKernelFn(PD_KERNEL(SuffixCacheEvict));

#define FDSPEC_SUFFIX_CACHE_QUERY_OP(name, fn)                                                  \
  PD_BUILD_OP(name)                                                                             \
      .Inputs({"token_ids_all", "prompt_lens", "step_idx", "draft_token_num", "draft_tokens",   \
               "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "max_dec_len",     \
               "suffix_tokens", "suffix_probs", "suffix_meta", "suffix_source", "cache_state"}) \
      .Attrs({"max_tree_depth: int", "max_spec_factor: float", "max_spec_offset: float",        \
              "min_token_prob: float", "max_draft_tokens: int", "pad_to_max: bool",             \
              "threshold: int64_t", "cache_config: std::vector<int64_t>"})                      \
          FDSPEC_INPLACE_OUTPUTS("draft_tokens", "seq_lens_this_time", "suffix_tokens",         \
                                 "suffix_probs", "suffix_meta", "suffix_source", "cache_state") \
      .SetKernelFn(PD_KERNEL(fn))

FDSPEC_SUFFIX_CACHE_QUERY_OP(suffix_cache_query, SuffixCacheQueryOrStep<false>);
FDSPEC_SUFFIX_CACHE_QUERY_OP(suffix_cache_step, SuffixCacheQueryOrStep<true>);

PD_BUILD_OP(suffix_cache_layout)
    .Inputs({"layout"})
    .Attrs({"cache_config: std::vector<int64_t>"}) FDSPEC_INPLACE_OUTPUTS("layout")
    .SetKernelFn(PD_KERNEL(SuffixCacheLayoutOp));

PD_BUILD_OP(suffix_cache_init)
    .Inputs({"cache_state"})
    .Attrs({"cache_config: std::vector<int64_t>"}) FDSPEC_INPLACE_OUTPUTS("cache_state")
    .SetKernelFn(PD_KERNEL(SuffixCacheInit));
