"""Every op our library registers under a name FastDeploy also registers has FastDeploy's signature.

The facts are tests/data/fastdeploy_op_signatures.json (written by scripts/fastdeploy_op_signatures.py
from FastDeploy's custom_ops/gpu_ops registrations): each op's input names in order, its outputs and
in-place map, its attribute names in order. The rule (docs/contract/README.md, "Op names"): a
FastDeploy name means FastDeploy's newest contract, so a library loaded beside FastDeploy's own ops,
or called by FastDeploy's code, sees the same op. The test loads the op library and reads what
Paddle registered, so it checks the binding as built, not a copy of its source.

Agreement: the same inputs in the same order, the same outputs, the same in-place map; the same
attributes in the same order, where ours may append keyword-only ones listed in EXTRA_ATTRS (a
positional upstream call never reaches them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import registered_ops

SIGNATURES = json.loads(
    (Path(__file__).parent / "data" / "fastdeploy_op_signatures.json").read_text()
)["ops"]

# Attributes our ops append after upstream's, each with its reason (docs/contract/names.md): the
# message-queue ops' private queue (upstream reads INFERENCE_MSG_QUEUE_ID inside the op) and the
# n-gram ops' graph-mode padding and token budget (upstream reads them from its configuration and
# environment). A positional upstream call never reaches them.
EXTRA_ATTRS = {
    "speculate_save_output_topk": ("queue_id",),
    "mtp_save_first_token_with_topk": ("queue_id",),
    "speculate_get_output_topk": ("queue_id",),
    "ngram_match": ("pad_to_max", "threshold"),
    "hybrid_mtp_ngram": ("pad_to_max", "threshold"),
}

# The FastDeploy names our library means to share (docs/contract/names.md). Every upstream op is in
# the list, so an op registered later under a FastDeploy name (verify_draft_tokens,
# unified_update_model_status, naive_update_model_status, top_p_candidates, ...) is checked as soon as
# it is built; a name added here is checked once registered.
SHARED_BY_DESIGN = {
    "draft_model_preprocess",
    "draft_model_update",
    "draft_model_postprocess",
    "draft_model_set_value_by_flags",
    "eagle_get_hidden_states",
    "eagle_get_self_hidden_states",
    "speculate_save_output_topk",
    "mtp_save_first_token_with_topk",
    "ngram_match",
    "hybrid_mtp_ngram",
    "speculate_get_output_topk",
    "speculate_get_accept_tokens_and_logits",
    # registered by the step50 branch (verification and the model-status update)
    "verify_draft_tokens",
    "unified_update_model_status",
    "naive_update_model_status",
    "top_p_candidates",
}


def _our_names() -> set:
    from fastdeploy_spec.ops._common import SPECS  # filled by importing every wrapper

    return set(SPECS)


def registered() -> dict:
    """Our ops as Paddle registered them (tests.helpers.registered_ops), those with a wrapper."""
    return {n: v for n, v in registered_ops().items() if n in _our_names()}


def test_every_op_of_ours_is_registered():
    assert set(registered()) == _our_names()


def test_shared_names_are_the_ones_we_mean_to_share():
    shared = set(registered()) & set(SIGNATURES)
    assert shared == SHARED_BY_DESIGN & set(registered()), (
        f"an op of ours takes a FastDeploy name by accident, or one we share is missing: "
        f"{sorted(shared ^ (SHARED_BY_DESIGN & set(registered())))}"
    )


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_agrees_with_fastdeploy(name):
    if name not in registered():
        pytest.skip(f"{name}: not registered by our library")
    inputs, outputs, attrs, inplace = registered()[name]
    up = SIGNATURES[name]
    assert inputs == up["inputs"], f"{name}: inputs {inputs} != FastDeploy's {up['inputs']}"
    assert sorted(outputs) == sorted(up["outputs"]), f"{name}: outputs {outputs} != {up['outputs']}"
    assert inplace == up["inplace"], f"{name}: in-place map {inplace} != {up['inplace']}"
    up_attrs = [a.split(":")[0].strip() for a in up["attrs"]]
    assert attrs[: len(up_attrs)] == up_attrs, (
        f"{name}: attributes {attrs} != FastDeploy's {up_attrs}"
    )
    assert tuple(attrs[len(up_attrs) :]) == EXTRA_ATTRS.get(name, ()), (
        f"{name}: attributes beyond FastDeploy's {attrs[len(up_attrs) :]} are not the documented ones"
    )
