# The Paddle-free CUDA programs of the repository, sourced by tests/cuda/run_cuda_checks.sh and
# benchmarks/kernels/build.sh (paths from the repo root): name -> its own source, then the op
# sources it links. One table, so that a new op source is added once.
# shellcheck shell=bash disable=SC2034
declare -A sources=(
  [ngram_match_vs_cpu]="tests/cuda/ngram_match_vs_cpu.cu custom_ops/ngram_match/ngram_match.cu custom_ops/ngram_match/ngram_match_cpu.cc"
  [decode_step_vs_cpu]="tests/cuda/decode_step_vs_cpu.cu custom_ops/verify_draft_tokens/verify_draft_tokens.cu custom_ops/verify_draft_tokens/verify_draft_tokens_cpu.cc custom_ops/unified_update_model_status/unified_update_model_status.cu custom_ops/unified_update_model_status/unified_update_model_status_cpu.cc custom_ops/naive_update_model_status/naive_update_model_status.cu custom_ops/naive_update_model_status/naive_update_model_status_cpu.cc custom_ops/top_p_candidates/top_p_candidates.cu custom_ops/top_p_candidates/top_p_candidates_cpu.cc"
  [hybrid_mtp_ngram_vs_cpu]="tests/cuda/hybrid_mtp_ngram_vs_cpu.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc"
  [speculate_get_accept_tokens_and_logits_vs_cpu]="tests/cuda/speculate_get_accept_tokens_and_logits_vs_cpu.cu custom_ops/speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits.cu custom_ops/speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits_cpu.cc"
  [speculate_logprobs_topk_vs_cpu]="tests/cuda/speculate_logprobs_topk_vs_cpu.cu custom_ops/speculate_logprobs_topk/speculate_logprobs_topk.cu custom_ops/speculate_logprobs_topk/speculate_logprobs_topk_cpu.cc"
  [draft_model_vs_cpu]="tests/cuda/draft_model_vs_cpu.cu custom_ops/draft_model/draft_model.cu custom_ops/draft_model/draft_model_cpu.cc"
  [mtp_state_vs_cpu]="tests/cuda/mtp_state_vs_cpu.cu custom_ops/mtp_state/mtp_state.cu custom_ops/mtp_state/mtp_state_cpu.cc"
  [suffix_match_vs_cpu]="tests/cuda/suffix_match_vs_cpu.cu custom_ops/suffix_match/suffix_match.cu custom_ops/suffix_match/suffix_match_cpu.cc"
  [suffix_cache_vs_cpu]="tests/cuda/suffix_cache_vs_cpu.cu custom_ops/suffix_cache/suffix_cache.cu custom_ops/suffix_cache/suffix_cache_cpu.cc custom_ops/suffix_cache/suffix_cache_state.cc custom_ops/suffix_match/suffix_match.cu custom_ops/suffix_match/suffix_match_cpu.cc"
  [sample_tokens_vs_cpu]="tests/cuda/sample_tokens_vs_cpu.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens_cpu.cc"
  [draft_length_policy_vs_cpu]="tests/cuda/draft_length_policy_vs_cpu.cu custom_ops/speculate_draft_length_policy/speculate_draft_length_policy.cu custom_ops/speculate_draft_length_policy/speculate_draft_length_policy_cpu.cc"
  # Not an op: the stream-ordering rule the n-gram ops' walk-free path relies on (see the source).
  [pdl_order_check]="tests/cuda/pdl_order_check.cu"
  # The kernel benchmarks (benchmarks/kernels/).
  [bench_ngram_kernels]="benchmarks/kernels/bench_ngram_kernels.cu custom_ops/ngram_match/ngram_match.cu custom_ops/ngram_match/ngram_match_cpu.cc custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc"
  [bench_suffix_kernels]="benchmarks/kernels/bench_suffix_kernels.cu custom_ops/suffix_match/suffix_match.cu custom_ops/suffix_match/suffix_match_cpu.cc custom_ops/suffix_cache/suffix_cache.cu custom_ops/suffix_cache/suffix_cache_cpu.cc"
  [bench_sample_tokens]="benchmarks/kernels/bench_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens_cpu.cc"
  [bench_mtp_kernels]="benchmarks/kernels/bench_mtp_kernels.cu custom_ops/draft_model/draft_model.cu custom_ops/draft_model/draft_model_cpu.cc custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc"
  [bench_mtp_state]="benchmarks/kernels/bench_mtp_state.cu custom_ops/mtp_state/mtp_state.cu custom_ops/mtp_state/mtp_state_cpu.cc custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc custom_ops/draft_model/draft_model.cu custom_ops/draft_model/draft_model_cpu.cc custom_ops/speculate_sample_tokens/speculate_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens_cpu.cc"
)
