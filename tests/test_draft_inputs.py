"""The checks that every op of the n-gram/suffix family makes on the nine tensors it takes first
(``DRAFT_INPUTS``, custom_ops/binding/draft_inputs.h: one table of rules for every op), run once for
each op: a wrong dtype or shape names the tensor, a negative threshold keyword is refused. Each op's
own tensors and attributes are tested in its own file."""

from __future__ import annotations

import numpy as np
import pytest

from fastdeploy_spec.ops import ngram_match, suffix_match
from fastdeploy_spec.ops._common import DRAFT_INPUTS
from tests.helpers import OP_ERRORS, assert_bad_input, assert_wrong_dtype_named, grid, to_place
from tests.reference import ngram_match as ngram_ref
from tests.reference import suffix_match as suffix_ref


def _ngram_call(d, **kw):
    ngram_match(*(to_place(d[name], "cpu") for name in ngram_ref.TENSOR_ARGS), 3, 4, **kw)


def _suffix_call(d, **kw):
    suffix_match(*(to_place(d[name], "cpu") for name in suffix_ref.TENSOR_ARGS), **kw)


# op -> (a good batch of 3 slots, the call on the CPU with keywords)
FAMILY = {
    "ngram_match": (
        lambda: ngram_ref.make_ngram_batch(np.random.default_rng(5), 3, 10, vocab=3),
        _ngram_call,
    ),
    "suffix_match": (
        lambda: suffix_ref.make_suffix_batch(np.random.default_rng(5), 3, 20, k=4, vocab=3),
        _suffix_call,
    ),
}


@grid(("op", sorted(FAMILY)), ("name", DRAFT_INPUTS))
def test_wrong_dtype_names_the_tensor(op, name):
    good, call = FAMILY[op]
    assert_wrong_dtype_named(op, call, good(), name, ngram_ref.DTYPES[name])


@grid(
    ("op", sorted(FAMILY)),
    (
        "name,shape,message",
        [
            ("token_ids_all", (30,), r"token_ids_all must be 2-D"),
            ("prompt_lens", (3, 2), r"prompt_lens must have shape \[3\] or \[3, 1\]"),
        ],
    ),
)
def test_wrong_shape_names_the_tensor(op, name, shape, message):
    good, call = FAMILY[op]
    corrupt = lambda d: np.zeros(shape, ngram_ref.DTYPES[name])
    assert_bad_input(call, good(), name, corrupt, message, OP_ERRORS)


@pytest.mark.parametrize("op", sorted(FAMILY))
def test_negative_threshold_keyword_is_rejected(op):
    good, call = FAMILY[op]
    with pytest.raises(ValueError, match="threshold must be >= 0"):
        call(good(), threshold=-1)
