"""Tests of ``ngram_match`` (docs/contract/ngram.md#ngram_match): exact equality with the NumPy reference on
random grids, one named test per branch of the walk, the search rules, shapes, the threshold sources, bad
inputs, and GPU-only stress tests (skipped without a GPU; the lead runs them on the GPU machine). The
hypothesis property test is in test_ngram_match_property.py."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from fastdeploy_spec import ops
from fastdeploy_spec.ops import ngram_match
from tests.helpers import OP_ERRORS, PLACES, assert_bad_input, to_place
from tests.reference.ngram_match import (
    BIG,
    DTYPES,
    PER_SLOT,
    TENSOR_ARGS,
    THRESHOLD_ENV,
    check,
    make_ngram_batch,
    ngram_match_ref,
    run_op,
    sentinels,
    upstream_proposer_batch,
)

# Random grid: every batch shape with every vocabulary; inside each case every n-gram size and every
# threshold kind. The reference is Python, so the one big shape is 256 x 8192.
GRID_SHAPES = [
    (0, 8),
    (1, 1),
    (1, 40),
    (3, 12),
    (7, 300),
    (17, 2000),
    (33, 64),
    (64, 1000),
    (129, 500),
    (256, 32),
    (256, 8192),
]
VOCABS = [2, 5, 1000]
NGRAM_SIZES = [1, 2, 3, 5]
# Threshold kinds: "default" (env unset: 128; binds from the start in batches past ~100 slots),
# "binding" (runs out somewhere inside the batch), "starved" (no slot has budget), "never".
THRESHOLD_KINDS = ["default", "binding", "starved", "never"]


@pytest.fixture(autouse=True)
def _no_threshold_env(monkeypatch):
    monkeypatch.delenv(THRESHOLD_ENV, raising=False)


def batch_of(*slots: dict, k: int = 4, width: int | None = None, extra_rows: int = 0) -> dict:
    """Op inputs from hand-written slots. A slot is a dict with ``prompt`` and ``gen`` token lists and
    optional ``enc`` (0), ``dec`` (P + s, at least 1), ``slt`` (1), ``dtn`` (k), ``mdl`` (BIG), and
    ``P``/``s`` overriding the lengths written to prompt_lens/step_idx. Unused tokens are -1 unless
    ``tail`` gives them."""
    W = width if width is not None else max([len(x["prompt"]) + len(x["gen"]) for x in slots] + [1])
    B = len(slots)
    ids = np.full((B + extra_rows, W), -1, np.int64)
    cols = {name: [] for name in PER_SLOT}
    for b, x in enumerate(slots):
        toks = list(x["prompt"]) + list(x["gen"])
        ids[b, : len(toks)] = toks
        tail = x.get("tail", [])
        ids[b, len(toks) : len(toks) + len(tail)] = tail
        cols["prompt_lens"].append(x.get("P", len(x["prompt"])))
        cols["step_idx"].append(x.get("s", len(x["gen"])))
        cols["draft_token_num"].append(x.get("dtn", k))
        cols["seq_lens_this_time"].append(x.get("slt", 1))
        cols["seq_lens_encoder"].append(x.get("enc", 0))
        cols["seq_lens_decoder"].append(x.get("dec", max(len(toks), 1)))
        cols["max_dec_len"].append(x.get("mdl", BIG))
    ids[B:] = 7
    d = {name: np.array(v, DTYPES[name]) for name, v in cols.items()}
    for name in ("prompt_lens", "step_idx", "max_dec_len"):
        d[name] = d[name].reshape(B, 1)
    d["token_ids_all"] = ids
    d["draft_tokens"] = sentinels(B, k)
    return d


def drafts_of(result, b: int) -> list[int]:
    """The drafts the op wrote for slot b (columns 1 .. slt - 1)."""
    drafts, slt = result
    return drafts[b, 1 : int(slt.reshape(-1)[b])].tolist()


def threshold_of(kind: str, d: dict, rng: np.random.Generator) -> int | None:
    """A threshold of the given kind for batch ``d``."""
    enc, dec = d["seq_lens_encoder"], d["seq_lens_decoder"]
    counted = int(((enc > 0) | (dec > 0)).sum())
    prefill = int(np.maximum(d["seq_lens_this_time"][enc > 0], 0).sum())
    decoding = int(((enc <= 0) & (dec != 0)).sum())
    if kind == "binding":  # S + L starts near counted + prefill and grows with the drafts
        return counted + prefill + int(rng.integers(0, 2 * decoding + 4))
    return {"default": None, "starved": counted // 2, "never": BIG}[kind]


# ---------------------------------------------------------------------------------------------------
# Random grids against the reference


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("batch,width", GRID_SHAPES)
def test_random_grid(place, batch, width, vocab):
    rng = np.random.default_rng([batch, width, vocab])
    for n in NGRAM_SIZES:
        for kind in THRESHOLD_KINDS:
            d = make_ngram_batch(
                rng,
                batch,
                width,
                k=int(rng.integers(1, 8)),
                vocab=vocab,
                max_repeat=n,
                p_odd=0.1,
                extra_rows=int(rng.integers(0, 3)),
            )
            check(d, place, n, threshold_of(kind, d, rng))


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("vocab", [2, 1000])
@pytest.mark.parametrize("batch,width", [(1, 1), (3, 12), (33, 64), (129, 500), (256, 2000)])
def test_random_grid_pad_to_max(place, batch, width, vocab):
    """Graph mode on random batches: every decoding slot ends at max_draft_tokens + 1 (max_draft_tokens
    below, at and above K), whatever the threshold did to its drafts."""
    rng = np.random.default_rng([batch, width, vocab, 7849])
    for n in (1, 3):
        for kind in THRESHOLD_KINDS:
            k = int(rng.integers(1, 8))
            d = make_ngram_batch(rng, batch, width, k=k, vocab=vocab, max_repeat=n, p_odd=0.1)
            mdt = int(rng.integers(-1, k + 3))
            drafts, slt = check(
                d, place, n, threshold_of(kind, d, rng), pad_to_max=True, max_draft_tokens=mdt
            )
            decoding = (d["seq_lens_encoder"] <= 0) & (d["seq_lens_decoder"] != 0)
            assert (slt[decoding] >= max(min(mdt, k) + 1, 1)).all()


# ---------------------------------------------------------------------------------------------------
# One test per branch of the walk


@pytest.mark.parametrize("place", PLACES)
def test_prefill_slot_untouched(place):
    d = batch_of(
        dict(prompt=[1, 2, 3, 1, 2], gen=[3, 1, 2], enc=5, slt=7),
        dict(prompt=[1, 2, 3, 4], gen=[1, 2]),
    )
    r = check(d, place, 2)
    assert r[1].tolist() == [7, 3]
    np.testing.assert_array_equal(r[0][0], d["draft_tokens"][0])
    assert drafts_of(r, 1) == [3, 4]


@pytest.mark.parametrize("place", PLACES)
def test_empty_slot_gets_zero_length(place):
    d = batch_of(
        dict(prompt=[1, 2, 3, 1, 2], gen=[3, 1, 2], dec=0, slt=3),
        dict(prompt=[1, 2, 3, 4], gen=[1, 2], dec=0, slt=1),
    )
    r = check(d, place, 2)
    assert r[1].tolist() == [0, 0]
    np.testing.assert_array_equal(r[0], d["draft_tokens"])


@pytest.mark.parametrize("place", PLACES)
def test_sizes_larger_than_s_are_skipped(place):
    # s = 1: only the 1-gram [7] is tried. The 2-gram that would straddle the prompt end, [9, 7],
    # matches later in the prompt with another continuation.
    d = batch_of(dict(prompt=[1, 7, 8, 8, 9, 7, 3, 3, 9], gen=[7]))
    r = check(d, place, 3)
    assert drafts_of(r, 0) == [8, 8, 9, 7]


@pytest.mark.parametrize("place", PLACES)
def test_max_dec_len_limits_and_stops_drafts(place):
    slot = dict(prompt=[1, 2, 3, 4, 5, 6], gen=[1, 2])
    d = batch_of(dict(slot, mdl=3), dict(slot, mdl=2), dict(slot, mdl=5), dict(slot, mdl=-4))
    r = check(d, place, 2)
    assert r[1].tolist() == [1, 1, 3, 1]
    assert drafts_of(r, 2) == [3, 4]
    np.testing.assert_array_equal(r[0][[0, 1, 3]], d["draft_tokens"][[0, 1, 3]])


@pytest.mark.parametrize("place", PLACES)
def test_draft_token_num_caps_drafts(place):
    slot = dict(prompt=[1, 2, 3, 4, 5, 6], gen=[1, 2])
    d = batch_of(dict(slot, dtn=0), dict(slot, dtn=2), dict(slot, dtn=-3), dict(slot, dtn=99), k=3)
    r = check(d, place, 2)
    assert r[1].tolist() == [1, 3, 1, 4]  # dtn = 99 is clamped to K = 3
    assert drafts_of(r, 1) == [3, 4]
    assert drafts_of(r, 3) == [3, 4, 5]


@pytest.mark.parametrize("place", PLACES)
def test_match_with_empty_continuation_is_skipped(place):
    # Slot 0: [1, 2] ends the prompt (nothing follows inside the prompt), so the generated tokens are
    # searched. Slot 1: the only occurrence of the pattern is the pattern itself.
    d = batch_of(dict(prompt=[5, 6, 1, 2], gen=[1, 2, 7, 1, 2]), dict(prompt=[5, 6], gen=[3, 4]))
    r = check(d, place, 2)
    assert drafts_of(r, 0) == [7, 1, 2]
    assert r[1].tolist() == [4, 1]


@pytest.mark.parametrize("place", PLACES)
def test_match_at_end_of_prompt_stops_at_prompt_end(place):
    # The continuation of a prompt match ends at P: it does not run on into the generated tokens.
    d = batch_of(dict(prompt=[1, 2, 3], gen=[9, 1, 2]))
    r = check(d, place, 2)
    assert drafts_of(r, 0) == [3]


@pytest.mark.parametrize("place", PLACES)
def test_threshold_binds_behind_prefill_slots(place):
    dec = dict(prompt=[1, 2, 3, 4, 5, 6], gen=[1, 2])
    d = batch_of(
        dict(prompt=[1], gen=[], enc=4, slt=10),
        dict(prompt=[1], gen=[], enc=9, slt=20),
        dec,
        dec,
        dec,
    )
    # Slot 2: S = 31 and L = 4 (the prefill slots stay counted: upstream quirk): 38 - 35 = 3 drafts.
    # Slots 3 and 4: S + L = 38 >= T - 1, no budget left.
    r = check(d, place, 2, threshold=38)
    assert r[1].tolist() == [10, 20, 4, 1, 1]
    assert drafts_of(r, 2) == [3, 4, 5]
    # T = 36: at slot 2, S + L = 35 = T - 1 already counts as no budget, though T - S - L = 1.
    r = check(d, place, 2, threshold=36)
    assert r[1].tolist() == [10, 20, 1, 1, 1]
    r = check(d, place, 2, threshold=128)
    assert r[1].tolist() == [10, 20, 5, 5, 5]


@pytest.mark.parametrize("place", PLACES)
def test_negative_prefill_length_is_summed_as_given(place):
    # The walk sums seq_lens_this_time as given: a (nonsensical) negative prefill length lowers S, so a
    # slot after one that ran out of budget may draft again. The GPU's scan form of the walk assumes
    # S + L never decreases and falls back to the sequential walk here.
    dec = dict(prompt=[1, 2, 3, 4, 5, 6], gen=[1, 2])
    d = batch_of(dec, dict(prompt=[1], gen=[], enc=3, slt=-50), dec, k=4)
    r = check(d, place, 2, threshold=7)
    assert r[1].tolist() == [5, -50, 5]


@pytest.mark.parametrize("place", PLACES)
def test_empty_batch(place):
    for rows in (0, 3):
        d = {
            name: np.zeros(
                (0, 1) if name in ("prompt_lens", "step_idx", "max_dec_len") else (0,), DTYPES[name]
            )
            for name in PER_SLOT
        }
        d["token_ids_all"] = np.ones((rows, 8), np.int64)
        d["draft_tokens"] = np.zeros((0, 4), np.int64)
        r = check(d, place, 3)
        assert r[0].shape == (0, 4) and r[1].shape == (0,)


# ---------------------------------------------------------------------------------------------------
# Graph mode (pad_to_max, FastDeploy #7849)


@pytest.mark.parametrize("place", PLACES)
def test_upstream_proposer_cases(place):
    """Upstream's NgramProposer tests (max_ngram_size 3, K 5), as the op sees them."""
    # step_idx 0: no pattern, no draft; with pad_to_max (use_cudagraph) every slot is K + 1 = 6.
    d = upstream_proposer_batch([], [])
    assert check(d, place, 3)[1].tolist() == [1, 1]
    drafts, slt = check(d, place, 3, pad_to_max=True)
    assert slt.tolist() == [6, 6] and (drafts == 0).all()
    # Generated tokens absent from the prompt: no match.
    d = upstream_proposer_batch([1, 2, 3, 4, 5, 6], [100, 200, 300])
    assert check(d, place, 3)[1].tolist() == [1, 1]
    # [40, 50, 10] matches prompt[3:6]: drafts prompt[6:8] = [20, 30]. Graph mode repeats the 30.
    d = upstream_proposer_batch([10, 20, 30, 40, 50, 10, 20, 30], [40, 50, 10])
    drafts, slt = check(d, place, 3)
    assert slt.tolist() == [3, 3] and drafts[:, 1:3].tolist() == [[20, 30], [20, 30]]
    drafts, slt = check(d, place, 3, pad_to_max=True)
    assert slt.tolist() == [6, 6] and drafts.tolist() == [[0, 20, 30, 30, 30, 30]] * 2
    # max_dec_len 4 = step_idx + 1: no room for drafts; graph mode still pads (the verify op cuts).
    d = upstream_proposer_batch([10, 20, 30, 40, 50, 10, 20, 30], [40, 50, 10], mdl=4)
    assert check(d, place, 3)[1].tolist() == [1, 1]
    assert check(d, place, 3, pad_to_max=True)[1].tolist() == [6, 6]


