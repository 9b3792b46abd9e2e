"""The fastdeploy_spec operators: ``from fastdeploy_spec.ops import ngram_match``.

Every op takes the upstream (FastDeploy) positional arguments, runs on the place of its tensors (the
C++ implementation for CPU tensors, the CUDA kernels for GPU tensors) and mutates its in-place
outputs. ``with_cuda()`` tells whether the loaded library has GPU kernels.
"""

from fastdeploy_spec.ops._loader import OpLibraryError, build_info, load, with_cuda
from fastdeploy_spec.ops.draft_model_accept import draft_model_accept
from fastdeploy_spec.ops.draft_model_accept_preprocess import draft_model_accept_preprocess
from fastdeploy_spec.ops.draft_model_preprocess import draft_model_preprocess
from fastdeploy_spec.ops.draft_model_update import draft_model_update
from fastdeploy_spec.ops.hybrid_mtp_ngram import hybrid_mtp_ngram, ngram_match_mixed
from fastdeploy_spec.ops.mtp_save_first_token_with_topk import mtp_save_first_token_with_topk
from fastdeploy_spec.ops.ngram_match import ngram_match
from fastdeploy_spec.ops.speculate_compute_cu_batch_offset import speculate_compute_cu_batch_offset
from fastdeploy_spec.ops.speculate_draft_length_policy import speculate_draft_length_policy
from fastdeploy_spec.ops.speculate_get_accept_tokens_and_logits import (
    speculate_get_accept_tokens_and_logits,
)
from fastdeploy_spec.ops.speculate_get_output_topk import speculate_get_output_topk
from fastdeploy_spec.ops.speculate_logprobs_topk import speculate_logprobs_topk
from fastdeploy_spec.ops.speculate_save_output_topk import speculate_save_output_topk
from fastdeploy_spec.ops.speculate_step_update import speculate_step_update
from fastdeploy_spec.ops.speculate_verify_greedy import speculate_verify_greedy
from fastdeploy_spec.ops.suffix_cache import (SuffixCache, suffix_cache_evict, suffix_cache_finish,
                                              suffix_cache_insert, suffix_cache_query,
                                              suffix_cache_step)
from fastdeploy_spec.ops.suffix_match import suffix_match

__all__ = [
    "OpLibraryError",
    "SuffixCache",
    "build_info",
    "draft_model_accept",
    "draft_model_accept_preprocess",
    "draft_model_preprocess",
    "draft_model_update",
    "hybrid_mtp_ngram",
    "load",
    "mtp_save_first_token_with_topk",
    "ngram_match",
    "ngram_match_mixed",
    "speculate_compute_cu_batch_offset",
    "speculate_draft_length_policy",
    "speculate_get_accept_tokens_and_logits",
    "speculate_get_output_topk",
    "speculate_logprobs_topk",
    "speculate_save_output_topk",
    "speculate_step_update",
    "speculate_verify_greedy",
    "suffix_cache_evict",
    "suffix_cache_finish",
    "suffix_cache_insert",
    "suffix_cache_query",
    "suffix_cache_step",
    "suffix_match",
    "with_cuda",
]
