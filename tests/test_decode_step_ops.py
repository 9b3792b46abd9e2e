"""FastDeploy's decode-step ops (verify_draft_tokens, unified_update_model_status,
naive_update_model_status, top_p_candidates) against their NumPy references (tests/reference/), on
every place: random grids with tiny vocabularies, named edge cases, B = 0, 1, 1025, 1500, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from fastdeploy_spec.ops import (
    VerifyStrategy,
    top_p_candidates,
    verify_draft_tokens,
)
from tests.helpers import PLACES, grid, to_place
from tests.reference import unified_update as uu
from tests.reference import verify_draft_tokens as vd
from tests.reference.top_p_candidates import top_p_candidates_ref

BATCHES = [0, 1, 3, 17, 1025, 1500]
STRATEGIES = [vd.TOPP, vd.GREEDY, vd.TARGET_MATCH]
ERRORS = (OSError, RuntimeError, ValueError)


def _small(B: int) -> bool:
    return B < 1000


# ---- verify_draft_tokens -----------------------------------------------------------------------------


@grid(
    ("place", PLACES),
    ("strategy", STRATEGIES),
    ("vocab", [2, 5]),
    ("K", [0, 1, 4]),
    ("B", BATCHES),
    ("seed", [0, 1]),
)
def test_verify_matches_reference(seed, B, K, vocab, strategy, place):
    if not _small(B) and (K != 4 or seed):
        pytest.skip("large batches once per strategy and place")
    rng = np.random.default_rng([seed, B, K, vocab, strategy])
    vd.check(vd.random_case(rng, B, K, vocab, strategy, seeds=bool(seed)), place)


@grid(("place", PLACES), ("strategy", STRATEGIES), ("flag", ["accept_all", "reject_all"]))
def test_verify_accept_all_reject_all(flag, strategy, place):
    rng = np.random.default_rng([7, strategy])
    for _ in range(5):
        vd.check(vd.random_case(rng, 40, 4, 3, strategy, **{flag: True}), place)


def _one(
    drafts,
    target,
    *,
    slt=None,
    step=0,
    max_dec=100,
    ends=(9,),
    enc=0,
    reasoning=0,
    stop=False,
    block=False,
    strategy=vd.GREEDY,
    accept_all=False,
):
    W = len(drafts)
    slt = W if slt is None else slt
    return dict(
        step_output_ids=np.zeros((1, W), np.int64),
        step_output_len=np.zeros(1, np.int32),
        step_input_ids=np.array([drafts], np.int64),
        target_tokens=np.array(target, np.int64),
        candidate_ids=None,
        candidate_scores=None,
        candidate_lens=None,
        topp=np.ones(1, np.float32),
        stop_flags=np.array([stop]),
        seq_lens_encoder=np.array([enc], np.int32),
        seq_lens_this_time=np.array([slt], np.int32),
        end_tokens=np.array(ends, np.int64),
        is_block_step=np.array([block]),
        cu_seqlens_q_output=np.zeros(1, np.int32),
        reasoning_status=np.array([reasoning], np.int32),
        max_dec_len=np.array([max_dec], np.int64),
        step_idx=np.array([step], np.int64),
        max_seq_len=64,
        verify_window=2,
        verify_strategy=strategy,
        reject_all=False,
        accept_all=accept_all,
    )


VERIFY_EDGES = {  # name -> (case, emitted tokens)
    "all_accepted_plus_bonus": (_one([1, 5, 6, 7], [5, 6, 7, 8]), [5, 6, 7, 8]),
    "first_rejected": (_one([1, 4, 6, 7], [5, 6, 7, 8]), [5]),
    "end_token_mid_draft": (_one([1, 5, 9, 7], [5, 9, 7, 8]), [5, 9]),
    "end_token_as_target": (_one([1, 5, 6, 7], [5, 6, 9, 8]), [5, 6, 9]),
    "max_dec_len_mid_draft": (_one([1, 5, 6, 7], [5, 6, 7, 8], step=8, max_dec=10), [5, 9]),
    "max_dec_len_without_end_tokens": (
        _one([1, 5, 6, 7], [5, 6, 7, 8], step=8, max_dec=10, ends=()),
        [5, 6],
    ),
    "prefill_target_only": (_one([1, 5, 6, 7], [5, 6, 7, 8], enc=12), [5]),
    "reasoning_target_only": (_one([1, 5, 6, 7], [5, 6, 7, 8], reasoning=1), [5]),
    "reasoning_status_2_verifies": (_one([1, 5, 6, 7], [5, 6, 7, 8], reasoning=2), [5, 6, 7, 8]),
    "stopped": (_one([1, 5, 6, 7], [5, 6, 7, 8], stop=True), []),
    "blocked": (_one([1, 5, 6, 7], [5, 6, 7, 8], block=True), []),
    "unscheduled": (_one([1, 5, 6, 7], [5, 6, 7, 8], slt=0), []),
    "fewer_positions_than_columns": (_one([1, 5, 6, 7], [5, 6], slt=2), [5, 6]),
    "accept_all_stops_at_end_token": (_one([1, 5, 9, 7], [0, 0, 0, 0], accept_all=True), [5, 9]),
    "accept_all_takes_every_draft": (
        _one([1, 5, 6, 7], [0, 0, 0, 3], accept_all=True),
        [5, 6, 7, 3],
    ),
    "target_match_same_rule": (
        _one([1, 5, 6, 7], [5, 6, 0, 8], strategy=vd.TARGET_MATCH),
        [5, 6, 0],
    ),
}


@grid(("place", PLACES), ("name", sorted(VERIFY_EDGES)))
def test_verify_edge_cases(name, place):
    case, tokens = VERIFY_EDGES[name]
    want_ids, want_len = vd.verify_draft_tokens_ref(case)
    assert want_len.tolist() == [len(tokens)] and want_ids[0, : len(tokens)].tolist() == tokens
    vd.check(case, place)


def _topp_case(B=64, K=3, C=4, vocab=50, seed=0):
    case = vd.random_case(np.random.default_rng(seed), B, K, vocab, vd.TOPP, C=C, rows=0)
    for k in ("stop_flags", "is_block_step"):
        case[k][:] = False
    case["seq_lens_encoder"][:] = 0
    case["reasoning_status"][:] = 0
    case["topp"][:] = 1.0
    case["candidate_lens"][:] = C
    case["max_dec_len"][:] = 10**6
    case["end_tokens"] = np.zeros(0, np.int64)
    case["seeds"] = np.arange(B, dtype=np.int64) * 7919
    return case


@pytest.mark.parametrize("place", PLACES)
def test_verify_topp_draw_follows_the_counter(place):
    """The TOPP draw is a function of (seed, step_idx + i): moving step_idx changes the tokens (a
    replay after the update op draws anew); the same counter gives the same tokens."""
    case = _topp_case()
    first = vd.run(case, place)
    again = vd.run(case, place)
    np.testing.assert_array_equal(first[0], again[0])
    moved = dict(case, step_idx=case["step_idx"] + 5)
    later = vd.run(moved, place)
    assert (later[0] != first[0]).any()
    vd.check(moved, place)


def test_verify_topp_draw_distribution():
    """Over many counters a single-position TOPP draw picks each candidate about as often as its
    score (the walk of a uniform in [0, top_p) along the running sum)."""
    C, n = 4, 4000
    case = _topp_case(B=n, K=0, C=C)
    case["candidate_ids"][:] = np.arange(C)
    case["candidate_scores"][:] = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    ids, _ = vd.run(case, "cpu")
    drawn = ids[:, 0][ids[:, 0] >= 0]  # unscheduled slots emit nothing
    assert drawn.size > n // 2
    freq = np.bincount(drawn, minlength=C) / drawn.size
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.03)


@pytest.mark.parametrize("place", PLACES)
def test_verify_fifteen_tensor_form(place):
    """FastDeploy's earlier form (no max_dec_len, step_idx): no length limit; GREEDY / TARGET_MATCH."""
    case = _one([1, 5, 6, 7], [5, 6, 7, 8], step=8, max_dec=10)
    t = {k: (to_place(v, place) if isinstance(v, np.ndarray) else v) for k, v in case.items()}
    verify_draft_tokens(
        *(t[k] for k in vd.TENSORS[:15]), 64, 2, VerifyStrategy.GREEDY, False, False
    )
    assert t["step_output_len"].numpy().tolist() == [4]
    assert t["step_output_ids"].numpy().tolist() == [[5, 6, 7, 8]]


