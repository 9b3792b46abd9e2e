"""The draft-model ops (draft_model_greedy_preprocess, draft_model_greedy_update, draft_model_accept,
draft_model_accept_preprocess) against their NumPy references (tests/reference/draft_model.py), alone and chained as the MTP proposer chains them, on
every place; logits dtypes, ties and NaN; bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from fastdeploy_spec import ops
from tests.helpers import LOGITS_DTYPES, PLACES, make_logits, to_place
from tests.reference import draft_model as reference

BATCHES = [0, 1, 5, 33]
VOCABS = [2, 3, 7, 50]
DRAFT_COUNTS = [1, 2, 5]  # K
WIDTHS = [2, 4, 12]  # D: 2 and 4 fill rows up
SEEDS = [0, 1]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("D", WIDTHS)
@pytest.mark.parametrize("K", DRAFT_COUNTS)
@pytest.mark.parametrize("B", BATCHES)
def test_each_op_matches_reference(B, K, D, seed, place):
    rng = np.random.default_rng([B, K, D, seed])
    V = int(rng.choice(VOCABS))
    state = reference.random_state(rng, B, K, D, V)
    for op in ("preprocess", "update", "accept", "accept_preprocess"):
        dev, ref = reference.Device(state, place), reference.Reference(state)
        if op == "update":
            substep = int(rng.integers(0, K))
            storage = make_logits(reference.tie_logits(rng, B, V), "float32")
            dev.update(storage, "float32", substep)
            ref.update(storage, "float32", substep)
        else:
            getattr(dev, op)()
            getattr(ref, op)()
        reference.assert_same(dev.host(), ref.s, f"{op} B={B} K={K} D={D} V={V}")


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("steps", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_mtp_steps_chain_like_reference(seed, dtype, steps, place):
    """Several decode steps as the proposer runs them: preprocess, `steps` updates, accept."""
    rng = np.random.default_rng([seed, steps, LOGITS_DTYPES.index(dtype)])
    B, K, D = 17, 5, 10
    V = int(rng.choice(VOCABS))
    state = reference.random_state(rng, B, K, D, V)
    dev, ref = reference.Device(state, place), reference.Reference(state)
    for step in range(4):
        dev.preprocess()
        ref.preprocess()
        for i in range(steps):
            storage = make_logits(reference.tie_logits(rng, B, V), dtype)
            dev.update(storage, dtype, i)
            ref.update(storage, dtype, i)
        reference.assert_same(dev.host(), ref.s, f"step {step} after drafting")
        accept_num = rng.integers(0, K + 2, B).astype(np.int32)
        for side in (dev.t, ref.s):
            if side is dev.t:
                side["accept_num"] = to_place(accept_num, place)
            else:
                side["accept_num"] = accept_num.copy()
        dev.accept()
        ref.accept()
        reference.assert_same(dev.host(), ref.s, f"step {step} after accept")


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("seed", SEEDS)
def test_deferred_accept_chain_equals_the_separate_ops(seed, place):
    """Steps with the accept deferred into the next step's start (draft_model_accept_preprocess) leave
    the state the separate ops leave once the last accept is applied; the slots' kinds change between
    steps (requests start, stop, finish)."""
    rng = np.random.default_rng([seed, 77])
    B, K, D, V = 23, 4, 9, 5
    state = reference.random_state(rng, B, K, D, V)
    fused, ref = reference.Device(state, place), reference.Reference(state)
    ref.preprocess()
    fused.preprocess()
    for step in range(5):
        for i in range(2):
            storage = make_logits(reference.tie_logits(rng, B, V), "float32")
            fused.update(storage, "float32", i)
            ref.update(storage, "float32", i)
        reference.assert_same(fused.host(), ref.s, f"step {step} after drafting")
        news = reference.random_state(rng, B, K, D, V)
        changed = {
            k: news[k]
            for k in (
                "accept_tokens",
                "accept_num",
                "base_model_seq_lens_encoder",
                "base_model_seq_lens_decoder",
                "base_model_stop_flags",
            )
        }
        for k, v in reference.flat(changed).items():
            fused.t[k] = to_place(changed[k], place)
            ref.s[k] = v.copy()
        ref.accept()
        ref.preprocess()
        fused.accept_preprocess()
        reference.assert_same(fused.host(), ref.s, f"step {step} after the next start")


ACCEPT_PREPROCESS_CASES = {
    # name: slot overrides, then step_idx, pre_ids row, input_ids after the call
    "decoding, two accepted": (
        dict(step_idx=[[4]], mtp_draft_num=[2], accept_tokens=[[9, 2, 0]], accept_num=[2]),
        4,
        [-1, 7, 8, 9, 2, -1],
        2,
    ),
    "decoding, none accepted": (
        dict(step_idx=[[4]], mtp_draft_num=[2], accept_num=[0]),
        2,
        [-1, 7, 8, 9, 6, -1],
        8,
    ),
    "decoding, negative last token": (
        dict(step_idx=[[2]], mtp_draft_num=[0], accept_tokens=[[-3, 5, 0]], accept_num=[1]),
        3,
        [-1, 7, 8, -3, 6, -1],
        0,
    ),
    "decoding, row full": (
        dict(step_idx=[[5]], mtp_draft_num=[0], accept_num=[3]),
        5,
        [-1, 7, 8, 9, 6, -1],
        0,
    ),
    "prefill clears the accepted tokens too": (
        dict(step_idx=[[4]], mtp_draft_num=[1], accept_num=[2], base_model_seq_lens_encoder=[6]),
        0,
        [-1] * 6,
        0,
    ),
    "stopped keeps the accepted tokens": (
        dict(
            step_idx=[[2]],
            mtp_draft_num=[0],
            accept_num=[2],
            accept_tokens=[[4, 5, 0]],
            base_model_stop_flags=[[True]],
        ),
        4,
        [-1, 7, 8, 4, 5, -1],
        0,
    ),
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", list(ACCEPT_PREPROCESS_CASES))
def test_accept_preprocess_edge_cases(name, place):
    over, step, pre, ids = ACCEPT_PREPROCESS_CASES[name]
    state = dict(
        one_slot(),
        pre_ids=np.array([[-1, 7, 8, 9, 6, -1]], np.int64),
        accept_tokens=np.array([[1, 1, 1]], np.int64),
        base_model_seq_lens_decoder=np.array([5], np.int32),
    )
    state.update({k: np.asarray(v, state[k].dtype) for k, v in over.items()})
    dev = reference.Device(state, place)
    dev.accept_preprocess()
    got = dev.host()
    assert got["step_idx"].tolist() == [step] and got["pre_ids"][0].tolist() == pre
    assert got["input_ids"].tolist() == [ids] and got["mtp_draft_num"].tolist() == [0]


def one_slot(**over) -> dict:
    """One decoding slot: generated 4 5 6 (step_idx 3), nothing unverified, D = 8, K = 3."""
    s = dict(
        input_ids=np.array([[-7]], np.int64),
        seq_lens_decoder=np.array([0], np.int32),
        step_idx=np.array([[3]], np.int64),
        pre_ids=np.array([[-1, 4, 5, 6, -1, -1, -1, -1]], np.int64),
        mtp_draft_num=np.array([0], np.int32),
        max_dec_len=np.array([[0]], np.int64),
        base_model_seq_lens_this_time=np.array([1], np.int32),
        base_model_seq_lens_encoder=np.array([0], np.int32),
        base_model_seq_lens_decoder=np.array([9], np.int32),
        base_model_stop_flags=np.array([[False]]),
        base_model_max_dec_len=np.array([[30]], np.int64),
        base_model_draft_tokens=np.full((1, 4), -1, np.int64),
        accept_tokens=np.array([[7, 8, 9, 10]], np.int64),
        accept_num=np.array([2], np.int32),
    )
    s.update({k: np.asarray(v, s[k].dtype).reshape(s[k].shape) for k, v in over.items()})
    return s


PREPROCESS_CASES = {
    # name: (overrides, input_ids, step_idx, base seq_lens_this_time, draft seq_lens_decoder)
    "decoding": ({}, 6, 3, 1, 9),
    "drops_unverified_drafts": (dict(mtp_draft_num=[2]), 4, 1, 1, 9),
    "more_drafts_than_tokens": (dict(mtp_draft_num=[9]), 0, 0, 1, 9),
    "prefill_clears": (dict(base_model_seq_lens_encoder=[5]), 0, 0, 1, 0),
    "stopped_is_idle": (
        dict(base_model_stop_flags=[[True]], base_model_seq_lens_this_time=[4]),
        0,
        3,
        4,
        0,
    ),
    "empty_is_idle": (
        dict(base_model_seq_lens_decoder=[0], base_model_seq_lens_this_time=[0]),
        0,
        3,
        0,
        0,
    ),
    "no_token_yet": (dict(step_idx=[[0]]), 0, 0, 1, 9),
    "step_past_row": (dict(step_idx=[[50]]), -1 + 1, 7, 1, 9),
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", list(PREPROCESS_CASES))
def test_preprocess_edge_cases(name, place):
    over, ids, step, slt, dec = PREPROCESS_CASES[name]
    state = one_slot(**over)
    dev = reference.Device(state, place)
    dev.preprocess()
    got = dev.host()
    assert got["input_ids"].tolist() == [ids]
    assert got["step_idx"].tolist() == [step]
    assert got["base_model_seq_lens_this_time"].tolist() == [slt]
    assert got["seq_lens_decoder"].tolist() == [dec]
    assert got["max_dec_len"].tolist() == [30] and got["mtp_draft_num"].tolist() == [0]
    if name == "prefill_clears":
        assert (got["pre_ids"] == -1).all()
    else:
        np.testing.assert_array_equal(got["pre_ids"], state["pre_ids"])


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
def test_update_greedy_choice(dtype, place):
    values = np.array(
        [
            [0.5, 2.0, 2.0, 1.0],  # tie: the lower id
            [np.nan, -1.0, np.nan, -2.0],  # NaN counts as -inf
            [-np.inf, -np.inf, -np.inf, -np.inf],  # all equal: id 0
            [np.nan, np.nan, np.nan, np.nan],  # all NaN: id 0
            [-0.0, 0.0, -1.0, -0.0],  # -0 ties +0
            [-3.0, -2.0, -1.0, np.inf],
        ],
        np.float32,
    )
    want = [1, 1, 0, 0, 0, 3]
    assert reference.greedy_ids(values).tolist() == want
    B = len(values)
    state = {k: np.repeat(v, B, axis=0) for k, v in one_slot(seq_lens_decoder=[9]).items()}
    dev = reference.Device(state, place)
    dev.update(make_logits(values, dtype), dtype, 0)
    got = dev.host()
    assert got["base_model_draft_tokens"][:, 1].tolist() == want
    assert got["pre_ids"][:, 4].tolist() == want and got["input_ids"].tolist() == want
    assert got["step_idx"].tolist() == [4] * B and got["mtp_draft_num"].tolist() == [1] * B
    assert got["base_model_seq_lens_this_time"].tolist() == [2] * B
    assert got["seq_lens_decoder"].tolist() == [10] * B


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize(
    "V,peaks",
    [
        (1001, [0, 1, 7, 8, 500, 992, 999, 1000, 3]),
        # On sm_90 a row this long is split over a cluster of blocks (16 KB slices): peaks at the edges
        # of the slices, and ties across slices (the last row: the same maximum in two slices).
        (40001, [0, 4095, 4096, 4097, 8191, 20000, 39999, 40000, 12]),
    ],
)
def test_update_large_vocabulary_and_misaligned_rows(V, peaks, place):
    # Odd V: rows start off 16-byte boundaries, so head, vector body and tail are all searched.
    rng = np.random.default_rng(3)
    B = len(peaks)
    values = rng.standard_normal((B, V)).astype(np.float32)
    values[np.arange(B), peaks] = 10.0
    values[-1, V - 7] = 10.0  # a tie with the row's peak, later in the row: the lower id wins
    for dtype in LOGITS_DTYPES:
        state = {k: np.repeat(v, B, axis=0) for k, v in one_slot(seq_lens_decoder=[9]).items()}
        dev = reference.Device(state, place)
        dev.update(make_logits(values, dtype), dtype, 0)
        assert dev.host()["base_model_draft_tokens"][:, 1].tolist() == peaks, dtype


@pytest.mark.parametrize("place", PLACES)
def test_update_skips_slots_that_cannot_draft(place):
    # Not decoding (draft-side seq_lens_decoder 0), a missed earlier substep, a full row.
    state = {k: np.repeat(v, 3, axis=0) for k, v in one_slot(seq_lens_decoder=[9]).items()}
    state["seq_lens_decoder"][0] = 0
    state["mtp_draft_num"][1] = 0  # substep 1 below needs 1
    state["step_idx"][2] = 7  # D - 1: no room
    dev = reference.Device(state, place)
    dev.update(np.ones((3, 4), np.float32), "float32", 1)
    got = dev.host()
    for k in reference.UPD_ORDER:
        np.testing.assert_array_equal(got[k], reference.flat(state)[k], err_msg=k)


ACCEPT_CASES = {
    # name: (overrides, step_idx, pre_ids)
    "append": ({}, 5, [-1, 4, 5, 6, 7, 8, -1, -1]),
    "drafts_replaced": (
        dict(step_idx=[[5]], mtp_draft_num=[2], pre_ids=[[-1, 4, 5, 6, 1, 1, -1, -1]]),
        5,
        [-1, 4, 5, 6, 7, 8, -1, -1],
    ),
    "none_accepted_drops_drafts": (
        dict(step_idx=[[4]], mtp_draft_num=[1], accept_num=[0]),
        3,
        [-1, 4, 5, 6, -1, -1, -1, -1],
    ),
    "row_fills_up": (dict(step_idx=[[6]], accept_num=[4]), 7, [-1, 4, 5, 6, -1, -1, -1, 7]),
    "accept_num_past_width": (dict(accept_num=[9]), 7, [-1, 4, 5, 6, 7, 8, 9, 10]),
    "negative_accept_num": (dict(accept_num=[-3]), 3, [-1, 4, 5, 6, -1, -1, -1, -1]),
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", list(ACCEPT_CASES))
def test_accept_edge_cases(name, place):
    over, step, pre = ACCEPT_CASES[name]
    dev = reference.Device(one_slot(**over), place)
    dev.accept()
    got = dev.host()
    assert got["step_idx"].tolist() == [step] and got["pre_ids"][0].tolist() == pre
    assert got["mtp_draft_num"].tolist() == [0]


def _bad(op: str, name: str, value):
    state = one_slot()
    t = {k: to_place(v, "cpu") for k, v in state.items()}
    t[name] = value(t[name]) if callable(value) else to_place(value, "cpu")
    if op == "preprocess":
        ops.draft_model_greedy_preprocess(*(t[k] for k in reference.PRE_ORDER))
    elif op == "update":
        logits = t.pop("logits", None)
        ops.draft_model_greedy_update(
            logits if logits is not None else to_place(np.zeros((1, 4), np.float32), "cpu"),
            *(t[k] for k in reference.UPD_ORDER),
            t.get("substep", 0),
        )
    elif op == "accept":
        ops.draft_model_accept(*(t[k] for k in reference.ACC_ORDER))
    else:
        ops.draft_model_accept_preprocess(*(t[k] for k in reference.ACC_PRE_ORDER))


BAD_INPUTS = [
    ("preprocess", "input_ids", np.zeros((1, 1), np.int32), "input_ids must be int64, got int32"),
    ("preprocess", "pre_ids", np.zeros((1, 1, 8), np.int64), "pre_ids must be 2-D"),
    (
        "preprocess",
        "step_idx",
        np.zeros((2, 1), np.int64),
        r"step_idx must have shape \[1\] or \[1, 1\]",
    ),
    (
        "preprocess",
        "base_model_stop_flags",
        np.zeros((1, 1), np.int32),
        "base_model_stop_flags must be bool, got int32",
    ),
    ("preprocess", "pre_ids", np.zeros((1, 0), np.int64), "pre_ids must have at least one column"),
    (
        "update",
        "logits",
        np.zeros((1, 4), np.int64),
        "logits must be float32, float16 or bfloat16, got int64",
    ),
    ("update", "logits", np.zeros((1, 0), np.float32), "logits must have 1 .. 2"),
    ("update", "logits", np.zeros((0, 4), np.float32), r"logits must have at least 1 rows"),
    ("update", "substep", 3, r"substep must be in \[0, K - 1\] .* got 3"),
    ("update", "substep", -1, r"substep must be in \[0, K - 1\] .* got -1"),
    ("update", "mtp_draft_num", np.zeros(1, np.int64), "mtp_draft_num must be int32, got int64"),
    (
        "accept",
        "accept_tokens",
        np.zeros((1, 0), np.int64),
        "accept_tokens must have at least one column",
    ),
    ("accept", "accept_num", np.zeros(1, np.int64), "accept_num must be int32, got int64"),
    ("accept", "pre_ids", np.zeros((0, 8), np.int64), "pre_ids must have at least 1 rows"),
    (
        "accept_preprocess",
        "accept_tokens",
        np.zeros((1, 0), np.int64),
        "accept_tokens must have at least one column",
    ),
    ("accept_preprocess", "accept_num", np.zeros(2, np.int32), r"accept_num must have shape \[1\]"),
    (
        "accept_preprocess",
        "base_model_stop_flags",
        np.zeros((1, 1), np.int32),
        "base_model_stop_flags must be bool, got int32",
    ),
    (
        "accept_preprocess",
        "pre_ids",
        np.zeros((1, 0), np.int64),
        "pre_ids must have at least one column",
    ),
]


OP_NAMES = {
    "preprocess": "draft_model_greedy_preprocess",
    "update": "draft_model_greedy_update",
    "accept": "draft_model_accept",
    "accept_preprocess": "draft_model_accept_preprocess",
}


@pytest.mark.parametrize(
    "op,name,value,match",
    BAD_INPUTS,
    ids=[f"{op}-{name}-{i}" for i, (op, name, _, _) in enumerate(BAD_INPUTS)],
)
def test_bad_inputs(op, name, value, match):
    with pytest.raises((OSError, RuntimeError, ValueError), match=f"{OP_NAMES[op]}: {match}"):
        if name == "substep":
            state = one_slot()
            t = {k: to_place(v, "cpu") for k, v in state.items()}
            ops.draft_model_greedy_update(
                to_place(np.zeros((1, 4), np.float32), "cpu"),
                *(t[k] for k in reference.UPD_ORDER),
                value,
            )
        elif name == "logits":
            state = one_slot()
            t = {k: to_place(v, "cpu") for k, v in state.items()}
            ops.draft_model_greedy_update(
                to_place(value, "cpu"), *(t[k] for k in reference.UPD_ORDER), 0
            )
        else:
            _bad(op, name, value)


@pytest.mark.gpu
def test_mixed_places_rejected():
    t = {k: to_place(v, "gpu") for k, v in one_slot().items()}
    t["pre_ids"] = to_place(one_slot()["pre_ids"], "cpu")
    with pytest.raises((OSError, RuntimeError, ValueError), match="pre_ids is on CPU"):
        ops.draft_model_accept(*(t[k] for k in reference.ACC_ORDER))
