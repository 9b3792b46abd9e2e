"""Shared pytest fixtures: places to run on, and the GPU marker's skip rule.

GPU tests build their inputs in NumPy and copy them to the device (on the GPU machine Paddle's own
GPU kernels may not run: only copies and this plugin's ops are trusted there).
"""

from __future__ import annotations

import zlib  # noqa: F401  (Paddle 2.6 crashes in zlib unless it is imported first)

import numpy as np
import paddle
import pytest

from fastdeploy_spec import ops


def gpu_available() -> bool:
    return paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0 and ops.with_cuda()


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU, GPU Paddle and a CUDA build of the op library")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def to_place(array: np.ndarray, place: str) -> paddle.Tensor:
    """Copies a NumPy array to 'cpu' or 'gpu' (a copy only: no Paddle kernel runs on the data)."""
    target = paddle.CUDAPlace(0) if place == "gpu" else paddle.CPUPlace()
    return paddle.to_tensor(np.ascontiguousarray(array), place=target)


PLACES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
