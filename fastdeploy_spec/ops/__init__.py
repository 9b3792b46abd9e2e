"""The fastdeploy_spec operators: ``from fastdeploy_spec.ops import ngram_match``.

Every op takes the upstream (FastDeploy) positional arguments, runs on the place of its tensors (the
C++ implementation for CPU tensors, the CUDA kernels for GPU tensors) and mutates its in-place
outputs. ``with_cuda()`` tells whether the loaded library has GPU kernels.
"""

from fastdeploy_spec.ops._loader import OpLibraryError, build_info, load, with_cuda
from fastdeploy_spec.ops.mtp_save_first_token_with_topk import mtp_save_first_token_with_topk
from fastdeploy_spec.ops.ngram_match import ngram_match
from fastdeploy_spec.ops.speculate_get_output_topk import speculate_get_output_topk
from fastdeploy_spec.ops.speculate_save_output_topk import speculate_save_output_topk

__all__ = [
    "OpLibraryError", "build_info", "load", "mtp_save_first_token_with_topk", "ngram_match",
    "speculate_get_output_topk", "speculate_save_output_topk", "with_cuda",
]
