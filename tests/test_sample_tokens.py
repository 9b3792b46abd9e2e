"""speculate_sample_tokens against its NumPy reference (tests/reference/sample_tokens.py), exactly, on
every place; named corners; the position-keyed draw; the law it samples from; argument errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastdeploy_spec.ops import speculate_sample_tokens
from tests.helpers import LOGITS_DTYPES, PLACES, as_f32, logits_to_place, make_logits, to_place
from tests.reference import sample_tokens as ref
from tests.reference.chi2 import chi2_sf

VOCABS = [1, 2, 5, 17, 130]


def run_op(logits, cu, step, seed, temp, top_p, top_k, min_p=None, *, dtype="float32", place="cpu"):
    storage = make_logits(np.asarray(logits, np.float32), dtype)
    N = storage.shape[0]
    out = to_place(np.full(N, 777, np.int64), place)
    t = lambda a, d: to_place(np.asarray(a, d), place)  # noqa: E731
    speculate_sample_tokens(
        logits_to_place(storage, dtype, place),
        t(cu, np.int32),
        t(step, np.int64),
        t(seed, np.int64),
        t(temp, np.float32),
        t(top_p, np.float32),
        t(top_k, np.int64),
        out,
        min_p=None if min_p is None else t(min_p, np.float32),
    )
    return out.numpy(), as_f32(storage, dtype)


def random_case(rng, V, kind):
    B = int(rng.integers(1, 5))
    cu = np.concatenate([[0], np.cumsum(rng.integers(0, 4, B))]).astype(np.int32)
    N = int(cu[-1]) + int(rng.integers(0, 2))
    if kind == "normal":
        logits = rng.normal(0, 3, (N, V))
    elif kind == "ties":
        logits = rng.integers(-2, 2, (N, V)).astype(np.float64)
    elif kind == "flat":
        logits = np.zeros((N, V))
    else:
        logits = rng.normal(0, 1, (N, V))
        logits[rng.random((N, V)) < 0.1] = -np.inf
        logits[rng.random((N, V)) < 0.05] = np.nan
    params = dict(
        step=rng.integers(0, 1000, B),
        seed=rng.integers(-(2**63), 2**63 - 1, B, dtype=np.int64),
        temp=rng.choice([0.0, 1e-6, 0.5, 0.8, 1.0, 2.0, np.inf, np.nan], B),
        top_p=rng.choice([1.0, 0.9, 0.5, 0.0, 0.999, np.nan], B),
        top_k=rng.choice([0, 1, 3, 10, 1000, -1], B),
        min_p=rng.choice([0.0, 0.1, 0.5, 1.0], B),
    )
    return logits, cu, params


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("V", VOCABS)
@pytest.mark.parametrize("kind", ["normal", "ties", "flat", "special"])
def test_matches_reference(place, dtype, V, kind):
    rng = np.random.default_rng(V * 1009 + len(kind))
    for _ in range(6):
        logits, cu, p = random_case(rng, V, kind)
        with_min_p = bool(rng.integers(0, 2))
        args = (
            cu,
            p["step"],
            p["seed"],
            p["temp"],
            p["top_p"],
            p["top_k"],
            p["min_p"] if with_min_p else None,
        )
        got, x = run_op(logits, *args, dtype=dtype, place=place)
        want = ref.sample_tokens(x, *args)
        np.testing.assert_array_equal(got, want)


def test_greedy_and_corners():
    x = np.array([[1.0, 3.0, 3.0, -1.0]], np.float32)
    one = lambda **kw: run_op(
        x,
        [0, 1],
        [0],
        [5],
        kw.get("T", 0.8),
        kw.get("p", 1.0),  # noqa: E731
        kw.get("k", 0),
        kw.get("m"),
    )[0][0]
    assert one(T=0.0) == 1  # greedy: the largest logit, the lower id of a tie
    assert one(T=float("nan")) == 1 and one(T=float("inf")) == 1
    assert one(k=1) == 1 and one(p=0.0) == 1  # top-1 by either cut
    assert one(m=1.0) in (1, 2)  # min-p 1: only the maxima
    assert one(k=2, p=1.0) in (1, 2)
    # -0 equals +0; NaN never wins; a row of -inf / NaN takes the first entry of the order.
    assert (
        run_op(np.array([[-0.0, 0.0]], np.float32), [0, 1], [0], [0], [0.0], [1.0], [0])[0][0] == 0
    )
    assert (
        run_op(np.array([[np.nan, 2.0, np.nan]], np.float32), [0, 1], [0], [0], [0.8], [1.0], [0])[
            0
        ][0]
        == 1
    )
    assert (
        run_op(np.array([[-np.inf, -np.inf]], np.float32), [0, 1], [0], [0], [0.8], [1.0], [0])[0][
            0
        ]
        == 0
    )
    # +inf: greedy on the +inf entry.
    assert (
        run_op(np.array([[0.0, np.inf, 1.0]], np.float32), [0, 1], [0], [0], [0.8], [1.0], [0])[0][
            0
        ]
        == 1
    )


def test_padding_rows_and_empty_batch():
    x = np.zeros((4, 3), np.float32)
    got, _ = run_op(x, [0, 1, 2], [0, 0], [1, 2], [0.0, 0.0], [1.0, 1.0], [0, 0])
    assert got.tolist() == [0, 0, -1, -1]
    got, _ = run_op(x, [0], np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))
    assert got.tolist() == [-1] * 4


def test_draw_is_keyed_by_seed_and_position_only():
    """A row's token depends on (seed, j = step_idx + row offset) and its logits: not on the slot, the
    row's place in the batch or the other slots."""
    rng = np.random.default_rng(3)
    V = 50
    x = rng.normal(0, 1, (1, V)).astype(np.float32)
    alone = [run_op(x, [0, 1], [j], [99], [1.0], [0.95], [0])[0][0] for j in range(40)]
    # The same request as slot 2 of 3, its row the 4th of its slot: step_idx j - 3.
    rows = np.repeat(x, 9, 0)
    batched = []
    for j in range(3, 40):
        got, _ = run_op(
            rows, [0, 2, 4, 9], [7, 8, j - 3], [1, 2, 99], [1.0] * 3, [0.95] * 3, [0] * 3
        )
        batched.append(got[4 + 3])
    assert batched == alone[3:]
    assert len(set(alone)) > 5  # the draws do change with j