def _verify_tensors(case, place="cpu"):
    return {k: (to_place(v, place) if isinstance(v, np.ndarray) else v) for k, v in case.items()}


def _call_verify(t):
    verify_draft_tokens(
        *(t[k] for k in vd.TENSORS), *(t[k] for k in vd.ATTRS), seeds=t.get("seeds")
    )


# Bad step inputs that verify_draft_tokens and unified_update_model_status both reject (the shared
# decode-step layout): name -> (mutation of the NumPy case, message).
STEP_BAD = {
    "more_slots_than_rows": (
        lambda c: c.update(seq_lens_this_time=np.ones(2, np.int32)),
        "seq_lens_this_time has 2 slots",
    ),
    "columns_disagree": (
        lambda c: c.update(step_output_ids=np.zeros((1, 2), np.int64)),
        "step_output_ids must have as many columns",
    ),
}

VERIFY_BAD = {  # as STEP_BAD
    **STEP_BAD,
    "strategy_out_of_range": (lambda c: c.update(verify_strategy=3), "verify_strategy must be 0"),
    "greedy_without_target": (
        lambda c: c.update(target_tokens=None),
        "verify_strategy GREEDY \\(1\\) needs target_tokens",
    ),
    "wrong_dtype": (
        lambda c: c.update(step_output_len=c["step_output_len"].astype(np.int64)),
        "step_output_len must be int32",
    ),
    "short_cu_seqlens": (
        lambda c: c.update(cu_seqlens_q_output=np.zeros(0, np.int32)),
        "cu_seqlens_q_output must have at least one entry",
    ),
    "only_step_idx": (
        lambda c: c.update(max_dec_len=None),
        "max_dec_len and step_idx are given together",
    ),
    "topp_without_candidates": (
        lambda c: c.update(verify_strategy=0),
        "verify_strategy TOPP \\(0\\) needs candidate_ids",
    ),
}


