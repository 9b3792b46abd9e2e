// suffix_cache: Paddle bindings of the global cache's ops (docs/contract/suffix.md, "The global
// cache"): suffix_cache_insert, suffix_cache_finish, suffix_cache_evict, suffix_cache_query and
// suffix_cache_step (the insert, then the query). Named checks, place dispatch.
#include <string>

#include "suffix_cache/suffix_cache.h"
#include "suffix_match/suffix_match_binding.h"

namespace {

using paddle::DataType;

// The cache tensors: checked together, with the key length, into the kernel's view of the cache.
// The query only reads the cache (const tensors); the view's pointers are writable for the insert.
fdspec::SuffixCache cache_view(const fdspec::binding::OpChecks& c, const paddle::Tensor& first,
                               const char* first_name, const paddle::Tensor& tokens,
                               const paddle::Tensor& keys, const paddle::Tensor& rows,
                               const paddle::Tensor& counts, const paddle::Tensor& pairs,
                               const paddle::Tensor& lines, int key_len) {
  c.dtype(tokens, "cache_tokens", DataType::INT64)
      .dtype(keys, "cache_keys", DataType::INT32)
      .dtype(rows, "cache_rows", DataType::INT64)
      .dtype(counts, "cache_counts", DataType::INT32)
      .dtype(pairs, "cache_pairs", DataType::INT32)
      .dtype(lines, "cache_lines", DataType::INT32)
      .rank(tokens, "cache_tokens", 2)
      .rank(keys, "cache_keys", 2)
      .rank(rows, "cache_rows", 2)
      .rank(counts, "cache_counts", 1)
      .rank(pairs, "cache_pairs", 2)
      .rank(lines, "cache_lines", 2);
  const int64_t R = tokens.shape()[0];
  const int64_t width = tokens.shape()[1];
  c.that(R >= 1 && R <= fdspec::kMaxSuffixCacheRows,
         "cache_tokens must have 1 to 2^30 rows, got " + fdspec::binding::shape_str(tokens))
      .that(width >= 1 && width <= fdspec::kMaxSuffixCacheWidth,
            "cache_tokens must have 1 to 65536 columns, got " + fdspec::binding::shape_str(tokens))
      .that(keys.shape() == tokens.shape(),
            "cache_keys must have the shape of cache_tokens " + fdspec::binding::shape_str(tokens) +
                ", got " + fdspec::binding::shape_str(keys))
      .that(rows.shape()[0] == R && rows.shape()[1] == 2,
            "cache_rows must have shape [" + std::to_string(R) + ", 2], got " +
                fdspec::binding::shape_str(rows))
      .that(key_len >= 1 && key_len <= fdspec::kMaxSuffixCacheKeyLen,
            "key_len must be in [1, " + std::to_string(fdspec::kMaxSuffixCacheKeyLen) + "], got " +
                std::to_string(key_len));
  c.that(counts.numel() >= 1 && counts.numel() <= fdspec::kMaxSuffixCacheVocab,
         "cache_counts must have 1 to 2^31 elements, got " + fdspec::binding::shape_str(counts))
      .that(pairs.shape()[0] == pairs.shape()[1] && pairs.shape()[0] <= fdspec::kMaxSuffixCachePairVocab,
            "cache_pairs must have shape [F, F] with F in [0, " +
                std::to_string(fdspec::kMaxSuffixCachePairVocab) + "], got " +
                fdspec::binding::shape_str(pairs));
  const int64_t planes = lines.shape()[0];
  const int64_t words = fdspec::suffix_line_words(R, width);
  c.that(lines.shape()[1] == words &&
             (planes == 0 || (planes >= fdspec::kMinSuffixCacheLinePlanes &&
                              planes <= fdspec::kMaxSuffixCacheLinePlanes && (planes & (planes - 1)) == 0)),
         "cache_lines must have shape [P, " + std::to_string(words) +
             "] (a bit per line of 32 positions of cache_tokens) with P 0 or a power of two in [32, 32768], got " +
             fdspec::binding::shape_str(lines));
  c.same_place_as(first, first_name,
                  {{"cache_tokens", tokens}, {"cache_keys", keys}, {"cache_rows", rows},
                   {"cache_counts", counts}, {"cache_pairs", pairs}, {"cache_lines", lines}});
  const bool counted = R * width < (int64_t{1} << 31);  // no int32 count can overflow
  return fdspec::SuffixCache{const_cast<int64_t*>(tokens.data<int64_t>()),
                             const_cast<int32_t*>(keys.data<int32_t>()),
                             const_cast<int64_t*>(rows.data<int64_t>()), R, width, key_len,
                             const_cast<int32_t*>(counts.data<int32_t>()), counted ? counts.numel() : 0,
                             pairs.numel() > 0 ? const_cast<int32_t*>(pairs.data<int32_t>()) : nullptr,
                             counted ? pairs.shape()[0] : 0,
                             planes > 0 ? reinterpret_cast<uint32_t*>(const_cast<int32_t*>(lines.data<int32_t>()))
                                        : nullptr,
                             planes};
}

// The insert's arguments, checked (op: the name its errors carry).
fdspec::SuffixCacheInsertParams insert_params(
    const char* op, const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
    const paddle::Tensor& step_idx, const paddle::Tensor& seq_lens_encoder,
    const paddle::Tensor& seq_lens_decoder, const paddle::Tensor& cache_tokens,
    const paddle::Tensor& cache_keys, const paddle::Tensor& cache_rows,
    const paddle::Tensor& cache_counts, const paddle::Tensor& cache_pairs,
    const paddle::Tensor& cache_lines, paddle::Tensor& cache_slots, paddle::Tensor& cache_counter,
    int key_len) {
  const fdspec::binding::OpChecks c(op);
  FDSPEC_CHECK_DEFINED(c, token_ids_all, prompt_lens, step_idx, seq_lens_encoder, seq_lens_decoder,
                       cache_tokens, cache_keys, cache_rows, cache_counts, cache_pairs, cache_lines,
                       cache_slots, cache_counter);
  fdspec::SuffixCacheInsertParams p;
  const int64_t B = p.batch = c.tensors(
      {FDSPEC_TENSORS(p, token_ids_all, prompt_lens, step_idx, seq_lens_encoder, seq_lens_decoder)},
      "seq_lens_encoder");
  c.dtype(cache_slots, "cache_slots", DataType::INT64)
      .dtype(cache_counter, "cache_counter", DataType::INT64);
  c.that(cache_slots.numel() >= B && cache_slots.shape().size() == 1,
         "cache_slots must have shape [S] with S >= B = " + std::to_string(B) + ", got " +
             fdspec::binding::shape_str(cache_slots))
      .that(cache_counter.numel() == 1,
            "cache_counter must have one element, got " + fdspec::binding::shape_str(cache_counter))
      .that(token_ids_all.shape()[1] < fdspec::kMaxSuffixHistory,
            "token_ids_all is wider than the supported maximum of 2^30 tokens");
  c.same_place_as(token_ids_all, "token_ids_all",
                  {{"cache_slots", cache_slots}, {"cache_counter", cache_counter}});
  p.cache = cache_view(c, token_ids_all, "token_ids_all", cache_tokens, cache_keys, cache_rows,
                       cache_counts, cache_pairs, cache_lines, key_len);
  p.token_ids_stride = token_ids_all.shape()[1];
  p.slots = cache_slots.data<int64_t>();
  p.counter = cache_counter.data<int64_t>();
  return p;
}

// The query's arguments, checked (op: the name its errors carry). checked_cache: the cache's view
// that insert_params has already built from the same tensors (suffix_cache_step), or null.
fdspec::SuffixCacheQueryParams query_params(
    const char* kOp, const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
    const paddle::Tensor& step_idx, const paddle::Tensor& draft_token_num,
    paddle::Tensor& draft_tokens, paddle::Tensor& seq_lens_this_time,
    const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
    const paddle::Tensor& max_dec_len, paddle::Tensor& suffix_tokens, paddle::Tensor& suffix_probs,
    paddle::Tensor& suffix_meta, paddle::Tensor& suffix_source, const paddle::Tensor& cache_tokens,
    const paddle::Tensor& cache_keys, const paddle::Tensor& cache_rows,
    const paddle::Tensor& cache_counts, const paddle::Tensor& cache_pairs,
    const paddle::Tensor& cache_lines, paddle::Tensor& query_cand, paddle::Tensor& query_stat,
    paddle::Tensor& query_lines, int max_tree_depth, float max_spec_factor, float max_spec_offset,
    float min_token_prob, int max_draft_tokens, bool pad_to_max, int64_t threshold, int key_len,
    const fdspec::SuffixCache* checked_cache = nullptr) {
  FDSPEC_CHECK_DEFINED(fdspec::binding::OpChecks(kOp), suffix_source, cache_tokens, cache_keys,
                       cache_rows, cache_counts, cache_pairs, cache_lines, query_cand, query_stat,
                       query_lines);
  fdspec::SuffixCacheQueryParams q;
  q.m = fdspec::binding::suffix_match_params(
      kOp,
      {token_ids_all, prompt_lens, step_idx, draft_token_num, draft_tokens, seq_lens_this_time,
       seq_lens_encoder, seq_lens_decoder, max_dec_len},
      suffix_tokens, suffix_probs, suffix_meta,
      max_tree_depth, max_spec_factor, max_spec_offset, min_token_prob, max_draft_tokens,
      pad_to_max, threshold);
  const fdspec::binding::OpChecks c(kOp);
  const int64_t B = q.m.batch;
  c.dtype(suffix_source, "suffix_source", DataType::INT32)
      .dtype(query_cand, "query_cand", DataType::INT64)
      .dtype(query_stat, "query_stat", DataType::INT32)
      .dtype(query_lines, "query_lines", DataType::INT32)
      .rank(query_lines, "query_lines", 1)
      .rank(suffix_source, "suffix_source", 1)
      .rank(query_cand, "query_cand", 2)
      .rank(query_stat, "query_stat", 2)
      .rows_at_least(query_cand, "query_cand", B)
      .rows_at_least(query_stat, "query_stat", B + 1);
  const int64_t cols = query_cand.shape()[1];
  const int64_t M = cols / fdspec::kSuffixCandLists;  // the lists of one slot, M entries each
  c.that(suffix_source.numel() >= B,
         "suffix_source must have at least B = " + std::to_string(B) + " elements, got " +
             fdspec::binding::shape_str(suffix_source))
      .that(cols % fdspec::kSuffixCandLists == 0 && M >= fdspec::kMinSuffixCacheOccurrences &&
                M <= fdspec::kMaxSuffixCacheOccurrences,
            "query_cand must have " + std::to_string(fdspec::kSuffixCandLists) +
                " * M columns, M (the most occurrences a match length may have) in [32, 1024], got " +
                fdspec::binding::shape_str(query_cand))
      .that(query_stat.shape()[1] == fdspec::kSuffixStatCols,
            "query_stat must have " + std::to_string(fdspec::kSuffixStatCols) + " columns, got " +
                fdspec::binding::shape_str(query_stat))
      .that(B <= fdspec::kMaxSuffixCacheBatch,
            "the batch must have at most " + std::to_string(fdspec::kMaxSuffixCacheBatch) +
                " slots, got " + std::to_string(B));
#ifdef FDSPEC_WITH_CUDA
  if (!token_ids_all.is_cpu()) {  // the scan keeps ~50 B per slot in a block's shared memory
    int64_t max_batch = 0;
    fdspec::binding::check_cuda(fdspec::suffix_cache_max_batch_gpu(&max_batch), kOp);
    c.that(B <= max_batch, "on this GPU (its shared memory per block) the batch must have at most " +
                               std::to_string(max_batch) + " slots, got " + std::to_string(B));
  }
#endif
  c.that(reinterpret_cast<uintptr_t>(query_stat.data<int32_t>()) % 16 == 0,
         "query_stat must be 16-byte aligned (the GPU scan reads its rows 16 bytes at a time)");
  c.same_place_as(token_ids_all, "token_ids_all",
                  {{"suffix_source", suffix_source}, {"query_cand", query_cand},
                   {"query_stat", query_stat}, {"query_lines", query_lines}});
  q.cache = checked_cache != nullptr
                ? *checked_cache
                : cache_view(c, token_ids_all, "token_ids_all", cache_tokens, cache_keys, cache_rows,
                             cache_counts, cache_pairs, cache_lines, key_len);
  const int64_t words = fdspec::suffix_line_words(q.cache.num_rows, q.cache.width);
  c.that(query_lines.numel() >= words,
         "query_lines must have at least " + std::to_string(words) +
             " elements (a bit per line of 32 positions of cache_tokens), got " +
             fdspec::binding::shape_str(query_lines));
  q.line_mask = reinterpret_cast<uint32_t*>(query_lines.data<int32_t>());
  q.source = suffix_source.data<int32_t>();
  q.cand = query_cand.data<int64_t>();
  q.stat = query_stat.data<int32_t>();
  q.max_occurrences = static_cast<int>(M);
  return q;
}

}  // namespace

