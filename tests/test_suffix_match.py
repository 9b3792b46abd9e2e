"""Tests of ``suffix_match`` (docs/contract/suffix.md): the worked example, exact equality with the
NumPy reference on random grids (CPU; GPU against CPU and the reference where a GPU exists), one
named test per rule, the budget walk and pad_to_max, bad inputs, and GPU stress cases (large and
adversarial histories). Hypothesis fuzzing is in test_fuzz.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fastdeploy_spec.ops import suffix_match
from tests.helpers import OP_ERRORS, PLACES, assert_bad_input, assert_wrong_dtype_named, to_place
from tests.reference.ngram_match import THRESHOLD_ENV
from tests.reference.suffix_match import (
    DTYPES,
    OUTPUTS,
    SUFFIX_STATE,
    TENSOR_ARGS,
    check,
    make_suffix_batch,
    run_op,
    suffix_draft_ref,
)

BIG = 1 << 20

# Random grid: (batch, width) shapes with vocabularies 2 .. 50 and every parameter drawn per case.
GRID_SHAPES = [(0, 8), (1, 1), (1, 40), (3, 12), (5, 300), (4, 1200), (3, 4096), (9, 64)]
VOCABS = [2, 3, 5, 12, 50]


@pytest.fixture(autouse=True)
def _no_threshold_env(monkeypatch):
    monkeypatch.delenv(THRESHOLD_ENV, raising=False)


def random_params(rng: np.random.Generator, k: int) -> dict:
    return dict(
        max_tree_depth=int(rng.choice([1, 2, 3, 5, 8, 24, 64, 100])),
        max_spec_factor=float(rng.choice([0.0, 0.5, 1.0, 1.5, 4.0])),
        max_spec_offset=float(rng.choice([-2.0, -0.5, 0.0, 1.0, 3.0])),
        min_token_prob=float(rng.choice([0.0, 0.01, 0.1, 0.3, 0.9, 1.5])),
        max_draft_tokens=int(rng.integers(0, k + 1)),
        pad_to_max=bool(rng.integers(0, 2)),
    )


def slot_batch(
    *histories, k: int = 5, width: int | None = None, prompt_lens=None, **per_slot
) -> dict:
    """Decoding slots from explicit histories (all prompt unless ``prompt_lens`` says otherwise)."""
    B = len(histories)
    W = width or max([len(h) for h in histories] + [1]) + k + 2  # room for K drafts
    d = make_suffix_batch(
        np.random.default_rng(0), B, W, k=k, p_prefill=0.0, p_empty=0.0, p_odd=0.0
    )
    ids = np.full((B, W), -1, np.int64)
    for b, h in enumerate(histories):
        ids[b, : len(h)] = h
    P = np.array(prompt_lens if prompt_lens is not None else [len(h) for h in histories], np.int64)
    d.update(
        token_ids_all=ids,
        prompt_lens=P.reshape(B, 1),
        step_idx=(np.array([len(h) for h in histories]) - P).reshape(B, 1),
        draft_token_num=np.full(B, k, np.int32),
        seq_lens_encoder=np.zeros(B, np.int32),
        seq_lens_decoder=np.array([max(len(h), 1) for h in histories], np.int32),
        seq_lens_this_time=np.ones(B, np.int32),
        max_dec_len=np.full((B, 1), BIG, np.int64),
    )
    for name, values in per_slot.items():
        d[name] = np.asarray(values, DTYPES[name]).reshape(d[name].shape)
    return d


def drafts_of(r: dict, b: int) -> list:
    return r["draft_tokens"][b, 1 : int(r["seq_lens_this_time"].reshape(-1)[b])].tolist()


# ---------------------------------------------------------------------------------------------------
# The worked example (Arctic Inference's own output for it)

EXAMPLE = [1, 2, 3, 4, 5, 1, 2, 3, 6, 7, 1, 2]


def test_worked_example_reference():
    tokens, probs, score, L = suffix_draft_ref(
        EXAMPLE, 5, max_tree_depth=64, max_spec_factor=1.0, min_token_prob=0.1
    )
    assert tokens == [3, 4] and L == 2
    np.testing.assert_array_equal(probs, np.array([2 / 3, 1 / 3], np.float32))
    assert score == np.float32(1.0)


@pytest.mark.parametrize("place", PLACES)
def test_worked_example(place):
    r = check(slot_batch(EXAMPLE, k=5), place)
    assert drafts_of(r, 0) == [3, 4]
    assert r["suffix_meta"].tolist() == [[2, 2]]
    np.testing.assert_array_equal(r["suffix_probs"][0, :2], np.array([2 / 3, 1 / 3], np.float32))
    assert r["suffix_probs"][0].sum(dtype=np.float32) == np.float32(1.0)
    assert r["suffix_tokens"][0, 2:].tolist() == [-1] * 3


# ---------------------------------------------------------------------------------------------------
# Random grids against the reference


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("batch,width", GRID_SHAPES)
def test_random_grid(place, batch, width, vocab):
    rng = np.random.default_rng([batch, width, vocab])
    cases = 2 if width >= 1000 else 6
    for _ in range(cases):
        k = int(rng.integers(1, 17))
        d = make_suffix_batch(
            rng, batch, width, k=k, vocab=vocab, p_odd=0.1, extra_rows=int(rng.integers(0, 3))
        )
        threshold = [None, BIG, int(rng.integers(0, 3 * batch + 8))][int(rng.integers(0, 3))]
        check(d, place, threshold=threshold, **random_params(rng, k))


# ---------------------------------------------------------------------------------------------------
# The rules, one test each


@pytest.mark.parametrize("place", PLACES)
def test_tie_goes_to_the_earliest_first_occurrence(place):
    # "8 9" occurs only at the end, so only the match "9" drafts: it was followed by 5 twice and 6
    # twice; the continuation seen first wins.
    r = check(slot_batch([9, 5, 9, 6, 9, 6, 9, 5, 8, 9], k=1), place)
    assert drafts_of(r, 0) == [5] and r["suffix_meta"].tolist() == [[1, 1]]
    r = check(slot_batch([9, 6, 9, 5, 9, 6, 9, 5, 8, 9], k=1), place)
    assert drafts_of(r, 0) == [6]


@pytest.mark.parametrize("place", PLACES)
def test_newest_occurrence_counts_without_continuation(place):
    # "1 2" occurs twice: once followed by 3, once at the end: p = 1/2.
    r = check(slot_batch([1, 2, 3, 1, 2], k=3), place, min_token_prob=0.0)
    assert r["suffix_probs"][0, 0] == np.float32(0.5)
    r = check(slot_batch([1, 2, 3, 1, 2], k=3), place, min_token_prob=0.6)
    assert drafts_of(r, 0) == [] and r["suffix_meta"].tolist() == [[0, 4]]  # all empty: the last L


@pytest.mark.parametrize("place", PLACES)
def test_length_limit_follows_match_length(place):
    h = [7, 8, 9, 1, 2, 3, 4, 5, 6, 0, 7, 8, 9]  # "7 8 9" recurs: match length 3
    r = check(slot_batch(h, k=8), place, min_token_prob=0.0)
    assert drafts_of(r, 0) == [1, 2, 3] and r["suffix_meta"].tolist() == [[3, 3]]
    r = check(slot_batch(h, k=8), place, min_token_prob=0.0, max_spec_factor=2.0)
    assert drafts_of(r, 0) == [1, 2, 3, 4, 5, 6]
    r = check(slot_batch(h, k=8), place, min_token_prob=0.0, max_spec_offset=-3.0)
    assert drafts_of(r, 0) == []


@pytest.mark.parametrize("place", PLACES)
def test_tree_depth_bounds_the_path(place):
    h = [7, 8, 9, 1, 2, 3, 4, 5, 6, 0, 7, 8, 9]
    r = check(slot_batch(h, k=8), place, min_token_prob=0.0, max_spec_factor=9.0, max_tree_depth=5)
    # Every match of "9" (L = 1) has p = 1/2 per token; |s.d| <= 5 leaves L = 1 four tokens (score
    # 2.0), L = 2 three, L = 3 two: the short match wins.
    assert drafts_of(r, 0) == [1, 2, 3, 4] and r["suffix_meta"].tolist() == [[4, 1]]
    r = check(slot_batch(h, k=8), place, max_tree_depth=1)  # context of one token: no match length
    assert drafts_of(r, 0) == [] and r["suffix_meta"].tolist() == [[0, 0]]


@pytest.mark.parametrize("place", PLACES)
def test_slot_cap(place):
    h = [1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4]
    # max_dec_len: s + 1 + 2 leaves two drafts; draft_token_num 1; max_model_len room: W = N + 2.
    d = slot_batch(
        h,
        h,
        h,
        h,
        k=6,
        prompt_lens=[5, 5, 5, 5],
        width=30,
        max_dec_len=[[BIG], [6 + 1 + 2], [BIG], [BIG]],
        draft_token_num=[6, 6, 1, 6],
    )
    d["token_ids_all"] = d["token_ids_all"][:, :30]
    r = check(d, place, min_token_prob=0.0, max_spec_factor=4.0)
    assert [drafts_of(r, b) for b in range(3)] == [[5, 6, 7, 1, 2, 3], [5, 6], [5]]
    narrow = slot_batch(h, k=6, width=len(h) + 3)
    r = check(narrow, place, min_token_prob=0.0, max_spec_factor=4.0)
    assert drafts_of(r, 0) == [5, 6]


@pytest.mark.parametrize("place", PLACES)
def test_prefill_and_empty_slots(place):
    d = slot_batch(
        EXAMPLE,
        EXAMPLE,
        EXAMPLE,
        k=5,
        seq_lens_encoder=[0, 7, 0],
        seq_lens_decoder=[12, 0, 0],
        seq_lens_this_time=[1, 9, 4],
    )
    r = check(d, place, threshold=BIG)
    assert r["seq_lens_this_time"].tolist() == [3, 9, 0]
    np.testing.assert_array_equal(r["suffix_tokens"][1:], d["suffix_tokens"][1:])  # rows untouched
    np.testing.assert_array_equal(r["draft_tokens"][1:], d["draft_tokens"][1:])


@pytest.mark.parametrize("place", PLACES)
def test_threshold_truncates_the_drafts(place):
    h = [7, 8, 9, 1, 2, 3, 4, 5, 6, 0, 7, 8, 9]  # drafts 1 2 3
    d = slot_batch(h, h, h, k=5)
    # Slot 0: S = 1, L = 2, T - S - L = 2 of its 3 drafts; slot 1: S + L = 4 + 1 >= T - 1: none.
    r = check(d, place, threshold=5, min_token_prob=0.0)
    assert r["seq_lens_this_time"].tolist() == [3, 1, 1] and drafts_of(r, 0) == [1, 2]
    assert r["suffix_meta"].tolist() == [[3, 3]] * 3  # the drafts before the budget are all kept
    r = check(d, place, threshold=4, min_token_prob=0.0)  # S + L = T - 1 already gives up
    assert r["seq_lens_this_time"].tolist() == [1, 1, 1]
    r = check(d, place, threshold=None, min_token_prob=0.0)  # the default, 128, does not bind
    assert r["seq_lens_this_time"].tolist() == [4, 4, 4]


@pytest.mark.parametrize("place", PLACES)
def test_pad_to_max(place):
    d = slot_batch(
        EXAMPLE, [5, 6, 7], EXAMPLE, k=5, seq_lens_encoder=[0, 0, 4], seq_lens_this_time=[1, 1, 9]
    )
    r = check(d, place, pad_to_max=True, max_draft_tokens=4, threshold=BIG)
    assert r["seq_lens_this_time"].tolist() == [5, 5, 9]
    assert r["draft_tokens"][0, 1:5].tolist() == [3, 4, 4, 4]
    col0 = int(d["draft_tokens"][1, 0])
    assert r["draft_tokens"][1, 1:5].tolist() == [col0] * 4  # no draft: column 0 repeated
    assert r["draft_tokens"][0, 5] == d["draft_tokens"][0, 5]
    np.testing.assert_array_equal(r["draft_tokens"][2], d["draft_tokens"][2])


@pytest.mark.parametrize("place", PLACES)
def test_prompt_and_generated_tokens_form_one_history(place):
    # The repeat spans the prompt boundary: the history is one sequence.
    h = [4, 5, 6, 7, 8, 4, 5, 6]
    for P in (2, 5, 7, 8):
        r = check(slot_batch(h, k=3, prompt_lens=[P]), place, min_token_prob=0.0)
        assert drafts_of(r, 0) == [7, 8, 4]


@pytest.mark.parametrize("place", PLACES)
def test_tokens_after_the_history_are_never_read(place):
    h = [1, 2, 3, 1, 2]
    d = slot_batch(h, k=3, width=12)
    d["token_ids_all"][0, 5:] = [3, 1, 2, 3, 9, 9, 9]  # a trap: would add occurrences of "1 2"
    r = check(d, place, min_token_prob=0.0)
    assert drafts_of(r, 0) == [3, 1]


@pytest.mark.parametrize("place", PLACES)
def test_empty_batch(place):
    d = make_suffix_batch(np.random.default_rng(1), 0, 8)
    r = check(d, place)
    assert r["draft_tokens"].shape == (0, 6) and r["seq_lens_this_time"].shape == (0,)


def test_threshold_from_env(monkeypatch):
    d = slot_batch(EXAMPLE, EXAMPLE, EXAMPLE, k=5)
    monkeypatch.setenv(THRESHOLD_ENV, "5")
    assert run_op(d, "cpu")["seq_lens_this_time"].tolist() == [3, 1, 1]
    assert run_op(d, "cpu", threshold=BIG)["seq_lens_this_time"].tolist() == [3, 3, 3]


# ---------------------------------------------------------------------------------------------------
# Bad inputs


def _good(batch=3, width=20, k=4):
    return make_suffix_batch(np.random.default_rng(5), batch, width, k=k, vocab=3)


def _call(d, **kw):
    suffix_match(*(to_place(d[name], "cpu") for name in TENSOR_ARGS), **kw)


@pytest.mark.parametrize("name", SUFFIX_STATE)
def test_wrong_dtype_names_the_tensor(name):
    """The shared inputs' dtypes: test_draft_inputs.py."""
    assert_wrong_dtype_named("suffix_match", _call, _good(), name, DTYPES[name])


