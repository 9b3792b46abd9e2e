"""hybrid_mtp_ngram (docs/contract/ngram.md#hybrid_mtp_ngram): exact agreement with the NumPy reference on CPU
and GPU."""

from __future__ import annotations

import numpy as np
import pytest

from fastdeploy_spec.ops import hybrid_mtp_ngram, ngram_match_mixed
from tests.helpers import PLACES, grid, to_place
from tests.reference.hybrid_mtp_ngram import ORDER, UNTOUCHED, check, make_case, run_op, run_ref

BATCHES = [0, 1, 3, 8, 33]
WIDTHS = [(1, 1), (7, 5), (40, 24), (300, 64)]  # (W, D)
VOCABS = [2, 3, 5]
SEEDS = range(3)


@grid(("place", PLACES), ("B", BATCHES), ("W,D", WIDTHS), ("vocab", VOCABS), ("seed", SEEDS))
def test_random_grid(place, B, W, D, vocab, seed):
    rng = np.random.default_rng([B, W, D, vocab, seed])
    case = make_case(rng, B, W, D, vocab, extra_rows=seed)
    max_n = int(rng.integers(1, 6))
    min_n = int(rng.integers(1, max_n + 1))
    max_draft = int(rng.integers(0, 8))  # sometimes beyond K = 5: the write clamp
    # Non-binding, binding around the batch's own size, and tight.
    for threshold in (10**6, B + int(rng.integers(0, 3 * B + 2)), int(rng.integers(0, 6))):
        check(case, place, max_n, min_n, max_draft, threshold)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("B", [1, 8, 33, 300])