void SuffixCacheInsert(const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
                       const paddle::Tensor& step_idx, const paddle::Tensor& seq_lens_encoder,
                       const paddle::Tensor& seq_lens_decoder, paddle::Tensor& cache_tokens,
                       paddle::Tensor& cache_keys, paddle::Tensor& cache_rows,
                       paddle::Tensor& cache_counts, paddle::Tensor& cache_pairs,
                       paddle::Tensor& cache_lines, paddle::Tensor& cache_slots,
                       paddle::Tensor& cache_counter, int key_len) {
  constexpr const char* kOp = "suffix_cache_insert";
  const fdspec::SuffixCacheInsertParams p =
      insert_params(kOp, token_ids_all, prompt_lens, step_idx, seq_lens_encoder, seq_lens_decoder,
                    cache_tokens, cache_keys, cache_rows, cache_counts, cache_pairs, cache_lines,
                    cache_slots, cache_counter, key_len);
  FDSPEC_RUN_ON_PLACE(kOp, token_ids_all, p, fdspec::suffix_cache_insert_cpu,
                      fdspec::suffix_cache_insert_gpu);
}

void SuffixCacheFinish(const paddle::Tensor& finished, paddle::Tensor& cache_slots) {
  constexpr const char* kOp = "suffix_cache_finish";
  const fdspec::binding::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, finished, cache_slots);
  const int64_t B = c.batch(finished, "finished");
  c.dtype(finished, "finished", DataType::INT32)
      .dtype(cache_slots, "cache_slots", DataType::INT64)
      .per_slot(finished, "finished", B);
  c.that(cache_slots.numel() >= B && cache_slots.shape().size() == 1,
         "cache_slots must have shape [S] with S >= B = " + std::to_string(B) + ", got " +
             fdspec::binding::shape_str(cache_slots));
  c.same_place_as(finished, "finished", {{"cache_slots", cache_slots}});
  FDSPEC_RUN_ON_PLACE_WITH(kOp, finished, fdspec::suffix_cache_finish_cpu, fdspec::suffix_cache_finish_gpu,
                           finished.data<int32_t>(), cache_slots.data<int64_t>(), B);
}

