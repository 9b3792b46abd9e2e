"""speculate_verify_greedy against its NumPy reference (tests/reference/verify_greedy.py), on every place."""

from __future__ import annotations

import numpy as np
import pytest

from fastdeploy_spec.ops import speculate_verify_greedy
from tests.helpers import PLACES, assert_mixed_places_rejected, fewer_slots, grid
from tests.reference.verify_greedy import ORDER, check, random_case, run

BATCHES = [0, 1, 3, 7, 33, 130]
DRAFT_COUNTS = [0, 1, 5, 40]  # K; 40 makes K + 1 > 32, so the GPU ballot scans two chunks
VOCABS = [2, 3, 1000]
SEEDS = [0, 1]


@grid(("place", PLACES), ("seed", SEEDS), ("vocab", VOCABS), ("K", DRAFT_COUNTS), ("B", BATCHES))
def test_matches_reference(B, K, vocab, seed, place):
    check(random_case(np.random.default_rng([B, K, vocab, seed]), B, K, vocab), place)


def one_slot(target, drafts, *, slt=None, enc=0, dec=9, stop=False, step=0, max_dec=100, ends=(99,)):
    width = len(drafts)
    return dict(
        target_tokens=np.array([target], np.int64),
        accept_tokens=np.full((1, width), -7, np.int64),
        accept_num=np.array([-3], np.int32),
        step_idx=np.array([[step]], np.int64),
        stop_flags=np.array([[stop]]),
        seq_lens_encoder=np.array([enc], np.int32),
        seq_lens_decoder=np.array([dec], np.int32),
        draft_tokens=np.array([drafts], np.int64),
        seq_lens_this_time=np.array([width if slt is None else slt], np.int32),
        max_dec_len=np.array([[max_dec]], np.int64),
        end_tokens=np.array(ends, np.int64),
    )


# name -> (case, accepted tokens)
EDGE_CASES = {
    "all_drafts_and_bonus": (one_slot([5, 6, 7, 8], [1, 5, 6, 7]), [5, 6, 7, 8]),
    "first_draft_rejected": (one_slot([5, 6, 7, 8], [1, 4, 6, 7]), [5]),
    "reject_in_the_middle": (one_slot([5, 6, 7, 8], [1, 5, 0, 7]), [5, 6]),
    "fewer_drafts_than_columns": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], slt=2), [5, 6]),
    "too_many_drafts_clamped": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], slt=50), [5, 6, 7, 8]),
    "end_token_among_drafts": (one_slot([5, 99, 7, 8], [1, 5, 99, 7]), [5, 99]),
    "end_token_as_bonus": (one_slot([5, 6, 99, 8], [1, 5, 6, 0]), [5, 6, 99]),
    "first_of_several_end_tokens": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], ends=(7, 6)), [5, 6]),
    "no_end_tokens": (one_slot([5, 99, 7, 8], [1, 5, 99, 7], ends=()), [5, 99, 7, 8]),
    "max_dec_len_cuts": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], step=8, max_dec=10), [5, 6]),
    "max_dec_len_reached": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], step=10, max_dec=10), []),
    "max_dec_len_passed": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], step=12, max_dec=10), []),
    "prefill_takes_one": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], enc=30, dec=0, slt=30), [5]),
    "prefill_after_cached_prefix": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], enc=4, dec=8, slt=4), [5]),
    "stopped": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], stop=True), []),
    "empty": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], dec=0), []),
    "unscheduled": (one_slot([5, 6, 7, 8], [1, 5, 6, 7], slt=0), []),
    "no_drafts_k0": (one_slot([5], [1]), [5]),
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", list(EDGE_CASES))
def test_edge_cases(name, place):
    case, accepted = EDGE_CASES[name]
    tokens, num = run(case, place)
    assert num.tolist() == [len(accepted)]
    width = case["draft_tokens"].shape[1]
    assert tokens[0].tolist() == accepted + [-7] * (width - len(accepted))  # later columns untouched
    check(case, place)


@pytest.mark.parametrize("place", PLACES)
def test_empty_batch_is_a_no_op(place):
    case = random_case(np.random.default_rng(0), 0, 3, 5)
    tokens, num = run(case, place)
    assert tokens.shape == (0, 4) and num.shape == (0,)


@pytest.mark.parametrize("place", PLACES)
def test_more_rows_than_slots(place):
    """[S, K + 1] buffers with B = len(seq_lens_this_time) < S: rows >= B are not touched."""
    B = 4
    case = fewer_slots(random_case(np.random.default_rng(3), 6, 3, 3), B,
                       ("target_tokens", "accept_tokens", "draft_tokens", "end_tokens"))
    tokens, _ = run(case, place)
    assert (tokens[B:] == -7).all()
    check(case, place)


@pytest.mark.gpu
def test_mixed_places_rejected():
    assert_mixed_places_rejected(speculate_verify_greedy, ORDER, random_case(np.random.default_rng(2), 3, 2, 4),
                                 "max_dec_len")


def bad(**changes):
    case = random_case(np.random.default_rng(1), 3, 2, 4)
    case.update(changes)
    return case


BAD_INPUTS = {
    "accept_num must be int32": bad(accept_num=np.zeros(3, np.int64)),
    "target_tokens must be int64": bad(target_tokens=np.zeros((3, 3), np.int32)),
    "stop_flags must be bool": bad(stop_flags=np.zeros((3, 1), np.int32)),
    "target_tokens must have as many columns": bad(target_tokens=np.zeros((3, 4), np.int64)),
    "accept_tokens must have as many columns": bad(accept_tokens=np.zeros((3, 2), np.int64)),
    r"step_idx must have shape \[3\] or \[3, 1\]": bad(step_idx=np.zeros((2, 1), np.int64)),
    "draft_tokens must have at least 3 rows": bad(draft_tokens=np.zeros((2, 3), np.int64)),
    "end_tokens must have rank 1": bad(end_tokens=np.zeros((1, 1), np.int64)),
}


@pytest.mark.parametrize("match", list(BAD_INPUTS))
def test_bad_inputs(match):
    with pytest.raises((OSError, RuntimeError, ValueError), match=f"speculate_verify_greedy: {match}"):
        run(BAD_INPUTS[match], "cpu")
