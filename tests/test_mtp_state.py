"""FastDeploy's MTP bookkeeping ops under their upstream contracts (draft_model_preprocess,
draft_model_update, draft_model_postprocess, draft_model_set_value_by_flags, eagle_get_hidden_states,
eagle_get_self_hidden_states) against their NumPy references (tests/reference/mtp_state.py): grids of
random states on every place, named edge cases, hostile values (every index clamped), bad inputs,
hypothesis fuzzing; the hidden-state gathers bit for bit in float32, float16 and bfloat16."""

from __future__ import annotations

import numpy as np
import paddle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastdeploy_spec import ops
from tests.helpers import PLACES, grid, logits_to_place, to_place
from tests.reference import mtp_state as ref

BATCHES = [0, 1, 5, 33, 300]  # 300: more slots than one block's threads
WIDTHS = [1, 3, 6]  # K + 1
SEEDS = [0, 1, 2]
ATTRS = {"num_model_step": 1, "is_splitwise_prefill": False, "max_seq_len": 64, "substep": 0}


def random_state(rng: np.random.Generator, B: int, W: int, D: int, hostile: bool = False) -> dict:
    """A draft side and a target side of B slots (K + 1 = W columns, pre_ids of D columns). Hostile:
    lengths and steps outside every range (negative, past the widths)."""
    lo, hi = (-3, D + 4) if hostile else (0, D)
    i32 = lambda a, b: rng.integers(a, b, B).astype(np.int32)
    i64 = lambda a, b: rng.integers(a, b, B).astype(np.int64)
    flags = lambda p: rng.random(B) < p
    return {
        "draft_tokens": rng.integers(-1, 9, (B, W)).astype(np.int64),
        "input_ids": rng.integers(0, 9, (B, D)).astype(np.int64),
        "stop_flags": flags(0.2),
        "seq_lens_this_time": i32(-1 if hostile else 0, W + 2),
        "seq_lens_encoder": np.where(flags(0.3), i32(1, D + 2 if hostile else max(D, 2)), 0).astype(
            np.int32
        ),
        "seq_lens_decoder": i32(-2 if hostile else 0, 2 * D),
        "step_idx": i64(lo, hi),
        "not_need_stop": np.array([rng.random() < 0.5]),
        "pre_ids": rng.integers(-1, 9, (B, D)).astype(np.int64),
        "accept_tokens": rng.integers(0, 9, (B, W)).astype(np.int64),
        "accept_num": i32(-2 if hostile else 0, W + (3 if hostile else 1)),
        "target_model_seq_lens_encoder": i32(0, 3),
        "target_model_seq_lens_decoder": i32(0, 2 * D),
        "target_model_step_idx": i64(lo, hi + W),
        "target_model_stop_flags": flags(0.2),
        "max_dec_len": i64(0 if hostile else 1, D + 3),
        "target_model_draft_tokens": rng.integers(-1, 9, (B, W)).astype(np.int64),
    }


