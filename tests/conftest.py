"""Pytest configuration: the default place, the hypothesis profiles and the GPU marker's skip rule.
Shared helpers (places, conversions, checks) are in tests/helpers.py.

GPU tests build their inputs in NumPy and copy them to the device (on the GPU machine Paddle's own
GPU kernels may not run: only copies and this plugin's ops are trusted there).
"""

from __future__ import annotations

import os
import zlib  # noqa: F401  (Paddle 2.6 crashes in zlib unless it is imported first)

import paddle
import pytest

from tests.helpers import gpu_available, reserved_queue_id

# A GPU Paddle's default place is the GPU: tensors made without a place, Paddle's own ops (the draft
# models and casts of the CPU tests) and Tensor.set_value would then run or land there, where the GPU
# machine's Paddle has no kernels. CPU tests use the default place; GPU tests name theirs (to_place).
# Spawned child processes do not inherit this: what they create names its place.
paddle.set_device("cpu")


try:  # hypothesis is a test-only dependency; the GPU machine may lack it
    from hypothesis import settings as _hyp_settings
except ImportError:
    _hyp_settings = None
else:
    # "ci" (default): bounded and derandomized, so a CI failure reproduces. "long": a fresh random
    # search. Pick one with HYPOTHESIS_PROFILE; FDSPEC_FUZZ_EXAMPLES overrides the example count.
    _fuzz_examples = int(os.environ.get("FDSPEC_FUZZ_EXAMPLES", "0")) or None
    _hyp_settings.register_profile(
        "ci", max_examples=_fuzz_examples or 150, deadline=None, derandomize=True, print_blob=True
    )
    _hyp_settings.register_profile("long", max_examples=_fuzz_examples or 5000, deadline=None)
    _hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(
        reason="needs a CUDA GPU, GPU Paddle and a CUDA build of the op library"
    )
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def queue_id(monkeypatch):
    """A message queue id of this test alone, named in INFERENCE_MSG_QUEUE_ID (INFERENCE_MSG_ID at its
    default); the queue is removed and the id released afterwards."""
    with reserved_queue_id() as qid:
        monkeypatch.setenv("INFERENCE_MSG_QUEUE_ID", str(qid))
        monkeypatch.delenv("INFERENCE_MSG_ID", raising=False)
        yield qid