@pytest.mark.parametrize(
    "T,top_p,top_k,min_p",
    [
        (0.8, 0.9, 0, 0.0),
        (1.0, 1.0, 0, 0.0),
        (0.7, 1.0, 4, 0.0),
        (1.3, 0.6, 8, 0.0),
        (1.0, 1.0, 0, 0.2),
    ],
)
def test_law_of_the_draws(T, top_p, top_k, min_p):
    """Over many positions the tokens follow the row's distribution (chi-square), and that
    distribution is the truncated softmax to float rounding."""
    rng = np.random.default_rng(11)
    V, n = 12, 60000
    x = rng.normal(0, 1.5, V).astype(np.float32)
    got, _ = run_op(np.repeat(x[None], n, 0), [0, n], [0], [1234], [T], [top_p], [top_k], [min_p])
    p = ref.row_distribution(x, T, top_p, top_k, min_p)
    z = np.exp((x.astype(np.float64) - x.max()) / T)
    order = np.lexsort((np.arange(V), -x))[: top_k or V]
    keep = order[z[order] >= min_p * z.max()]
    q = z[keep] / z[keep].sum()
    n_s = len(keep) if top_p >= 1 else int(np.argmax(np.cumsum(q) >= top_p)) + 1
    soft = np.zeros(V)
    soft[keep[:n_s]] = z[keep[:n_s]]
    soft /= soft.sum()
    assert np.abs(p - soft).max() < 1e-6
    counts = np.bincount(got, minlength=V)
    assert counts[p == 0].sum() == 0
    e = p[p > 0] * n
    stat = float(((counts[p > 0] - e) ** 2 / e).sum())
    assert chi2_sf(stat, int((p > 0).sum()) - 1) > 1e-3


def test_top_p_boundary_rule():
    """The entry that crosses ceil(top_p W(A)) is in; of tied entries at the boundary, the lower ids."""
    x = np.array([[0.0, 0.0, 0.0, 0.0]], np.float32)  # weights 2^40 each: W(A) = 2^42
    for top_p, allowed in [
        (0.25, {0}),
        (0.26, {0, 1}),
        (0.5, {0, 1}),
        (0.75, {0, 1, 2}),
        (0.76, {0, 1, 2, 3}),
    ]:
        seen = {int(run_op(x, [0, 1], [j], [8], [1.0], [top_p], [0])[0][0]) for j in range(200)}
        assert seen == allowed, (top_p, seen)


@settings(max_examples=60, deadline=None)
@given(
    V=st.integers(1, 40),
    seed=st.integers(-(2**63), 2**63 - 1),
    j=st.integers(0, 2**40),
    T=st.sampled_from([0.0, 0.3, 1.0, 3.0]),
    top_p=st.floats(0, 1.2, allow_nan=False),
    top_k=st.integers(-2, 45),
    vals=st.lists(st.floats(-60, 60, width=32), min_size=40, max_size=40),
)
def test_fuzz(V, seed, j, T, top_p, top_k, vals):
    x = np.array(vals[:V], np.float32)[None]
    got, _ = run_op(x, [0, 1], [j], [seed], [T], [top_p], [top_k])
    assert got[0] == ref.sample_tokens(x, [0, 1], [j], [seed], [T], [top_p], [top_k])[0]


def call(**override):
    """The op on a valid 2-row, 1-slot CPU call, with some arguments replaced (NumPy arrays)."""
    args = dict(
        logits=np.zeros((2, 3), np.float32),
        cu_seqlens_q_output=np.array([0, 2], np.int32),
        step_idx=np.zeros(1, np.int64),
        seed=np.zeros(1, np.int64),
        temperature=np.ones(1, np.float32),
        top_p=np.ones(1, np.float32),
        top_k=np.zeros(1, np.int64),
        sampled_tokens=np.zeros(2, np.int64),
    )
    args.update(override)
    speculate_sample_tokens(*(to_place(v, "cpu") for v in args.values()))


@pytest.mark.parametrize(
    "override,match",
    [
        (dict(logits=np.zeros((2, 3), np.int64)), "logits must be float32, float16 or bfloat16"),
        (dict(logits=np.zeros(3, np.float32)), "logits must have rank 2"),
        (dict(logits=np.zeros((2, 0), np.float32)), "logits must have 1 .. 2.22 columns"),
        (dict(top_k=np.zeros(2, np.int64)), r"top_k must have shape \[1\] or \[1, 1\]"),
        (dict(seed=np.zeros(1, np.int32)), "seed must be int64"),
        (dict(temperature=np.ones(1, np.float64)), "temperature must be float32"),
        (dict(cu_seqlens_q_output=np.array([0, 2], np.int64)), "cu_seqlens_q_output must be int32"),
        (dict(sampled_tokens=np.zeros(3, np.int64)), r"sampled_tokens must have shape \[2\]"),
    ],
)
def test_errors(override, match):
    call()  # the valid call passes
    with pytest.raises(Exception, match=match):
        call(**override)
