"""speculate_step_update against its NumPy reference (tests/reference/step_update.py), on every place."""

from __future__ import annotations

import numpy as np
import pytest

from fastdeploy_spec.ops import speculate_step_update
from tests.helpers import PLACES, assert_mixed_places_rejected, fewer_slots, grid
from tests.reference.step_update import ORDER, check, random_case, run

BATCHES = [0, 1, 3, 7, 33, 130]
DRAFT_COUNTS = [0, 1, 5, 40]  # K; 40 makes K + 1 > 32, so a GPU warp writes two rounds of tokens
WIDTHS = [8, 64]              # W: 8 makes rows fill up
SEEDS = [0, 1]


@grid(("place", PLACES), ("seed", SEEDS), ("W", WIDTHS), ("K", DRAFT_COUNTS), ("B", BATCHES))
def test_matches_reference(B, K, W, seed, place):
    check(random_case(np.random.default_rng([B, K, W, seed]), B, K, W), place)


def one_slot(accepted, *, width=4, W=12, P=3, step=2, enc=0, dec=4, slt=3, stop=False, max_dec=100,
             ends=(99,)):
    acc = np.full((1, width), -5, np.int64)
    acc[0, :len(accepted)] = accepted
    return dict(
        accept_tokens=acc,
        accept_num=np.array([len(accepted)], np.int32),
        token_ids_all=np.full((1, W), -1, np.int64),
        prompt_lens=np.array([[P]], np.int64),
        step_idx=np.array([[step]], np.int64),
        max_dec_len=np.array([[max_dec]], np.int64),
        end_tokens=np.array(ends, np.int64),
        stop_flags=np.array([[stop]]),
        seq_lens_this_time=np.array([slt], np.int32),
        seq_lens_encoder=np.array([enc], np.int32),
        seq_lens_decoder=np.array([dec], np.int32),
        draft_tokens=np.full((1, width), 7, np.int64),
    )


def state(got):
    return dict(step=int(got["step_idx"].ravel()[0]), stop=bool(got["stop_flags"].ravel()[0]),
                slt=int(got["seq_lens_this_time"][0]), enc=int(got["seq_lens_encoder"][0]),
                dec=int(got["seq_lens_decoder"][0]), last=int(got["draft_tokens"][0, 0]),
                row=got["token_ids_all"][0].tolist())