@pytest.mark.parametrize(
    "name,shape,message",
    [
        ("suffix_tokens", (3, 5), r"suffix_tokens must have K = 4 columns"),
        ("suffix_probs", (3, 3), r"suffix_probs must have K = 4 columns"),
        ("suffix_meta", (3, 3), r"suffix_meta must have 2 columns"),
        ("suffix_meta", (2, 2), r"suffix_meta must have at least 3 rows"),
        ("draft_tokens", (3, 66), r"draft_tokens must have 1 to 65 columns"),
    ],
)
def test_wrong_shape_names_the_tensor(name, shape, message):
    assert_bad_input(
        _call, _good(), name, lambda d: np.zeros(shape, DTYPES[name]), message, OP_ERRORS
    )


@pytest.mark.parametrize(
    "attrs,message",
    [
        (dict(max_tree_depth=0), r"max_tree_depth must be in \[1, 256\], got 0"),
        (dict(max_tree_depth=257), r"max_tree_depth must be in \[1, 256\], got 257"),
        (dict(max_spec_factor=math.nan), r"max_spec_factor must be finite"),
        (dict(max_spec_offset=math.inf), r"max_spec_offset must be finite"),
        (dict(min_token_prob=math.nan), r"min_token_prob must be finite"),
        (dict(max_draft_tokens=5), r"max_draft_tokens must be in \[0, K = 4\], got 5"),
        (dict(max_draft_tokens=-1), r"max_draft_tokens must be in \[0, K = 4\], got -1"),
    ],
)
def test_bad_attributes_are_named(attrs, message):
    with pytest.raises(OP_ERRORS, match=message):
        _call(_good(), **attrs)