@pytest.mark.parametrize("place", PLACES)
def test_pad_to_max_slots(place):
    """Which slots are padded: decoding ones (with or without drafts, out of budget, at max_dec_len);
    not prefill or empty ones. The padding repeats the last draft, else column 0."""
    dec = dict(prompt=[1, 2, 3, 4, 5, 6], gen=[1, 2])
    d = batch_of(
        dec,
        dict(prompt=[1], gen=[], enc=4, slt=10),
        dict(prompt=[7, 8], gen=[9]),
        dict(dec, dec=0, slt=3),
        dec,
        dict(dec, mdl=3),
        k=4,
    )
    d["draft_tokens"][:, 0] = [11, 12, 13, 14, 15, 16]  # the last accepted tokens
    # T = 10: slot 0 keeps its 4 drafts (S 1, L 4); the prefill slot's 10 tokens then leave no budget
    # to any later slot (slot 2 has no match anyway, slot 5 no room before max_dec_len).
    drafts, slt = check(d, place, 2, threshold=10, pad_to_max=True)
    assert slt.tolist() == [5, 10, 5, 0, 5, 5]
    assert drafts[0].tolist() == [11, 3, 4, 5, 6]
    np.testing.assert_array_equal(drafts[1], d["draft_tokens"][1])  # prefill
    assert drafts[2].tolist() == [13] * 5  # no match: column 0 repeated
    np.testing.assert_array_equal(drafts[3], d["draft_tokens"][3])  # empty
    assert drafts[4].tolist() == [15] * 5  # out of budget
    assert drafts[5].tolist() == [16] * 5  # max_dec_len reached
    unpadded = check(d, place, 2, threshold=10)
    assert unpadded[1].tolist() == [5, 10, 1, 0, 1, 1]


