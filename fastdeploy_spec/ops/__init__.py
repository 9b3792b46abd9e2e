"""The fastdeploy_spec operators: ``from fastdeploy_spec.ops import ngram_match``.

Every op takes the upstream (FastDeploy) positional arguments, runs on the place of its tensors (the
C++ implementation for CPU tensors, the CUDA kernels for GPU tensors) and mutates its in-place
outputs. ``with_cuda()`` tells whether the loaded library has GPU kernels.
"""

from fastdeploy_spec.ops._loader import OpLibraryError, build_info, load, with_cuda
from fastdeploy_spec.ops.ngram_match import ngram_match
from fastdeploy_spec.ops.speculate_step_update import speculate_step_update
from fastdeploy_spec.ops.speculate_verify_greedy import speculate_verify_greedy

__all__ = [
    "OpLibraryError", "build_info", "load", "ngram_match", "speculate_step_update",
    "speculate_verify_greedy", "with_cuda",
]