# name -> (case, expected state; "row" gives the first columns of the slot's row)
EDGE_CASES = {
    "decoding_appends": (one_slot([5, 6, 8]),
                         dict(step=5, stop=False, slt=1, enc=0, dec=7, last=8, row=[-1] * 5 + [5, 6, 8, -1])),
    "prefill_becomes_decoding": (one_slot([5], step=0, enc=3, dec=0, slt=3),
                                 dict(step=1, stop=False, slt=1, enc=0, dec=3, last=5, row=[-1] * 3 + [5, -1])),
    "end_token_stops": (one_slot([5, 99]),
                        dict(step=4, stop=True, slt=0, enc=0, dec=6, last=99, row=[-1] * 5 + [5, 99, -1])),
    "max_dec_len_stops": (one_slot([5, 6], max_dec=4),
                          dict(step=4, stop=True, slt=0, enc=0, dec=6, last=6, row=[-1] * 5 + [5, 6, -1])),
    "row_full_stops": (one_slot([5, 6, 8], W=7),
                       dict(step=4, stop=True, slt=0, enc=0, dec=6, last=6, row=[-1] * 5 + [5, 6])),
    "nothing_accepted": (one_slot([]),
                         dict(step=2, stop=False, slt=1, enc=0, dec=4, last=7, row=[-1] * 6)),
    "nothing_accepted_at_limit": (one_slot([], max_dec=2),
                                  dict(step=2, stop=True, slt=0, enc=0, dec=4, last=7, row=[-1] * 6)),
    # A slot that finishes keeps the lengths of its last step (the logprob message reads them after
    # the update); the next step's update frees it.
    "prefill_end_token_keeps_prompt": (one_slot([99], step=0, enc=3, dec=0, slt=3),
                                       dict(step=1, stop=True, slt=0, enc=0, dec=3, last=99,
                                            row=[-1] * 3 + [99, -1])),
    "decoder_length_saturates": (one_slot([5, 6], dec=2**31 - 2),
                                 dict(step=4, stop=True, slt=0, enc=0, dec=2**31 - 1, last=6,
                                      row=[-1] * 5 + [5, 6, -1])),
    "stopped_is_freed": (one_slot([5, 6], stop=True),
                         dict(step=2, stop=True, slt=0, enc=0, dec=0, last=7, row=[-1] * 6)),
    "empty_untouched": (one_slot([5, 6], dec=0),
                        dict(step=2, stop=False, slt=0, enc=0, dec=0, last=7, row=[-1] * 6)),
    "unscheduled_untouched": (one_slot([5, 6], slt=0),
                              dict(step=2, stop=False, slt=0, enc=0, dec=4, last=7, row=[-1] * 6)),
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", list(EDGE_CASES))
def test_edge_cases(name, place):
    case, want = EDGE_CASES[name]
    got = state(check(case, place))
    assert got["row"][:len(want["row"])] == want["row"]
    assert {k: v for k, v in got.items() if k != "row"} == {k: v for k, v in want.items() if k != "row"}


@pytest.mark.parametrize("place", PLACES)
def test_finished_slot_is_freed_at_the_next_step(place):
    """Step 1 finishes the slot and keeps its lengths; step 2 (nothing accepted) frees it and leaves
    its output alone."""
    case = one_slot([5, 99])
    first = check(case, place)
    again = dict(case, **{k: first[k] for k in first}, accept_num=np.array([0], np.int32))
    got = state(check(again, place))
    assert (got["stop"], got["slt"], got["enc"], got["dec"], got["step"]) == (True, 0, 0, 0, 4)
    assert got["row"] == first["token_ids_all"][0].tolist()


@pytest.mark.parametrize("place", PLACES)
def test_empty_batch_is_a_no_op(place):
    got = run(random_case(np.random.default_rng(0), 0, 3, 8), place)
    assert got["token_ids_all"].shape == (0, 8)


@pytest.mark.parametrize("place", PLACES)
def test_more_rows_than_slots(place):
    """Buffers with S rows and B = len(seq_lens_this_time) < S: rows >= B are not touched."""
    B = 4
    case = fewer_slots(random_case(np.random.default_rng(5), 6, 3, 16), B,
                       ("accept_tokens", "token_ids_all", "draft_tokens", "end_tokens"))
    got = check(case, place)
    np.testing.assert_array_equal(got["token_ids_all"][B:], case["token_ids_all"][B:])
    np.testing.assert_array_equal(got["draft_tokens"][B:], case["draft_tokens"][B:])


def bad(**changes):
    case = random_case(np.random.default_rng(1), 3, 2, 8)
    case.update(changes)
    return case


BAD_INPUTS = {
    "token_ids_all must be int64": bad(token_ids_all=np.zeros((3, 8), np.int32)),
    "seq_lens_decoder must be int32": bad(seq_lens_decoder=np.zeros(3, np.int64)),
    "stop_flags must be bool": bad(stop_flags=np.zeros((3, 1), np.int64)),
    "draft_tokens must have as many columns": bad(draft_tokens=np.zeros((3, 5), np.int64)),
    "token_ids_all must have at least 3 rows": bad(token_ids_all=np.zeros((2, 8), np.int64)),
    r"accept_num must have shape \[3\] or \[3, 1\]": bad(accept_num=np.zeros(4, np.int32)),
    "end_tokens must have rank 1": bad(end_tokens=np.zeros((2, 1), np.int64)),
}


@pytest.mark.parametrize("match", list(BAD_INPUTS))
def test_bad_inputs(match):
    with pytest.raises((OSError, RuntimeError, ValueError), match=f"speculate_step_update: {match}"):
        run(BAD_INPUTS[match], "cpu")


@pytest.mark.gpu
def test_mixed_places_rejected():
    assert_mixed_places_rejected(speculate_step_update, ORDER, random_case(np.random.default_rng(2), 3, 2, 8),
                                 "end_tokens")