@pytest.mark.parametrize("name", sorted(VERIFY_BAD))
def test_verify_bad_inputs(name):
    mutate, message = VERIFY_BAD[name]
    case = _one([1, 5, 6, 7], [5, 6, 7, 8])
    mutate(case)
    with pytest.raises(ERRORS, match=f"verify_draft_tokens: {message}"):
        _call_verify(_verify_tensors(case))


def test_verify_topp_needs_step_idx_in_fifteen_tensor_form():
    case = _topp_case(B=2)
    t = _verify_tensors(case)
    with pytest.raises(
        ERRORS, match="verify_draft_tokens: verify_strategy TOPP \\(0\\) needs step_idx"
    ):
        verify_draft_tokens(*(t[k] for k in vd.TENSORS[:15]), 64, 2, 0, False, False)


# ---- unified_update_model_status ---------------------------------------------------------------------


@grid(("place", PLACES), ("vocab", [2, 5]), ("K", [0, 1, 4]), ("B", BATCHES), ("seed", [0, 1, 2]))
def test_update_matches_reference(seed, B, K, vocab, place):
    if not _small(B) and (K != 4 or seed):
        pytest.skip("large batches once per place")
    uu.check_update(
        uu.random_update_case(np.random.default_rng([seed, B, K, vocab]), B, K, vocab), place
    )


def _update_one(
    out,
    n,
    *,
    step=0,
    max_dec=100,
    ends=(9,),
    plen=2,
    L=12,
    enc=0,
    dec=5,
    stop=False,
    paused=False,
    slt=None,
):
    W = len(out)
    return dict(
        seq_lens_encoder=np.array([enc], np.int32),
        seq_lens_decoder=np.array([dec], np.int32),
        has_running_seqs=np.array([False]),
        step_input_ids=np.zeros((1, W), np.int64),
        step_output_ids=np.array([out], np.int64),
        step_output_len=np.array([n], np.int32),
        stop_flags=np.array([stop]),
        seq_lens_this_time=np.array([W if slt is None else slt], np.int32),
        is_paused=np.array([paused]),
        token_ids_all=np.full((1, L), -1, np.int64),
        prompt_lens=np.array([plen], np.int64),
        step_idx=np.array([step], np.int64),
        end_tokens=np.array(ends, np.int64),
        max_dec_len=np.array([max_dec], np.int64),
    )