void SuffixCacheEvict(paddle::Tensor& cache_tokens, paddle::Tensor& cache_keys,
                      paddle::Tensor& cache_rows, paddle::Tensor& cache_counts,
                      paddle::Tensor& cache_pairs, paddle::Tensor& cache_lines,
                      const paddle::Tensor& cache_counter, int64_t keep, int key_len) {
  constexpr const char* kOp = "suffix_cache_evict";
  const fdspec::binding::OpChecks c(kOp);
  FDSPEC_CHECK_DEFINED(c, cache_tokens, cache_keys, cache_rows, cache_counts, cache_pairs, cache_lines,
                       cache_counter);
  c.dtype(cache_counter, "cache_counter", DataType::INT64)
      .that(cache_counter.numel() == 1,
            "cache_counter must have one element, got " + fdspec::binding::shape_str(cache_counter))
      .that(keep >= 0, "keep must be >= 0, got " + std::to_string(keep));
  c.same_place_as(cache_rows, "cache_rows", {{"cache_counter", cache_counter}});
  const fdspec::SuffixCache cache =
      cache_view(c, cache_rows, "cache_rows", cache_tokens, cache_keys, cache_rows, cache_counts,
                 cache_pairs, cache_lines, key_len);
  FDSPEC_RUN_ON_PLACE_WITH(kOp, cache_rows, fdspec::suffix_cache_evict_cpu, fdspec::suffix_cache_evict_gpu,
                           cache, cache_counter.data<int64_t>(), keep);
}