# ---------------------------------------------------------------------------------------------------
# GPU stress: large and adversarial histories (the block path, its hash-range splitting)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["one_token", "two_tokens", "distinct_continuations", "text_like"])
def test_gpu_large_histories(kind):
    rng = np.random.default_rng(abs(hash(kind)) % 1000)
    W = 1 << 15
    if kind == "one_token":
        h = np.full(W - 8, 3, np.int64)
    elif kind == "two_tokens":
        h = rng.integers(0, 2, W - 8)
    elif kind == "distinct_continuations":
        # "7 x" with 6000 distinct x: more distinct next tokens than the GPU's table holds.
        h = np.empty(12000, np.int64)
        h[0::2] = 7
        h[1::2] = rng.permutation(np.arange(100, 6100)) * 1000003
        h = np.concatenate([h, [7]])
    else:
        h = rng.zipf(1.3, W - 8) % 5000
        h[-300:] = h[1000:1300]
    d = slot_batch(*[h] * 4, k=8, width=W)
    for kw in (dict(), dict(min_token_prob=0.0, max_spec_factor=4.0), dict(max_tree_depth=256)):
        check(d, "gpu", threshold=BIG, **kw)


@pytest.mark.gpu
def test_gpu_wide_batch_matches_cpu():
    rng = np.random.default_rng(77)
    for vocab in (2, 7, 50, 30000):
        d = make_suffix_batch(rng, 256, 2048, k=5, vocab=vocab, p_odd=0.05)
        cpu, gpu = run_op(d, "cpu", threshold=BIG), run_op(d, "gpu", threshold=BIG)
        for name in OUTPUTS:
            np.testing.assert_array_equal(gpu[name], cpu[name], err_msg=name)
        assert (cpu["seq_lens_this_time"] > 1).any()


@pytest.mark.gpu
def test_gpu_repeated_calls_are_deterministic():
    d = make_suffix_batch(np.random.default_rng(41), 64, 4096, k=8, vocab=3)
    first = run_op(d, "gpu", threshold=BIG, min_token_prob=0.0)
    for _ in range(10):
        again = run_op(d, "gpu", threshold=BIG, min_token_prob=0.0)
        for name in OUTPUTS:
            np.testing.assert_array_equal(again[name], first[name])