@pytest.mark.parametrize("place", PLACES)
def test_pad_length_follows_max_draft_tokens(place):
    # K = 4. max_draft_tokens 2: pad to 3, and a slot with more drafts (draft_token_num 4) keeps them;
    # max_draft_tokens 9: pad to K + 1 = 5 (writes stay in the row); -1: no padding.
    d = batch_of(dict(prompt=[1, 2, 3, 4, 5, 6], gen=[1, 2]), dict(prompt=[7], gen=[8]), k=4)
    for mdt, want in [(2, [5, 3]), (3, [5, 4]), (9, [5, 5]), (0, [5, 1]), (-1, [5, 1])]:
        assert check(d, place, 2, pad_to_max=True, max_draft_tokens=mdt)[1].tolist() == want


@pytest.mark.parametrize("place", PLACES)
def test_pad_to_max_argument_forms(place):
    """Upstream's positional 12th argument, the keyword, and False = the call without it."""
    rng = np.random.default_rng(7849)
    d = make_ngram_batch(rng, 12, 30, k=4, vocab=3)
    plain = run_op(d, place, 3, threshold=BIG)
    for off in (
        run_op(d, place, 3, False, threshold=BIG),
        run_op(d, place, 3, pad_to_max=False, threshold=BIG),
    ):
        np.testing.assert_array_equal(off[0], plain[0])
        np.testing.assert_array_equal(off[1], plain[1])
    on = run_op(d, place, 3, True, threshold=BIG)
    on_kw = run_op(d, place, 3, pad_to_max=True, threshold=BIG)
    np.testing.assert_array_equal(on[0], on_kw[0])
    np.testing.assert_array_equal(on[1], on_kw[1])
    want = ngram_match_ref(d, 3, 4, True, threshold=BIG)
    np.testing.assert_array_equal(on[1], want[1])
    assert not np.array_equal(on[1], plain[1])


