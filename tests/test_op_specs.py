"""Each wrapper's OpSpec agrees with its Paddle binding: the same tensor inputs in the same order, and
the same in-place outputs.

The wrapper's ``outputs`` decide which empty tensors get a stand-in allocation on Paddle 2.x (which
refuses an in-place output without one); an output missing there fails only on Paddle 2.6 with an
empty batch (seen on the GPU machine: "Custom operator's 6-th output is not initialized" from
draft_model_greedy_preprocess). Read from the library as Paddle registered it (no GPU needed).
"""

from __future__ import annotations

import pytest

from fastdeploy_spec import ops  # noqa: F401  (imports every wrapper, filling SPECS)
from fastdeploy_spec.ops._common import SPECS
from tests.helpers import registered_ops

# The two message-queue save ops are one binding macro; their wrappers take their tensors by name.
SAVE_OPS = {"speculate_save_output_topk", "mtp_save_first_token_with_topk"}


def test_every_binding_has_a_spec():
    assert set(registered_ops()) == set(SPECS)


@pytest.mark.parametrize("op", sorted(SPECS))
def test_spec_matches_binding(op):
    if op in SAVE_OPS:
        assert not SPECS[op].outputs
        return
    inputs, _, _, written = registered_ops()[op]
    inputs, inplace = tuple(inputs), frozenset(written)
    spec = SPECS[op]
    assert spec.tensors == inputs, (
        f"{op}: wrapper tensors {spec.tensors} != binding inputs {inputs}"
    )
    assert spec.outputs == inplace, (
        f"{op}: wrapper outputs {sorted(spec.outputs)} != in-place {sorted(inplace)}"
    )
