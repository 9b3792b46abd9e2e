"""Each wrapper's OpSpec agrees with its Paddle binding: the same tensor inputs in the same order, and
the same in-place outputs.

The wrapper's ``outputs`` decide which empty tensors get a stand-in allocation on Paddle 2.x (which
refuses an in-place output without one); an output missing there fails only on Paddle 2.6 with an
empty batch (seen on the GPU machine: "Custom operator's 6-th output is not initialized" from
draft_model_greedy_preprocess). Read from the sources, so the check needs no GPU and no Paddle 2.6.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fastdeploy_spec import ops  # noqa: F401  (imports every wrapper, filling SPECS)
from fastdeploy_spec.ops._common import SPECS

CUSTOM_OPS = Path(__file__).resolve().parent.parent / "custom_ops"
_BUILD = re.compile(r"PD_BUILD_OP\((\w+)\)(.*?)\.SetKernelFn", re.S)


def _bindings() -> dict:
    found = {}
    for path in CUSTOM_OPS.rglob("*.cc"):
        if path.name == "save_ops.cc":  # a macro registers its two ops (SAVE_OPS below)
            continue
        for name, body in _BUILD.findall(path.read_text()):
            inputs = re.search(r"\.Inputs\(\{(.*?)\}\)", body, re.S)
            inplace = re.search(r"\.SetInplaceMap\(\{(.*?)\}\)", body, re.S)
            # FDSPEC_INPLACE_OUTPUTS("a", "b") (binding_utils.h): outputs a_out, b_out, in place
            macro = re.search(r"FDSPEC_INPLACE_OUTPUTS\((.*?)\)", body, re.S)
            if macro:
                written = frozenset(re.findall(r'"(\w+)"', macro.group(1)))
            else:
                written = (frozenset(re.findall(r'\{"(\w+)",\s*"\w+_out"\}', inplace.group(1)))
                           if inplace else frozenset())
            found[name] = (tuple(re.findall(r'"(\w+)"', inputs.group(1))) if inputs else (), written)
    return found


BINDINGS = _bindings()


# The two send ops are registered by one macro (custom_ops/logprob_msg/save_ops.cc): they write
# nothing in place, and their tensor list is the macro's, checked by the transport tests.
SAVE_OPS = set(re.findall(r"^FDSPEC_SAVE_OP\((\w+),", (CUSTOM_OPS / "logprob_msg" / "save_ops.cc").read_text(),
                          re.M))


def test_every_binding_has_a_spec():
    assert SAVE_OPS == {"speculate_save_output_topk", "mtp_save_first_token_with_topk"}
    assert set(BINDINGS) | SAVE_OPS == set(SPECS)


@pytest.mark.parametrize("op", sorted(SPECS))
def test_spec_matches_binding(op):
    if op in SAVE_OPS:
        assert not SPECS[op].outputs
        return
    inputs, inplace = BINDINGS[op]
    spec = SPECS[op]
    assert spec.tensors == inputs, f"{op}: wrapper tensors {spec.tensors} != binding inputs {inputs}"
    assert spec.outputs == inplace, f"{op}: wrapper outputs {sorted(spec.outputs)} != in-place {sorted(inplace)}"