# ---------------------------------------------------------------------------------------------------
# The search rules


@pytest.mark.parametrize("place", PLACES)
def test_leftmost_match_wins(place):
    d = batch_of(dict(prompt=[4, 1, 2, 8, 8, 1, 2, 9, 9], gen=[1, 2]))
    assert drafts_of(check(d, place, 2), 0) == [8, 8, 1, 2]


@pytest.mark.parametrize("place", PLACES)
def test_prompt_searched_before_generated_tokens(place):
    # The generated tokens hold the pattern at index 0, the prompt only near its end: the prompt wins.
    d = batch_of(dict(prompt=[9, 9, 9, 3, 4, 5], gen=[3, 6, 6, 3]))
    assert drafts_of(check(d, place, 1), 0) == [4, 5]


@pytest.mark.parametrize("place", PLACES)
def test_larger_ngram_first(place):
    # [2] occurs first, [1, 2] later: with max_ngram_size 2 the 2-gram's continuation is taken.
    d = batch_of(dict(prompt=[2, 7, 7, 0, 1, 2, 5, 5], gen=[1, 2]))
    assert drafts_of(check(d, place, 2), 0) == [5, 5]
    assert drafts_of(check(d, place, 1), 0) == [7, 7, 0, 1]


@pytest.mark.parametrize("place", PLACES)
def test_column_zero_and_columns_past_drafts_untouched(place):
    d = batch_of(dict(prompt=[1, 2, 3, 4], gen=[1, 2]), dict(prompt=[1, 2, 3, 4], gen=[5]), k=6)
    drafts, slt = check(d, place, 2)
    assert slt.tolist() == [3, 1]
    np.testing.assert_array_equal(drafts[:, 0], d["draft_tokens"][:, 0])
    np.testing.assert_array_equal(drafts[0, 3:], d["draft_tokens"][0, 3:])
    np.testing.assert_array_equal(drafts[1], d["draft_tokens"][1])


