"""The fastdeploy_spec operators: ``from fastdeploy_spec.ops import ngram_match``.

Every op takes the upstream (FastDeploy) positional arguments, runs on the place of its tensors (the
C++ implementation for CPU tensors, the CUDA kernels for GPU tensors) and mutates its in-place
outputs. ``with_cuda()`` tells whether the loaded library has GPU kernels.
"""

from fastdeploy_spec.ops._loader import OpLibraryError, build_info, load, with_cuda
from fastdeploy_spec.ops.draft_model_accept import draft_model_accept
from fastdeploy_spec.ops.draft_model_accept_preprocess import draft_model_accept_preprocess
from fastdeploy_spec.ops.draft_model_greedy_preprocess import draft_model_greedy_preprocess
from fastdeploy_spec.ops.draft_model_greedy_update import draft_model_greedy_update
from fastdeploy_spec.ops.hybrid_mtp_ngram import hybrid_mtp_ngram, ngram_match_mixed
from fastdeploy_spec.ops.mtp_save_first_token_with_topk import mtp_save_first_token_with_topk
from fastdeploy_spec.ops.mtp_state import (
    draft_model_postprocess,
    draft_model_preprocess,
    draft_model_set_value_by_flags,
    draft_model_update,
    eagle_get_hidden_states,
    eagle_get_self_hidden_states,
)
from fastdeploy_spec.ops.naive_update_model_status import naive_update_model_status
from fastdeploy_spec.ops.ngram_match import ngram_match
from fastdeploy_spec.ops.speculate_compute_cu_batch_offset import speculate_compute_cu_batch_offset
from fastdeploy_spec.ops.speculate_draft_length_policy import speculate_draft_length_policy
from fastdeploy_spec.ops.speculate_get_accept_tokens_and_logits import (
    speculate_get_accept_tokens_and_logits,
)
from fastdeploy_spec.ops.speculate_get_output_topk import speculate_get_output_topk
from fastdeploy_spec.ops.speculate_logprobs_topk import speculate_logprobs_topk
from fastdeploy_spec.ops.speculate_sample_tokens import speculate_sample_tokens
from fastdeploy_spec.ops.speculate_save_output_topk import speculate_save_output_topk
from fastdeploy_spec.ops.suffix_cache import (
    SuffixCache,
    suffix_cache_evict,
    suffix_cache_finish,
    suffix_cache_insert,
    suffix_cache_query,
    suffix_cache_step,
)
from fastdeploy_spec.ops.suffix_match import suffix_match
from fastdeploy_spec.ops.top_p_candidates import top_p_candidates
from fastdeploy_spec.ops.unified_update_model_status import unified_update_model_status
from fastdeploy_spec.ops.verify_draft_tokens import VerifyStrategy, verify_draft_tokens

__all__ = [
    "OpLibraryError",
    "SuffixCache",
    "VerifyStrategy",
    "build_info",
    "draft_model_accept",
    "draft_model_accept_preprocess",
    "draft_model_greedy_preprocess",
    "draft_model_greedy_update",
    "draft_model_postprocess",
    "draft_model_preprocess",
    "draft_model_set_value_by_flags",
    "draft_model_update",
    "eagle_get_hidden_states",
    "eagle_get_self_hidden_states",
    "hybrid_mtp_ngram",
    "load",
    "mtp_save_first_token_with_topk",
    "naive_update_model_status",
    "ngram_match",
    "ngram_match_mixed",
    "speculate_compute_cu_batch_offset",
    "speculate_draft_length_policy",
    "speculate_get_accept_tokens_and_logits",
    "speculate_get_output_topk",
    "speculate_logprobs_topk",
    "speculate_sample_tokens",
    "speculate_save_output_topk",
    "suffix_cache_evict",
    "suffix_cache_finish",
    "suffix_cache_insert",
    "suffix_cache_query",
    "suffix_cache_step",
    "suffix_match",
    "top_p_candidates",
    "unified_update_model_status",
    "verify_draft_tokens",
    "with_cuda",
]