void SuffixCacheQuery(const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
                      const paddle::Tensor& step_idx, const paddle::Tensor& draft_token_num,
                      paddle::Tensor& draft_tokens, paddle::Tensor& seq_lens_this_time,
                      const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
                      const paddle::Tensor& max_dec_len, paddle::Tensor& suffix_tokens,
                      paddle::Tensor& suffix_probs, paddle::Tensor& suffix_meta,
                      paddle::Tensor& suffix_source, const paddle::Tensor& cache_tokens,
                      const paddle::Tensor& cache_keys, const paddle::Tensor& cache_rows,
                      const paddle::Tensor& cache_counts, const paddle::Tensor& cache_pairs,
                      const paddle::Tensor& cache_lines, paddle::Tensor& query_cand,
                      paddle::Tensor& query_stat, paddle::Tensor& query_lines, int max_tree_depth,
                      float max_spec_factor, float max_spec_offset, float min_token_prob,
                      int max_draft_tokens, bool pad_to_max, int64_t threshold, int key_len) {
  constexpr const char* kOp = "suffix_cache_query";
  const fdspec::SuffixCacheQueryParams q =
      query_params(kOp, token_ids_all, prompt_lens, step_idx, draft_token_num, draft_tokens,
                   seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, max_dec_len,
                   suffix_tokens, suffix_probs, suffix_meta, suffix_source, cache_tokens, cache_keys,
                   cache_rows, cache_counts, cache_pairs, cache_lines, query_cand, query_stat,
                   query_lines, max_tree_depth, max_spec_factor, max_spec_offset, min_token_prob,
                   max_draft_tokens, pad_to_max, threshold, key_len);
  FDSPEC_RUN_ON_PLACE(kOp, token_ids_all, q, fdspec::suffix_cache_query_cpu,
                      fdspec::suffix_cache_query_gpu);
}