# The per-slot state every op below reads under random_state's names.
SLOT_STATE = ("seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "step_idx")


def pick(s: dict, *names: str) -> dict:
    return {k: s[k] for k in names}


def update_state(rng: np.random.Generator, B: int, W: int, D: int, hostile: bool = False) -> dict:
    s = random_state(rng, B, W, D, hostile)
    n_active = int((s["seq_lens_this_time"] > 0).sum())
    extra = int(rng.integers(-2, 2)) if hostile else 0  # fewer tokens than active slots: -1 read
    return {
        "inter_next_tokens": rng.integers(0, 9, max(n_active + extra, 0)).astype(np.int64),
        **pick(s, "draft_tokens", "pre_ids", *SLOT_STATE),
        "cu_seqlens_q_output": np.zeros(B + 1, np.int32),
        **pick(s, "stop_flags", "not_need_stop", "max_dec_len"),
        "end_ids": np.array([2], np.int64),
        "base_model_draft_tokens": s["target_model_draft_tokens"],
    }


def post_state(rng, B, W, D, hostile=False) -> dict:
    s = random_state(rng, B, W, D, hostile)
    return {
        "base_model_draft_tokens": s["draft_tokens"],
        "base_model_seq_lens_this_time": s["seq_lens_this_time"],
        "base_model_seq_lens_encoder": np.where(rng.random(B) < 0.3, 2, 0).astype(np.int32),
        "base_model_stop_flags": s["stop_flags"],
    }


def svf_state(rng, B, W, D, hostile=False) -> dict:
    s = random_state(rng, B, W, D, hostile)
    return {**pick(s, "draft_tokens", "stop_flags", *SLOT_STATE), "pre_ids_all": s["pre_ids"]}


OPS = {
    "preprocess": (
        ops.draft_model_preprocess,
        ref.PRE_ORDER,
        random_state,
        lambda t, a: ref.preprocess_ref(t, a["num_model_step"], a["is_splitwise_prefill"]),
        ("num_model_step", "is_splitwise_prefill"),
    ),
    "update": (
        ops.draft_model_update,
        ref.UPD_ORDER,
        update_state,
        lambda t, a: ref.update_ref(t, a["max_seq_len"], a["substep"]),
        ("max_seq_len", "substep"),
    ),
    "postprocess": (
        ops.draft_model_postprocess,
        ref.POST_ORDER,
        post_state,
        lambda t, a: ref.postprocess_ref(t),
        (),
    ),
    "set_value_by_flags": (
        ops.draft_model_set_value_by_flags,
        ref.SVF_ORDER,
        svf_state,
        lambda t, a: ref.set_value_by_flags_ref(t),
        (),
    ),
}


def run_both(op: str, state: dict, place: str, attrs: dict) -> None:
    fn, order, _, reference, attr_names = OPS[op]
    t = {k: to_place(v, place) for k, v in state.items()}
    fn(*(t[k] for k in order), *(attrs[a] for a in attr_names))
    want = {k: v.copy() for k, v in state.items()}
    reference(want, attrs)
    for k in order:
        np.testing.assert_array_equal(t[k].numpy(), want[k], err_msg=f"{op}: {k} (attrs {attrs})")


@pytest.mark.parametrize("place", PLACES)
@grid(("op", list(OPS)), ("B", BATCHES), ("W", WIDTHS), ("seed", SEEDS), ("hostile", [False, True]))
def test_op_matches_reference(op, B, W, seed, hostile, place):
    rng = np.random.default_rng([B, W, seed, hostile, list(OPS).index(op)])
    D = int(rng.choice([2, 5, 12]))
    attrs = dict(
        ATTRS,
        num_model_step=int(rng.integers(0, 3)),
        is_splitwise_prefill=bool(rng.random() < 0.3),
        substep=int(rng.integers(0, W - 1)) if W >= 2 else 0,
    )
    if op == "update" and W < 2:
        pytest.skip("draft_model_update needs K + 1 >= 2 columns")
    run_both(op, OPS[op][2](rng, B, W, D, hostile), place, attrs)


@pytest.mark.parametrize("place", PLACES)
def test_preprocess_named_cases(place):
    """Slot 0 stopped by the target; 1 at the end of max_dec_len (skipped, but not on a splitwise
    prefill node); 2 one step before it (runs); 3 prefill of 3 tokens; 4 decoding with 2 accepted; 5
    decoding with 0 accepted."""
    s = random_state(np.random.default_rng(0), 6, 3, 8)
    s.update(
        target_model_stop_flags=np.array([1, 0, 0, 0, 0, 0], bool),
        target_model_step_idx=np.array([3, 9, 8, 1, 5, 5], np.int64),
        max_dec_len=np.array([20, 10, 10, 20, 20, 20], np.int64),
        seq_lens_encoder=np.array([0, 0, 0, 3, 0, 0], np.int32),
        accept_num=np.array([1, 1, 1, 1, 2, 0], np.int32),
        target_model_seq_lens_decoder=np.array([4, 4, 4, 0, 9, 9], np.int32),
    )
    t = {k: to_place(v, place) for k, v in s.items()}
    ops.draft_model_preprocess(*(t[k] for k in ref.PRE_ORDER), 1, False)
    assert t["stop_flags"].numpy().tolist() == [True, True, False, False, False, False]
    assert t["seq_lens_this_time"].numpy().tolist() == [0, 0, 1, 3, 2, 0]
    assert t["step_idx"].numpy().tolist() == [0, 0, 7, 0, 3, 5]
    assert t["input_ids"].numpy()[3, 2] == s["accept_tokens"][3, 0]
    assert t["pre_ids"].numpy()[4, 3:5].tolist() == s["accept_tokens"][4, :2].tolist()
    assert bool(t["not_need_stop"].numpy()[0])
    assert (t["target_model_draft_tokens"].numpy()[:, 1:] == -1).all()
    t = {k: to_place(v, place) for k, v in s.items()}
    ops.draft_model_preprocess(*(t[k] for k in ref.PRE_ORDER), 1, True)  # a splitwise prefill node
    assert t["stop_flags"].numpy().tolist() == [True, False, False, False, False, False]


@pytest.mark.parametrize("place", PLACES)
def test_not_need_stop_false_when_nothing_runs(place):
    s = random_state(np.random.default_rng(1), 4, 3, 8)
    s["target_model_stop_flags"][:] = True
    s["not_need_stop"][:] = True
    t = {k: to_place(v, place) for k, v in s.items()}
    ops.draft_model_preprocess(*(t[k] for k in ref.PRE_ORDER), 1, False)
    assert not t["not_need_stop"].numpy()[0]
    u = update_state(np.random.default_rng(2), 3, 3, 8)
    u["seq_lens_this_time"][:] = 1
    u["stop_flags"][:] = True
    u["not_need_stop"][:] = True
    t = {k: to_place(v, place) for k, v in u.items()}
    ops.draft_model_update(*(t[k] for k in ref.UPD_ORDER), 64, 1)
    assert not t["not_need_stop"].numpy()[0]


@pytest.mark.parametrize("place", PLACES)
def test_update_takes_tokens_in_active_order(place):
    """Slots 0 and 2 are idle: slot 1 takes token 0 of inter_next_tokens, slot 3 token 1."""
    u = update_state(np.random.default_rng(3), 4, 3, 8)
    u.update(
        seq_lens_this_time=np.array([0, 1, 0, 1], np.int32),
        stop_flags=np.zeros(4, bool),
        seq_lens_encoder=np.zeros(4, np.int32),
        seq_lens_decoder=np.array([5, 5, 5, 5], np.int32),
        step_idx=np.array([2, 2, 2, 2], np.int64),
        max_dec_len=np.full(4, 100, np.int64),
        inter_next_tokens=np.array([[7], [8]], np.int64),
    )
    t = {k: to_place(v, place) for k, v in u.items()}
    ops.draft_model_update(*(t[k] for k in ref.UPD_ORDER), 64, 1)
    assert t["base_model_draft_tokens"].numpy()[[1, 3], 2].tolist() == [7, 8]
    assert t["pre_ids"].numpy()[[1, 3], 3].tolist() == [7, 8]


# ---- The hidden-state gathers -----------------------------------------------------------------------

HIDDEN_DTYPES = ["float32", "float16", "bfloat16"]


def hidden_input(rng, N: int, H: int, dtype: str) -> paddle.Tensor:
    bits = rng.integers(0, 2**16, (N, H * (2 if dtype == "float32" else 1)), dtype=np.uint16)
    if dtype == "float32":
        return bits.view(np.float32)  # every bit pattern, NaNs included: copied, never computed on
    if dtype == "float16":
        return bits.view(np.float16)
    # bfloat16 reaches Paddle through float32 and a cast (tests/helpers.py), which keeps every value
    # but may change a NaN's payload: no NaN here.
    return np.where((bits & 0x7F80) == 0x7F80, bits & 0x807F, bits).astype(np.uint16)


def hidden_to_place(x: np.ndarray, dtype: str, place: str) -> paddle.Tensor:
    return logits_to_place(x, dtype, place)


def bits_of(t: paddle.Tensor) -> np.ndarray:
    a = t.numpy()
    return a.view(np.uint16) if a.dtype.itemsize == 2 else a.view(np.uint32)


def hidden_state(rng, B: int, hostile: bool) -> tuple[dict, int]:
    K1 = 4
    base = rng.integers(-1 if hostile else 0, K1 + 1, B).astype(np.int32)
    enc = np.where(rng.random(B) < 0.25, rng.integers(1, 5, B), 0).astype(np.int32)
    t = {
        "seq_lens_this_time": rng.integers(0, 3, B).astype(np.int32),
        "seq_lens_encoder": enc,
        "seq_lens_decoder": rng.integers(0, 9, B).astype(np.int32),
        "stop_flags": rng.random(B) < 0.2,
        "accept_nums": rng.integers(-1 if hostile else 0, K1 + (3 if hostile else 1), B).astype(
            np.int32
        ),
        "base_model_seq_lens_this_time": np.where(enc > 0, enc, base).astype(np.int32),
        "base_model_seq_lens_encoder": enc.copy(),
        "last_seq_lens_this_time": rng.integers(-1 if hostile else 0, K1 + 1, B).astype(np.int32),
    }
    rows = int(np.maximum(t["base_model_seq_lens_this_time"], 0).sum())
    N = max(rows + (int(rng.integers(-3, 3)) if hostile else 0), 0)
    return t, N


@pytest.mark.parametrize("place", PLACES)
@grid(
    ("which", ["target", "self"]),
    ("dtype", HIDDEN_DTYPES),
    ("B", [0, 1, 7, 300]),
    ("H", [1, 8, 13]),
    ("seed", [0, 1]),
    ("hostile", [False, True]),
)
def test_hidden_gather_bits(which, dtype, B, H, seed, hostile, place):
    rng = np.random.default_rng([B, H, seed, hostile, HIDDEN_DTYPES.index(dtype), which == "self"])
    t, N = hidden_state(rng, B, hostile)
    x = hidden_input(rng, N, H, dtype)
    t["input"] = x
    if which == "target":
        want, count = ref.hidden_ref(t)
        dev = {k: to_place(v, place) for k, v in t.items() if k != "input"}
        out, n = ops.eagle_get_hidden_states(
            hidden_to_place(x, dtype, place), *(dev[k] for k in ref.HIDDEN_ORDER[1:]), 4
        )
    else:
        want, count = ref.self_hidden_ref(t)
        dev = {k: to_place(v, place) for k, v in t.items() if k != "input"}
        out, n = ops.eagle_get_self_hidden_states(
            hidden_to_place(x, dtype, place), *(dev[k] for k in ref.SELF_ORDER[1:])
        )
    assert n.numpy().tolist() == [count]
    assert out.shape == [N, H]
    got = bits_of(out)
    np.testing.assert_array_equal(got, want.view(got.dtype).reshape(got.shape))


# ---- Bad inputs ------------------------------------------------------------------------------------


def test_bad_inputs_are_named():
    rng = np.random.default_rng(5)
    s = {k: to_place(v, "cpu") for k, v in random_state(rng, 3, 3, 6).items()}
    args = lambda **kw: [kw.get(k, s[k]) for k in ref.PRE_ORDER]
    with pytest.raises(
        Exception, match="draft_model_preprocess: accept_num must be int32, got int64"
    ):
        ops.draft_model_preprocess(
            *args(accept_num=to_place(np.zeros(3, np.int64), "cpu")), 1, False
        )
    with pytest.raises(Exception, match="draft_model_preprocess: step_idx must have shape \\[3\\]"):
        ops.draft_model_preprocess(*args(step_idx=to_place(np.zeros(4, np.int64), "cpu")), 1, False)
    with pytest.raises(
        Exception, match="draft_model_preprocess: not_need_stop must have at least one element"
    ):
        ops.draft_model_preprocess(
            *args(not_need_stop=to_place(np.zeros(0, bool), "cpu")), 1, False
        )
    with pytest.raises(Exception, match="num_model_step must be >= 0"):
        ops.draft_model_preprocess(*args(), -1, False)
    u = {k: to_place(v, "cpu") for k, v in update_state(rng, 3, 3, 6).items()}
    with pytest.raises(Exception, match="draft_model_update: substep must be in \\[0, K - 1\\]"):
        ops.draft_model_update(*(u[k] for k in ref.UPD_ORDER), 64, 2)
    with pytest.raises(Exception, match="draft_model_update: inter_next_tokens must be int64"):
        ops.draft_model_update(
            to_place(np.zeros(3, np.int32), "cpu"), *(u[k] for k in ref.UPD_ORDER[1:]), 64, 0
        )
    h, N = hidden_state(rng, 3, False)
    dev = {k: to_place(v, "cpu") for k, v in h.items()}
    with pytest.raises(
        Exception,
        match="eagle_get_hidden_states: input must be float16, bfloat16 or float32, got int64",
    ):
        ops.eagle_get_hidden_states(
            to_place(np.zeros((N, 2), np.int64), "cpu"), *(dev[k] for k in ref.HIDDEN_ORDER[1:]), 4
        )
    with pytest.raises(Exception, match="eagle_get_self_hidden_states: input must have rank 2"):
        ops.eagle_get_self_hidden_states(
            to_place(np.zeros(N, np.float32), "cpu"), *(dev[k] for k in ref.SELF_ORDER[1:])
        )


@pytest.mark.gpu
def test_mixed_places_rejected():
    from tests.helpers import assert_mixed_places_rejected, gpu_available

    if not gpu_available():
        pytest.skip("no GPU")
    s = random_state(np.random.default_rng(6), 3, 3, 6)
    assert_mixed_places_rejected(
        lambda *a: ops.draft_model_preprocess(*a, 1, False), ref.PRE_ORDER, s, "pre_ids"
    )


# ---- Fuzzing ---------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    B=st.integers(0, 40),
    W=st.integers(2, 7),
    D=st.integers(1, 14),
    op=st.sampled_from(list(OPS)),
    hostile=st.booleans(),
)
def test_fuzz_ops_match_reference(seed, B, W, D, op, hostile):
    rng = np.random.default_rng(seed)
    attrs = dict(
        ATTRS,
        num_model_step=int(rng.integers(-0, 4)),
        is_splitwise_prefill=bool(rng.random() < 0.5),
        substep=int(rng.integers(0, W - 1)),
    )
    run_both(op, OPS[op][2](rng, B, W, D, hostile), "cpu", attrs)