@pytest.mark.parametrize("place", PLACES)
def test_lengths_are_clamped(place):
    # Every token after the slot's P + s is a trap: reading it would give other drafts.
    trap = [1, 2, 8, 8, 8, 8]
    d = batch_of(
        dict(prompt=[1, 2, 3, 4, 5], gen=[1, 2], P=40),  # P > W: all prompt, s = 0
        dict(prompt=[], gen=[1, 2, 3, 1, 2], P=-3),  # P < 0 -> 0
        dict(prompt=[1, 2, 3, 4], gen=[1, 2], s=50),  # s -> W - P: the -1 padding too
        dict(prompt=[1, 2, 3], gen=[1, 2], s=-1, tail=trap),  # s < 0 -> 0
        dict(prompt=[5, 5, 5], gen=[1, 2], tail=trap),  # nothing read after P + s
        width=14,
    )
    r = check(d, place, 2)
    assert r[1].tolist() == [1, 4, 5, 1, 1]
    assert drafts_of(r, 1) == [3, 1, 2]
    assert drafts_of(r, 2) == [-1] * 4


# ---------------------------------------------------------------------------------------------------
# Shapes and threshold sources


@pytest.mark.parametrize("place", PLACES)
def test_per_slot_tensors_as_b_or_b1(place):
    rng = np.random.default_rng(11)
    d2 = make_ngram_batch(rng, 9, 40, vocab=3, per_slot_2d=True)
    d1 = {name: a.reshape(-1) if name in PER_SLOT else a for name, a in d2.items()}
    mixed = dict(
        d1,
        prompt_lens=d2["prompt_lens"],
        seq_lens_this_time=d2["seq_lens_this_time"].reshape(-1, 1),
    )
    r2, r1, rm = check(d2, place, 3, 20), check(d1, place, 3, 20), check(mixed, place, 3, 20)
    np.testing.assert_array_equal(r1[0], r2[0])
    np.testing.assert_array_equal(r1[1], r2[1])
    np.testing.assert_array_equal(rm[1].reshape(-1), r2[1])
    assert rm[1].shape == (9, 1)