// The insert, then the query: the query's arguments and the insert's two slot tensors (its other
// arguments are among the query's), checked as by the two ops; on the GPU one launch sequence
// (suffix_cache_step_gpu).
void SuffixCacheStep(const paddle::Tensor& token_ids_all, const paddle::Tensor& prompt_lens,
                     const paddle::Tensor& step_idx, const paddle::Tensor& draft_token_num,
                     paddle::Tensor& draft_tokens, paddle::Tensor& seq_lens_this_time,
                     const paddle::Tensor& seq_lens_encoder, const paddle::Tensor& seq_lens_decoder,
                     const paddle::Tensor& max_dec_len, paddle::Tensor& suffix_tokens,
                     paddle::Tensor& suffix_probs, paddle::Tensor& suffix_meta,
                     paddle::Tensor& suffix_source, paddle::Tensor& cache_tokens,
                     paddle::Tensor& cache_keys, paddle::Tensor& cache_rows,
                     paddle::Tensor& cache_counts, paddle::Tensor& cache_pairs,
                     paddle::Tensor& cache_lines, paddle::Tensor& cache_slots,
                     paddle::Tensor& cache_counter, paddle::Tensor& query_cand,
                     paddle::Tensor& query_stat, paddle::Tensor& query_lines, int max_tree_depth,
                     float max_spec_factor, float max_spec_offset, float min_token_prob,
                     int max_draft_tokens, bool pad_to_max, int64_t threshold, int key_len) {
  constexpr const char* kOp = "suffix_cache_step";
  const fdspec::SuffixCacheInsertParams ins =
      insert_params(kOp, token_ids_all, prompt_lens, step_idx, seq_lens_encoder, seq_lens_decoder,
                    cache_tokens, cache_keys, cache_rows, cache_counts, cache_pairs, cache_lines,
                    cache_slots, cache_counter, key_len);
  const fdspec::SuffixCacheQueryParams q =
      query_params(kOp, token_ids_all, prompt_lens, step_idx, draft_token_num, draft_tokens,
                   seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, max_dec_len,
                   suffix_tokens, suffix_probs, suffix_meta, suffix_source, cache_tokens, cache_keys,
                   cache_rows, cache_counts, cache_pairs, cache_lines, query_cand, query_stat,
                   query_lines, max_tree_depth, max_spec_factor, max_spec_offset, min_token_prob,
                   max_draft_tokens, pad_to_max, threshold, key_len, &ins.cache);
  FDSPEC_RUN_ON_PLACE_WITH(kOp, token_ids_all, fdspec::suffix_cache_step_cpu, fdspec::suffix_cache_step_gpu,
                           ins, q);
}

