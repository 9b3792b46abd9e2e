"""The fastdeploy_spec operators: ``from fastdeploy_spec.ops import ngram_match``.

Every op takes the upstream (FastDeploy) positional arguments, runs on the place of its tensors (the
C++ implementation for CPU tensors, the CUDA kernels for GPU tensors) and mutates its in-place
outputs. ``with_cuda()`` tells whether the loaded library has GPU kernels.
"""

from fastdeploy_spec.ops._loader import OpLibraryError, build_info, load, with_cuda
from fastdeploy_spec.ops.hybrid_mtp_ngram import hybrid_mtp_ngram, ngram_match_mixed
from fastdeploy_spec.ops.ngram_match import ngram_match

__all__ = ["OpLibraryError", "build_info", "hybrid_mtp_ngram", "load", "ngram_match",
           "ngram_match_mixed", "with_cuda"]