@pytest.mark.parametrize("place", PLACES)
def test_token_ids_all_with_more_rows_than_batch(place):
    rng = np.random.default_rng(12)
    d = make_ngram_batch(rng, 6, 30, vocab=2)
    more = dict(d, token_ids_all=np.concatenate([d["token_ids_all"], rng.integers(0, 2, (10, 30))]))
    r, r_more = check(d, place, 3), check(more, place, 3)
    np.testing.assert_array_equal(r_more[0], r[0])
    np.testing.assert_array_equal(r_more[1], r[1])


@pytest.mark.parametrize("place", PLACES)
def test_threshold_from_env_read_on_every_call(place, monkeypatch):
    slot = dict(prompt=[1, 2, 3, 4, 5, 6], gen=[1, 2])
    d = batch_of(slot, slot, slot)
    monkeypatch.setenv(THRESHOLD_ENV, "9")
    assert run_op(d, place, 2)[1].tolist() == [5, 3, 1]
    monkeypatch.setenv(THRESHOLD_ENV, "13")
    assert run_op(d, place, 2)[1].tolist() == [5, 5, 3]
    monkeypatch.setenv(THRESHOLD_ENV, "not a number")  # unparsable: an error naming the variable
    with pytest.raises(
        Exception, match=f"ngram_match: environment variable {THRESHOLD_ENV} = 'not a number'"
    ):
        run_op(d, place, 2)
    monkeypatch.delenv(THRESHOLD_ENV)
    assert run_op(d, place, 2)[1].tolist() == [5, 5, 5]
    for env in ("9", None):
        if env is not None:
            monkeypatch.setenv(THRESHOLD_ENV, env)
        assert run_op(d, place, 2, threshold=13)[1].tolist() == [5, 5, 3]  # the keyword wins
        assert run_op(d, place, 2, threshold=0)[1].tolist() == [1, 1, 1]