PD_BUILD_OP(suffix_cache_insert)
    .Inputs({"token_ids_all", "prompt_lens", "step_idx", "seq_lens_encoder", "seq_lens_decoder",
             "cache_tokens", "cache_keys", "cache_rows", "cache_counts", "cache_pairs",
             "cache_lines", "cache_slots", "cache_counter"})
    .Attrs({"key_len: int"})
    FDSPEC_INPLACE_OUTPUTS("cache_tokens", "cache_keys", "cache_rows", "cache_counts",
                           "cache_pairs", "cache_lines", "cache_slots", "cache_counter")
    .SetKernelFn(PD_KERNEL(SuffixCacheInsert));

PD_BUILD_OP(suffix_cache_finish)
    .Inputs({"finished", "cache_slots"})
    FDSPEC_INPLACE_OUTPUTS("cache_slots")
    .SetKernelFn(PD_KERNEL(SuffixCacheFinish));

PD_BUILD_OP(suffix_cache_evict)
    .Inputs({"cache_tokens", "cache_keys", "cache_rows", "cache_counts", "cache_pairs", "cache_lines",
             "cache_counter"})
    .Attrs({"keep: int64_t", "key_len: int"})
    FDSPEC_INPLACE_OUTPUTS("cache_tokens", "cache_keys", "cache_rows", "cache_counts", "cache_pairs",
                           "cache_lines")
    .SetKernelFn(PD_KERNEL(SuffixCacheEvict));

PD_BUILD_OP(suffix_cache_query)
    .Inputs({"token_ids_all", "prompt_lens", "step_idx", "draft_token_num", "draft_tokens",
             "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "max_dec_len",
             "suffix_tokens", "suffix_probs", "suffix_meta", "suffix_source", "cache_tokens",
             "cache_keys", "cache_rows", "cache_counts", "cache_pairs", "cache_lines", "query_cand",
             "query_stat", "query_lines"})
    .Attrs({"max_tree_depth: int", "max_spec_factor: float", "max_spec_offset: float",
            "min_token_prob: float", "max_draft_tokens: int", "pad_to_max: bool",
            "threshold: int64_t", "key_len: int"})
    FDSPEC_INPLACE_OUTPUTS("draft_tokens", "seq_lens_this_time", "suffix_tokens", "suffix_probs",
                           "suffix_meta", "suffix_source", "query_cand", "query_stat", "query_lines")
    .SetKernelFn(PD_KERNEL(SuffixCacheQuery));

PD_BUILD_OP(suffix_cache_step)
    .Inputs({"token_ids_all", "prompt_lens", "step_idx", "draft_token_num", "draft_tokens",
             "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "max_dec_len",
             "suffix_tokens", "suffix_probs", "suffix_meta", "suffix_source", "cache_tokens",
             "cache_keys", "cache_rows", "cache_counts", "cache_pairs", "cache_lines", "cache_slots",
             "cache_counter", "query_cand", "query_stat", "query_lines"})
    .Attrs({"max_tree_depth: int", "max_spec_factor: float", "max_spec_offset: float",
            "min_token_prob: float", "max_draft_tokens: int", "pad_to_max: bool",
            "threshold: int64_t", "key_len: int"})
    FDSPEC_INPLACE_OUTPUTS("draft_tokens", "seq_lens_this_time", "suffix_tokens", "suffix_probs",
                           "suffix_meta", "suffix_source", "cache_tokens", "cache_keys", "cache_rows",
                           "cache_counts", "cache_pairs", "cache_lines", "cache_slots", "cache_counter",
                           "query_cand", "query_stat", "query_lines")
    .SetKernelFn(PD_KERNEL(SuffixCacheStep));