UPDATE_EDGES = {  # name -> (case, expected subset of outputs)
    "plain": (
        _update_one([3, 4, 5], 3, step=1),
        dict(
            step_output_len=[3],
            step_idx=[4],
            seq_lens_decoder=[8],
            has_running_seqs=[True],
            token_ids_all=[[-1, -1, -1, 3, 4, 5, -1, -1, -1, -1, -1, -1]],
        ),
    ),
    "end_token_cuts": (
        _update_one([3, 9, 5], 3),
        dict(step_output_len=[2], stop_flags=[True], has_running_seqs=[False], step_idx=[2]),
    ),
    "max_dec_len_replaces": (
        _update_one([3, 4, 5], 3, step=5, max_dec=7),
        dict(step_output_len=[2], step_output_ids=[[3, 9, 5]], stop_flags=[True]),
    ),
    "row_end_drops_the_rest": (
        _update_one([3, 4, 5], 3, step=8, plen=2, L=12),
        dict(token_ids_all=[[-1] * 10 + [3, 4]], step_idx=[11]),
    ),
    "prompt_past_the_row": (
        _update_one([3, 4, 5], 3, plen=12, L=12),
        dict(token_ids_all=[[-1] * 12]),
    ),
    "prefill_moves_encoder": (
        _update_one([3, 4, 5], 1, enc=7, dec=0),
        dict(seq_lens_encoder=[0], seq_lens_decoder=[7], step_idx=[1]),
    ),
    "paused_cleared": (
        _update_one([3, 4, 5], 3, paused=True),
        dict(
            stop_flags=[True], seq_lens_this_time=[0], step_output_len=[0], has_running_seqs=[False]
        ),
    ),
    "zero_output_keeps_running": (
        _update_one([3, 4, 5], 0, step=3),
        dict(step_idx=[3], has_running_seqs=[True], step_input_ids=[[0, 0, 0]]),
    ),
    "decoder_saturates": (
        _update_one([3, 4, 5], 3, dec=2**31 - 2),
        dict(seq_lens_decoder=[2**31 - 1]),
    ),
}


@grid(("place", PLACES), ("name", sorted(UPDATE_EDGES)))
def test_update_edge_cases(name, place):
    case, want = UPDATE_EDGES[name]
    ref = uu.unified_update_ref(case)
    for k, v in want.items():
        assert ref[k].tolist() == v, k
    uu.check_update(case, place)


@pytest.mark.parametrize("place", PLACES)
def test_update_padding_slots_left_alone(place):
    """Slots past B that are stopped are not cleared (FastDeploy's padding rule)."""
    case = uu.random_update_case(np.random.default_rng(3), 2, 2, 5, rows=3)
    case["stop_flags"][2:] = True
    case["seq_lens_decoder"][2:] = 11
    got = uu.run_update(case, place)
    assert got["seq_lens_decoder"][2:].tolist() == [11, 11, 11]
    uu.check_update(case, place)


UPDATE_BAD = {  # as STEP_BAD
    **STEP_BAD,
    "running_flag_shape": (
        lambda c: c.update(has_running_seqs=np.zeros(2, bool)),
        "has_running_seqs must hold one element",
    ),
    "token_rows": (
        lambda c: c.update(token_ids_all=np.zeros((0, 4), np.int64)),
        "token_ids_all must have at least 1 rows",
    ),
    "paused_dtype": (lambda c: c.update(is_paused=np.zeros(1, np.int32)), "is_paused must be bool"),
}


@pytest.mark.parametrize("name", sorted(UPDATE_BAD))
def test_update_bad_inputs(name):
    mutate, message = UPDATE_BAD[name]
    case = _update_one([3, 4, 5], 3)
    mutate(case)
    with pytest.raises(ERRORS, match=f"unified_update_model_status: {message}"):
        uu.run_update(case, "cpu")


# ---- naive_update_model_status -----------------------------------------------------------------------