def test_default_threshold_binds_in_a_full_batch():
    # 128 decoding slots alone exhaust the default budget of 128 tokens.
    slot = dict(prompt=[1, 2, 3, 4, 5, 6], gen=[1, 2])
    d = batch_of(*[slot] * 130)
    want = ngram_match_ref(d, 2)
    got = run_op(d, "cpu", 2)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].tolist() == [1] * 130


# ---------------------------------------------------------------------------------------------------
# Bad inputs


def _good(batch=3, width=10):
    return make_ngram_batch(np.random.default_rng(5), batch, width, vocab=3)


def _call(d, place="cpu", max_ngram_size=3):
    ngram_match(*(to_place(d[name], place) for name in TENSOR_ARGS), max_ngram_size, 4)


@pytest.mark.parametrize(
    "name,shape,message",
    [
        ("draft_tokens", (3, 2, 3), r"draft_tokens must be 2-D"),
        ("draft_tokens", (3, 0), r"draft_tokens must have at least one column"),
        ("max_dec_len", (1, 3), r"max_dec_len must have shape \[3\] or \[3, 1\]"),
    ],
)
def test_wrong_rank_names_the_tensor(name, shape, message):
    assert_bad_input(
        _call, _good(), name, lambda d: np.zeros(shape, DTYPES[name]), message, OP_ERRORS
    )


@pytest.mark.parametrize("name", [n for n in TENSOR_ARGS if n != "seq_lens_this_time"])
def test_batch_mismatch_names_the_tensor(name):
    d = _good()
    short = d[name][:2]
    d[name] = short
    with pytest.raises(OP_ERRORS, match=rf"ngram_match: {name} must "):
        _call(d)


@pytest.mark.parametrize("max_ngram_size", [0, -1, 65])
def test_max_ngram_size_out_of_range(max_ngram_size):
    with pytest.raises(OP_ERRORS, match=r"max_ngram_size must be in \[1, 64\]"):
        _call(_good(), max_ngram_size=max_ngram_size)


def test_max_ngram_size_64_is_accepted():
    d = _good(4, 140)
    check(d, "cpu", 64)


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in TENSOR_ARGS if n != "token_ids_all"])
def test_mixed_places_name_the_tensor(name):
    d = _good()
    args = [to_place(d[n], "cpu" if n == name else "gpu") for n in TENSOR_ARGS]
    with pytest.raises(
        OP_ERRORS, match=rf"ngram_match: {name} is on CPU but token_ids_all is on GPU"
    ):
        ngram_match(*args, 3, 4)


def _gpu_without_cuda_build() -> bool:
    return (
        paddle.is_compiled_with_cuda()
        and paddle.device.cuda.device_count() > 0
        and not ops.with_cuda()
    )


# Not marked gpu: the gpu marker skips exactly when the library lacks CUDA kernels, the one case this
# test needs (GPU Paddle + a library built with FDSPEC_CPU_ONLY=1).
@pytest.mark.skipif(
    not _gpu_without_cuda_build(), reason="needs a GPU and a CPU-only build of the ops"
)
def test_gpu_tensor_in_cpu_only_build():
    with pytest.raises(
        OP_ERRORS,
        match=r"ngram_match: got GPU tensors, but this fastdeploy_spec "
        r"library was built without CUDA kernels",
    ):
        _call(_good(), place="gpu")


# ---------------------------------------------------------------------------------------------------
# GPU-only stress tests