@pytest.mark.parametrize("vocab", [2, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_random_grid_pad_to_max(place, B, vocab, seed):
    """Graph mode on random batches: every slot with ori > 0 ends at min(max_draft_tokens, K) + 1 or
    above, whatever the threshold and max_dec_len left it."""
    rng = np.random.default_rng([B, vocab, seed, 7849])
    case = make_case(rng, B, 64, 40, vocab, extra_rows=seed)
    max_n = int(rng.integers(1, 5))
    min_n = int(rng.integers(1, max_n + 1))
    for max_draft in (-1, 0, 2, 5, 7):
        for threshold in (10**6, B + int(rng.integers(0, 3 * B + 2)), int(rng.integers(0, 6))):
            _, slt = check(case, place, max_n, min_n, max_draft, threshold, pad_to_max=True)
            scheduled = case["seq_lens_this_time"] > 0
            assert (slt[scheduled] >= min(max(max_draft, 0), 5) + 1).all()


@pytest.mark.parametrize("place", PLACES)
def test_random_cases_with_drafts(place):
    """Many small cases, asserting that drafts are actually produced (the grid could pass vacuously)."""
    rng = np.random.default_rng(7)
    produced = 0
    for _ in range(200):
        B = int(rng.integers(1, 12))
        case = make_case(rng, B, int(rng.integers(4, 30)), int(rng.integers(2, 20)), 2)
        _, slt = check(case, place, 3, 1, 5, int(rng.integers(B, 4 * B + 8)))
        produced += int(np.sum(slt > np.maximum(case["seq_lens_this_time"], 0)))
    assert produced > 100


# ---- named cases --------------------------------------------------------------------------------


def slots(prompts, pres, steps, ori, dec=None, max_dec_len=100, K1=6, W=12, D=10):
    """A hand-written batch: one prompt, one pre_ids prefix and one step per slot."""
    B = len(prompts)
    ids = np.full((B, W), -1, np.int64)
    pre = np.full((B, D), -1, np.int64)
    for b in range(B):
        ids[b, : len(prompts[b])] = prompts[b]
        pre[b, : len(pres[b])] = pres[b]
    return dict(
        token_ids_all=ids,
        prompt_lens=np.array([[len(p)] for p in prompts], np.int64),
        pre_ids=pre,
        step_idx=np.array([[s] for s in steps], np.int64),
        draft_token_num=np.full(B, K1 - 1, np.int32),
        draft_tokens=np.full((B, K1), UNTOUCHED, np.int64),
        seq_lens_this_time=np.array(ori, np.int32),
        seq_lens_decoder=np.array(dec if dec is not None else [10] * B, np.int32),
        max_dec_len=np.full((B, 1), max_dec_len, np.int64),
    )


U = UNTOUCHED


@pytest.mark.parametrize("place", PLACES)
def test_match_only_in_prompt(place):
    # pattern 1 2 (pre_ids[1..2]) opens the prompt; pre_ids[0:2] = 7 1 holds no 1 2.
    case = slots([[1, 2, 3, 4, 5]], [[7, 1, 2]], [2], [2])
    d, s = check(case, place, 2, 1, 5, 1024)
    assert s.tolist() == [5] and d[0].tolist() == [U, U, 3, 4, 5, U]


@pytest.mark.parametrize("place", PLACES)
def test_match_only_in_pre_ids_capped_at_step(place):
    # pattern 1 2 at pre_ids[3..4]; only pre_ids[0:4] = 1 2 3 1 holds it: continuation 3 1, cut at s.
    case = slots([[9, 9, 9]], [[1, 2, 3, 1, 2]], [4], [1])
    d, s = check(case, place, 2, 1, 5, 1024)
    assert s.tolist() == [3] and d[0].tolist() == [U, 3, 1, U, U, U]


@pytest.mark.parametrize("place", PLACES)
def test_prompt_preferred_over_pre_ids_and_larger_n_first(place):
    # 3-gram 4 1 2 occurs only in pre_ids; the 2-gram 1 2 also in the prompt: the 3-gram wins.
    case = slots([[1, 2, 8, 8]], [[4, 1, 2, 6, 4, 1, 2]], [6], [1])
    d, s = check(case, place, 3, 1, 2, 1024)
    assert s.tolist() == [3] and d[0].tolist() == [U, 6, 4, U, U, U]
    d, s = check(case, place, 2, 1, 2, 1024)  # sizes <= 2: the prompt's 1 2 -> 8 8
    assert s.tolist() == [3] and d[0].tolist() == [U, 8, 8, U, U, U]


@pytest.mark.parametrize("place", PLACES)
def test_min_ngram_size_boundary(place):
    # Only the 1-gram "2" matches (prompt 1 2 3 4); the 2-gram 5 2 does not.
    case = slots([[1, 2, 3, 4]], [[0, 5, 2]], [2], [1])
    d, s = check(case, place, 2, 2, 5, 1024)
    assert s.tolist() == [1] and (d == U).all()
    d, s = check(case, place, 2, 1, 5, 1024)
    assert s.tolist() == [3] and d[0].tolist() == [U, 3, 4, U, U, U]


@pytest.mark.parametrize("place", PLACES)
def test_skipped_slots_untouched(place):
    # Slot 0: ori 0. Slot 1: drafts full (ori = max_draft_tokens + 1). Slot 2: max_dec_len reached.
    # Slot 3: a prefill chunk of 40. Every one matches, none may change.
    p, pre = [1, 2, 3, 4], [1, 2]
    case = slots([p] * 4, [pre] * 4, [1] * 4, [0, 4, 2, 40], max_dec_len=100)
    case["max_dec_len"][2, 0] = 2  # max_dec_len - s - 1 = 0
    d, s = check(case, place, 2, 1, 3, 1024)
    assert s.tolist() == [0, 4, 2, 40] and (d == U).all()


@pytest.mark.parametrize("place", PLACES)
def test_binding_threshold(place):
    # Three slots of ori 2, q = 3, each with a long continuation; T = 10, I = 3.
    # Slot 0: S 2, L 2 -> keeps 3 (S + q + L = 7). Slot 1: S 7, L 1 -> q = 10 - 8 = 2.
    # Slot 2: S 11, L 0 >= T - 1 -> gives up.
    p = [1, 2, 3, 4, 5, 6, 7]
    case = slots([p] * 3, [[1, 2]] * 3, [1] * 3, [2, 2, 2])
    d, s = check(case, place, 2, 1, 4, 10)
    assert s.tolist() == [5, 4, 2]
    assert d[:, 2:].tolist() == [[3, 4, 5, U], [3, 4, U, U], [U, U, U, U]]


@pytest.mark.parametrize("place", PLACES)
def test_skipped_slot_stays_counted(place):
    # Slot 0 has ori 0 but seq_lens_decoder > 0: it stays in L (upstream's quirk). Slot 1: S 2, L 1,
    # q = 3 -> 2 + 3 + 1 > T = 5 -> q = 2. Without the quirk (L = 0) it would keep 3.
    case = slots([[1, 2, 3, 4, 5, 6]] * 2, [[1, 2]] * 2, [1, 1], [0, 2])
    d, s = check(case, place, 2, 1, 4, 5)
    assert s.tolist() == [0, 4] and d[1].tolist() == [U, U, 3, 4, U, U]


@pytest.mark.parametrize("place", PLACES)
def test_writes_stay_inside_draft_tokens(place):
    # max_draft_tokens 9 > K = 3: q is capped at the K + 1 - ori = 2 columns left.
    case = slots([[1, 2, 3, 4, 5, 6, 7]], [[1, 2]], [1], [2], K1=4)
    d, s = check(case, place, 2, 1, 9, 1024)
    assert s.tolist() == [4] and d[0].tolist() == [U, U, 3, 4]


@pytest.mark.parametrize("place", PLACES)
def test_clamps(place):
    # Slot 0: negative seq_lens_this_time -> 0. Slot 1: step_idx past pre_ids -> D - 1 (pattern 1 2
    # at the end of pre_ids). Slot 2: prompt_lens past W -> W.
    case = slots(
        [[1, 2, 3], [1, 2, 3, 4], [1, 2, 7, 7]],
        [[1, 2], [0] * 8 + [1, 2], [1, 2]],
        [1, 50, 1],
        [-5, 1, 1],
        W=4,
        D=10,
    )
    case["prompt_lens"][2, 0] = 99
    d, s = check(case, place, 2, 1, 3, 1024)
    assert s.tolist() == [0, 3, 3]
    assert d[1, 1:3].tolist() == [3, 4] and d[2, 1:3].tolist() == [7, 7]


@pytest.mark.parametrize("place", PLACES)
def test_threshold_from_environment(place, monkeypatch):
    case = slots([[1, 2, 3, 4, 5, 6, 7]] * 3, [[1, 2]] * 3, [1] * 3, [2, 2, 2])
    monkeypatch.setenv("SPEC_TOKENUM_THRESHOLD", "10")
    _, s = run_op(case, place, 2, 1, 4)
    assert s.tolist() == [5, 4, 2]
    monkeypatch.setenv("SPEC_TOKENUM_THRESHOLD", "9")  # read on every call: slot 1 gives up
    _, s = run_op(case, place, 2, 1, 4)
    assert s.tolist() == [5, 2, 2]
    monkeypatch.delenv("SPEC_TOKENUM_THRESHOLD")  # default 1024
    _, s = run_op(case, place, 2, 1, 4)
    assert s.tolist() == [5, 5, 5]


@pytest.mark.parametrize("place", PLACES)
def test_alias_and_per_slot_shapes(place):
    case = slots([[1, 2, 3, 4, 5]] * 2, [[1, 2]] * 2, [1, 1], [1, 2])
    flat = {k: (v.reshape(-1) if v.ndim == 2 and v.shape[1] == 1 else v) for k, v in case.items()}
    want = run_ref(case, 2, 1, 4, 1024)
    for c in (case, flat):
        got = run_op(c, place, 2, 1, 4, op=ngram_match_mixed, threshold=1024)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


# ---- graph mode (pad_to_max, FastDeploy #7849) ---------------------------------------------------


@pytest.mark.parametrize("place", PLACES)
def test_upstream_operator_case(place):
    """Upstream's tests/operators/test_hybrid_mtp_ngram.py: two slots, prompt 0..9, pre_ids
    10 9 8 7 6 10 9 8 7 (step_idx 8), MTP drafts 8 7 (ori 2), max_draft_tokens 5, n-gram 5..2:
    10 9 8 7 recurs in pre_ids, so 6 10 9 8 extend the drafts to 8 7 6 10 9 8 (length 6). Called
    as upstream calls it (12 positional arguments, then with False as the 13th) and padded."""
    B = 2
    ids = np.full((B, 32), -1, np.int64)
    ids[:, :10] = np.arange(10)
    pre = np.full((B, 32), -1, np.int64)
    pre[:, :9] = [10, 9, 8, 7, 6, 10, 9, 8, 7]
    drafts = np.full((B, 6), -1, np.int64)
    drafts[:, :2] = [8, 7]
    case = dict(
        token_ids_all=ids,
        prompt_lens=np.full((B, 1), 10, np.int64),
        pre_ids=pre,
        step_idx=np.full((B, 1), 8, np.int64),
        draft_token_num=np.full((B, 1), 5, np.int32),
        draft_tokens=drafts,
        seq_lens_this_time=np.full((B, 1), 2, np.int32),
        seq_lens_decoder=np.full((B, 1), 12, np.int32),
        max_dec_len=np.full((B, 1), 512, np.int64),
    )
    t = {k: to_place(case[k], place) for k in ORDER}
    hybrid_mtp_ngram(*(t[k] for k in ORDER), 5, 2, 5)
    assert t["seq_lens_this_time"].numpy().tolist() == [[6], [6]]
    assert t["draft_tokens"].numpy().tolist() == [[8, 7, 6, 10, 9, 8]] * 2
    for pad in (False, True):  # already at max_draft_tokens + 1: padding changes nothing
        d, s = check(case, place, 5, 2, 5, 1024, pad_to_max=pad)
        assert s.tolist() == [[6], [6]] and d.tolist() == [[8, 7, 6, 10, 9, 8]] * 2
    # max_draft_tokens 3 stops the n-gram drafts at 6 10; padding cannot add past K + 1 = 6.
    d, s = check(case, place, 5, 2, 3, 1024, pad_to_max=True)
    assert s.tolist() == [[4], [4]] and d.tolist() == [[8, 7, 6, 10, -1, -1]] * 2


@pytest.mark.parametrize("place", PLACES)
def test_pad_to_max_slots(place):
    # Slot 0: ori 0 (not scheduled): untouched. Slot 1: MTP drafts only, no match: padded with its
    # last MTP draft. Slot 2: max_dec_len reached (q <= 0): padded. Slot 3: a match, then padded with
    # the last n-gram draft (T = 12 leaves it 2). Slot 4: out of budget: padded. Slot 5: a prefill
    # chunk (ori 40 > K + 1): unchanged.
    p = [1, 2, 3, 4]
    case = slots([p, [9], p, p, p, p], [[1, 2]] * 6, [1] * 6, [0, 2, 2, 2, 2, 40])
    case["draft_tokens"][:, :2] = [[50, 51], [60, 61], [70, 71], [80, 81], [90, 91], [0, 1]]
    case["max_dec_len"][2, 0] = 2
    d, s = check(case, place, 2, 1, 5, 12, pad_to_max=True)
    assert s.tolist() == [0, 6, 6, 6, 6, 40]
    assert d[0].tolist() == [50, 51, U, U, U, U]
    assert d[1].tolist() == [60, 61, 61, 61, 61, 61]
    assert d[2].tolist() == [70, 71, 71, 71, 71, 71]
    assert d[3].tolist() == [80, 81, 3, 4, 4, 4]
    assert d[4].tolist() == [90, 91, 91, 91, 91, 91]
    assert d[5].tolist() == [0, 1, U, U, U, U]
    assert run_ref(case, 2, 1, 5, 12)[1].tolist() == [0, 2, 2, 4, 2, 40]


@pytest.mark.parametrize("place", PLACES)
def test_pad_to_max_argument_forms(place):
    rng = np.random.default_rng(13)
    case = make_case(rng, 20, 40, 24, 2)
    plain = run_op(case, place, 3, 1, 5, threshold=30)
    for args, kw in [((False,), {}), ((), {"pad_to_max": False})]:
        got = run_op(case, place, 3, 1, 5, *args, threshold=30, **kw)
        np.testing.assert_array_equal(got[0], plain[0])
        np.testing.assert_array_equal(got[1], plain[1])
    on = run_op(case, place, 3, 1, 5, True, threshold=30)
    on_alias = run_op(case, place, 3, 1, 5, op=ngram_match_mixed, pad_to_max=True, threshold=30)
    want = run_ref(case, 3, 1, 5, 30, pad_to_max=True)
    for got in (on, on_alias):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert not np.array_equal(on[1], plain[1])


# ---- bad inputs ---------------------------------------------------------------------------------


def base_case():
    return slots([[1, 2, 3, 4]] * 2, [[1, 2]] * 2, [1, 1], [1, 1])


@pytest.mark.parametrize(
    "name,value,match",
    [
        ("pre_ids", np.zeros((2, 10), np.int32), "pre_ids must be int64"),
        ("seq_lens_this_time", np.ones(2, np.int64), "seq_lens_this_time must be int32"),
        ("draft_token_num", np.ones(2, np.int64), "draft_token_num must be int32"),
        ("step_idx", np.ones((3, 1), np.int64), r"step_idx must have shape \[2\] or \[2, 1\]"),
        ("pre_ids", np.zeros((1, 10), np.int64), "pre_ids must have at least 2 rows"),
        ("pre_ids", np.zeros((2, 0), np.int64), "pre_ids must have 1 to"),
        ("draft_tokens", np.zeros((2, 0), np.int64), "draft_tokens must have at least one column"),
        ("max_dec_len", np.ones((2, 2), np.int64), "max_dec_len must have shape"),
    ],
)
def test_bad_tensors(name, value, match):
    case = base_case()
    case[name] = value
    with pytest.raises(Exception, match=match):
        run_op(case, "cpu", 2, 1, 3)


@pytest.mark.parametrize(
    "max_n,min_n,match",
    [
        (0, 1, "max_ngram_size must be in"),
        (65, 1, "max_ngram_size must be in"),
        (2, 0, "min_ngram_size must be in"),
        (2, 3, "min_ngram_size must be in"),
    ],
)
def test_bad_ngram_sizes(max_n, min_n, match):
    with pytest.raises(Exception, match=match):
        run_op(base_case(), "cpu", max_n, min_n, 3)


def test_bad_threshold_and_packing_limit():
    with pytest.raises(ValueError, match="threshold must be >= 0"):
        run_op(base_case(), "cpu", 2, 1, 3, threshold=-2)
    case = base_case()
    case["draft_tokens"] = np.zeros((2, 2**16), np.int64)  # (2^16 - 1) * (2^15 + 10) >= 2^31
    case["token_ids_all"] = np.zeros((2, 2**15), np.int64)
    with pytest.raises(Exception, match="must be below 2"):
        run_op(case, "cpu", 2, 1, 2**16)