@grid(("place", PLACES), ("B", BATCHES), ("seed", [0, 1, 2]))
def test_naive_matches_reference(seed, B, place):
    uu.check_naive(uu.random_naive_case(np.random.default_rng([seed, B]), B), place)


def test_naive_bad_inputs():
    case = uu.random_naive_case(np.random.default_rng(0), 3)
    case["cu_seqlens_q_output"] = case["cu_seqlens_q_output"][:3]
    with pytest.raises(
        ERRORS, match="naive_update_model_status: cu_seqlens_q_output must have B \\+ 1"
    ):
        uu.run_naive(case, "cpu")


# ---- top_p_candidates --------------------------------------------------------------------------------


def _probs_case(rng, T, V, B, ties=False):
    probs = rng.random((T, V)).astype(np.float32)
    if ties:
        probs = np.round(probs * 3) / 3
    probs /= probs.sum(axis=1, keepdims=True)
    top_p = rng.choice(np.array([0.0, 0.3, 0.8, 1.0, 1.5], np.float32), B)
    batch_ids = rng.integers(-1, B + 1, T).astype(np.int32)
    return probs.astype(np.float32), top_p, batch_ids


def _run_topp(probs, top_p, batch_ids, C, place, dtype="float32"):
    p = to_place(probs, place)
    if dtype != "float32":
        p = to_place(probs.astype(np.float16), place) if dtype == "float16" else p
    scores, ids, lens = top_p_candidates(
        p, to_place(top_p, place), to_place(batch_ids, place), C, 0
    )
    return scores.numpy().astype(np.float32), ids.numpy(), lens.numpy()


@grid(
    ("place", PLACES),
    ("C", [1, 3, 7, 130]),
    ("V", [1, 4, 33, 600]),
    ("ties", [False, True]),
    ("seed", [0, 1]),
)
def test_top_p_candidates_matches_reference(seed, ties, V, C, place):
    rng = np.random.default_rng([seed, V, C, ties])
    probs, top_p, batch_ids = _probs_case(rng, 9, V, 4, ties)
    got = _run_topp(probs, top_p, batch_ids, C, place)
    want = top_p_candidates_ref(probs, top_p, batch_ids, C)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("place", PLACES)
def test_top_p_candidates_float16(place):
    rng = np.random.default_rng(5)
    probs, top_p, batch_ids = _probs_case(rng, 6, 40, 3, ties=True)
    half = probs.astype(np.float16)
    got = _run_topp(probs, top_p, batch_ids, 5, place, dtype="float16")
    want = top_p_candidates_ref(half.astype(np.float32), top_p, batch_ids, 5)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_top_p_candidates_rules():
    """top_p == 1.0 whose float sum falls short, and a top_p never reached: every pick; a NaN ranks last;
    a padding row (batch id outside [0, B)) is all zeros."""
    probs = np.array(
        [[0.3, 0.3, 0.2, 0.1999], [np.nan, 0.5, 0.25, 0.25], [0.5, 0.5, 0, 0]], np.float32
    )
    scores, ids, lens = _run_topp(
        probs, np.array([1.0, 0.6], np.float32), np.array([0, 1, 5], np.int32), 4, "cpu"
    )
    assert lens.tolist() == [4, 2, 0]
    assert ids.tolist() == [[0, 1, 2, 3], [1, 2, 0, 0], [0, 0, 0, 0]]


def test_top_p_candidates_bad_inputs():
    probs = np.ones((2, 3), np.float32)
    with pytest.raises(
        ERRORS, match="top_p_candidates: batch_id_per_token_output must have one entry"
    ):
        _run_topp(probs, np.ones(1, np.float32), np.zeros(3, np.int32), 2, "cpu")
    with pytest.raises(ERRORS, match="top_p_candidates: candidates_len must be >= 1"):
        _run_topp(probs, np.ones(1, np.float32), np.zeros(2, np.int32), 0, "cpu")
    with pytest.raises(
        ERRORS, match="top_p_candidates: probs must be float32, float16 or bfloat16"
    ):
        _run_topp(probs.astype(np.int32), np.ones(1, np.float32), np.zeros(2, np.int32), 2, "cpu")