@pytest.mark.gpu
def test_gpu_matches_cpu_bitwise_256_x_128k():
    rng = np.random.default_rng(21)
    for vocab, n, threshold in [(1000, 3, BIG), (1000, 5, None), (4, 2, BIG), (50, 8, 2000)]:
        d = make_ngram_batch(rng, 256, 1 << 17, k=7, vocab=vocab, max_repeat=n, p_odd=0.05)
        cpu = run_op(d, "cpu", n, threshold=threshold)
        gpu = run_op(d, "gpu", n, threshold=threshold)
        np.testing.assert_array_equal(gpu[1], cpu[1])
        np.testing.assert_array_equal(gpu[0], cpu[0])
        assert (cpu[1] > 1).any()  # the case drafted something


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [-300, -2, -1, 0, 1, 2, 5, 20, 100, 400])
def test_gpu_threshold_stress_prefill_slots_first(offset):
    # Many prefill slots first, then decoding ones; T = (the smallest S + L a decoding slot can see)
    # + offset, so the budget runs out before, at, or somewhere after the first decoding slot.
    rng = np.random.default_rng(offset + 1000)
    for _ in range(5):
        d = make_ngram_batch(rng, 256, 200, k=6, vocab=3, p_prefill=0.0, p_empty=0.1)
        n_prefill = int(rng.integers(1, 200))
        d["seq_lens_encoder"][:n_prefill] = rng.integers(1, 50, n_prefill)
        d["seq_lens_this_time"][:n_prefill] = rng.integers(0, 8, n_prefill)
        enc, dec = d["seq_lens_encoder"], d["seq_lens_decoder"]
        floor = int(((enc > 0) | (dec > 0)).sum() + d["seq_lens_this_time"][:n_prefill].sum())
        check(d, "gpu", 3, max(floor + offset, 0))


@pytest.mark.gpu
@pytest.mark.parametrize("where", ["early", "late", "generated", "none"])
def test_gpu_hit_position_at_large_width(where):
    W, B, k = 1 << 16, 8, 5
    rng = np.random.default_rng(31)
    ids = rng.integers(10, 1 << 40, (B, W))  # distinct enough that random matches do not happen
    P, s = W - 1000, 1000
    pattern = [1, 2, 3]
    ids[:, P + s - 3 : P + s] = pattern
    pos = {"early": 0, "late": P - 8, "generated": P + 100, "none": None}[where]
    if pos is not None:
        ids[:, pos : pos + 3] = pattern
    d = batch_of(*[dict(prompt=[], gen=[], P=P, s=s)] * B, k=k, width=W)
    d["token_ids_all"] = ids
    d["seq_lens_decoder"][:] = 1
    r = check(d, "gpu", 3)
    if pos is None:
        assert r[1].tolist() == [1] * B
    else:
        end = min(pos + 3 + k, P if pos < P else P + s)
        assert drafts_of(r, 0) == ids[0, pos + 3 : end].tolist()


@pytest.mark.gpu
@pytest.mark.parametrize("max_ngram_size", [5, 7, 16, 64])
def test_gpu_runtime_bound_ngram_sizes(max_ngram_size):
    rng = np.random.default_rng(max_ngram_size)
    for vocab in (2, 3):
        d = make_ngram_batch(
            rng, 64, 3000, k=6, vocab=vocab, max_repeat=max_ngram_size, p_plant=0.9
        )
        check(d, "gpu", max_ngram_size)


@pytest.mark.gpu
def test_gpu_repeated_calls_are_deterministic():
    rng = np.random.default_rng(41)
    d = make_ngram_batch(rng, 256, 4096, k=7, vocab=2, max_repeat=4)
    first = run_op(d, "gpu", 4, threshold=600)
    for _ in range(20):
        again = run_op(d, "gpu", 4, threshold=600)
        np.testing.assert_array_equal(again[0], first[0])
        np.testing.assert_array_equal(again[1], first[1])
