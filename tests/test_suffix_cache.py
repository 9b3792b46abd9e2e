"""Tests of the suffix-decoding global cache (docs/contract/suffix.md, "The global cache"): random
request streams through insert / query / finish (the insert and the query as one call, suffix_cache_step,
every other step) with the op's state and drafts equal to the NumPy
reference exactly (CPU; GPU against CPU and the reference where a GPU exists), the local/global
winner, evictions and detached slots, named edge cases, bad inputs, hypothesis fuzzing, and a soak
run with memory flat."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import paddle
import pytest

try:  # a test-only dependency; the GPU machine may lack it (the other tests still run there)
    from hypothesis import given
    from hypothesis import strategies as st
except ImportError:
    given = None

from fastdeploy_spec.ops.suffix_cache import (
    PARTS,
    SuffixCache,
    SuffixCacheConfig,
    cache_layout,
    suffix_cache_evict,
    suffix_cache_finish,
    suffix_cache_insert,
    suffix_cache_query,
    suffix_cache_step,
)
from tests.helpers import OP_ERRORS, PLACES, to_place
from tests.reference.ngram_match import THRESHOLD_ENV
from tests.reference.suffix_cache import global_draft_ref
from tests.reference.suffix_cache_stream import (
    QUERY_ARGS,
    Driver,
    RequestStream,
    line_filter_ref,
    soak,
)


@pytest.fixture(autouse=True)
def _no_threshold_env(monkeypatch):
    monkeypatch.delenv(THRESHOLD_ENV, raising=False)


# run_stream's configuration unless a call gives another: the cache's bounds and the stream's
# vocabulary, then the counted vocabulary, pairs and line filter.
STREAM = dict(rows=6, width=24, slots=4, vocab=3, key_len=2, M=32)
COUNTED = dict(vocab_size=1 << 18, pair_vocab=1 << 10, line_planes=1 << 11)


def run_stream(place, seed, steps, *, params=None, check_every=1, evict_every=0, **config):
    c = dict(STREAM, **COUNTED)
    c.update(config)
    rows, width, slots = c["rows"], c["width"], c["slots"]
    rng = np.random.default_rng(seed)
    stream = RequestStream(rng, slots, width=64, vocab=c["vocab"], k=4, max_answer=width + 8)
    kw = {k: c[k] for k in ("key_len", *COUNTED)}
    drv = Driver(place, rows, width, slots, max_occurrences=c["M"], **kw)
    wins = 0
    for i in range(steps):
        step = stream.step()
        if i % 2:  # the insert and the query as one call (suffix_cache_step), every other step
            got = drv.step(step.query_inputs(rng), **(params or {}))
        else:
            drv.insert(step)
            got = drv.query(step.query_inputs(rng), **(params or {}))
        wins += int((got["suffix_source"] == 1).sum())
        drv.finish(step.finished)
        if evict_every and i % evict_every == evict_every - 1:
            drv.evict(int(rng.integers(0, rows + 1)))
        if i % check_every == 0:
            drv.check_state()
    return drv, wins


def global_ref(responses, context, cap, **kw):
    """global_draft_ref with these tests' usual keywords (one-token keys, M = 32), ``kw`` replacing
    any of them."""
    usual = dict(max_tree_depth=64, max_spec_factor=2.0, max_spec_offset=0.0, min_token_prob=0.0)
    return global_draft_ref(
        responses, context, cap, **dict(usual, key_len=1, max_occurrences=32, **kw)
    )


def params_of(rng):
    return dict(
        max_tree_depth=int(rng.choice([2, 3, 5, 16, 64])),
        max_spec_factor=float(rng.choice([0.5, 1.0, 4.0])),
        max_spec_offset=float(rng.choice([-1.0, 0.0, 2.0])),
        min_token_prob=float(rng.choice([0.0, 0.1, 0.4])),
        pad_to_max=bool(rng.integers(0, 2)),
    )


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("seed", range(6))
def test_random_streams_equal_reference(place, seed):
    rng = np.random.default_rng(100 + seed)
    _, wins = run_stream(
        place,
        seed,
        60,
        rows=int(rng.integers(1, 8)),
        width=int(rng.integers(4, 30)),
        slots=int(rng.integers(1, 6)),
        vocab=int(rng.integers(2, 6)),
        key_len=int(rng.integers(1, 4)),
        M=32,
        params=params_of(rng),
        evict_every=int(rng.choice([0, 7])),
        vocab_size=int(rng.choice([2, 1 << 18])),  # some token ids counted, or all
        pair_vocab=int(rng.choice([0, 3, 1 << 10])),  # pairs: none, some, all
        line_planes=int(rng.choice([0, 32, 1 << 11])),
    )  # no filter, a full one, sparse


def test_streams_exercise_the_global_draft():
    """The streams are not vacuous: the global draft wins in some slots and steps."""
    _, wins = run_stream(
        "cpu",
        7,
        80,
        rows=8,
        width=40,
        slots=4,
        vocab=4,
        key_len=2,
        params=dict(max_spec_factor=4.0, max_spec_offset=2.0, min_token_prob=0.0),
    )
    assert wins > 20


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("key_len, base", [(2, 0), (1, 0), (1, 2**31 - 3)])
def test_global_draft_from_another_request(place, key_len, base):
    """A finished response drafts for a new request whose own history does not contain the match.
    With base = 2^31 - 3 and one-token keys, the tokens 1 and 2 keep exact keys (the token) and 3 ..
    9 take hashed ones (negative): the cached keys say so, and the draft is the same."""
    drv = Driver(place, rows=4, width=16, slots=1, key_len=key_len)
    W = 24

    def step(prompt, resp, enc=0):
        ids = np.full((1, W), -1, np.int64)
        ids[0, : len(prompt)] = np.asarray(prompt, np.int64) + base
        ids[0, len(prompt) : len(prompt) + len(resp)] = np.asarray(resp, np.int64) + base
        return dict(
            token_ids_all=ids,
            prompt_lens=np.array([[len(prompt)]], np.int64),
            step_idx=np.array([[len(resp)]], np.int64),
            seq_lens_encoder=np.array([enc], np.int32),
            seq_lens_decoder=np.array([0 if enc else len(prompt) + len(resp)], np.int32),
        )

    def insert(d):
        drv.insert(SimpleNamespace(**d))

    insert(step([9], [1, 2, 3, 4, 5, 6]))  # request 0 answers 1 2 3 4 5 6
    insert(step([8], [], enc=1))  # request 1 prefills on the same slot
    d = step([8], [7, 1, 2])
    insert(d)
    q = dict(
        d,
        draft_token_num=np.array([4], np.int32),
        draft_tokens=np.zeros((1, 5), np.int64),
        seq_lens_this_time=np.ones(1, np.int32),
        max_dec_len=np.array([[99]], np.int64),
        suffix_tokens=np.zeros((1, 4), np.int64),
        suffix_probs=np.zeros((1, 4), np.float32),
        suffix_meta=np.zeros((1, 2), np.int32),
        suffix_source=np.zeros(1, np.int32),
    )
    got = drv.query(q, max_spec_factor=2.0)
    assert got["suffix_source"].tolist() == [1]
    assert got["draft_tokens"][0, 1:5].tolist() == [base + t for t in (3, 4, 5, 6)]
    assert got["suffix_meta"][0].tolist() == [4, 2]
    drv.check_state()
    if key_len == 1:
        tokens, keys = drv.cache.read("tokens")[0, :6], drv.cache.read("keys")[0, :6]
        exact = tokens <= 2**31 - 1
        np.testing.assert_array_equal(keys[exact], tokens[exact])
        assert (keys[~exact] < 0).all() and exact.sum() == (2 if base else 6)


def test_local_wins_ties():
    """Equal scores: the local draft is kept (source 0)."""
    responses = [(0, [1, 2, 3])]
    g = global_ref(responses, [1, 2], 3, max_spec_factor=1.0, min_token_prob=0.1)
    assert g[0] == [3] and float(g[2]) == 1.0
    drv = Driver("cpu", rows=2, width=8, slots=2, key_len=1)
    ids = np.array(
        [[1, 2, 3, -1, -1, -1, -1, -1], [1, 2, 3, 1, 2, -1, -1, -1]], np.int64
    )  # local [3]
    d = dict(
        token_ids_all=ids,
        prompt_lens=np.array([[0], [3]], np.int64),
        step_idx=np.array([[3], [2]], np.int64),
        seq_lens_encoder=np.zeros(2, np.int32),
        seq_lens_decoder=np.array([3, 5], np.int32),
        draft_token_num=np.full(2, 1, np.int32),
        draft_tokens=np.zeros((2, 2), np.int64),
        seq_lens_this_time=np.ones(2, np.int32),
        max_dec_len=np.full((2, 1), 99, np.int64),
        suffix_tokens=np.zeros((2, 1), np.int64),
        suffix_probs=np.zeros((2, 1), np.float32),
        suffix_meta=np.zeros((2, 2), np.int32),
        suffix_source=np.zeros(2, np.int32),
    )
    drv.insert(SimpleNamespace(**d))
    got = drv.query(d)
    assert got["suffix_source"][1] == 0 and got["draft_tokens"][1, 1] == 3


@pytest.mark.parametrize("place", PLACES)
def test_fifo_eviction_and_detached_slots(place):
    """More requests than rows: the oldest responses go first; an active request whose row is taken
    stops caching (detached) until its next request."""
    drv, _ = run_stream(place, 11, 120, rows=2, width=12, slots=5, vocab=3, key_len=1)
    assert int(drv.cache.read("counter")[0]) > 10
    rows = drv.cache.read("rows")
    live = sorted(int(q) for q in rows[:, 0] if q >= 0)
    assert live == list(range(drv.ref.counter - len(live), drv.ref.counter))


@pytest.mark.parametrize("place", PLACES)
def test_occurrence_cap_skips_frequent_suffixes(place):
    """A suffix occurring more than M times is skipped (a longer one is still used)."""
    ref = global_ref([(0, [5] * 40 + [6])], [5, 5], 4)
    assert ref[3] == 0  # "5" occurs 40 times: skipped
    ref = global_ref([(0, [5] * 20 + [6])], [5, 5], 4)
    assert ref[3] == 1 and ref[0][0] == 5
    run_stream(
        place,
        3,
        40,
        rows=3,
        width=60,
        slots=2,
        vocab=2,
        key_len=1,
        M=32,
        params=dict(max_spec_factor=4.0, min_token_prob=0.0),
    )


@pytest.mark.parametrize("place", PLACES)
def test_pair_counts_follow_the_rows_when_a_history_is_rewritten(place):
    """The pair at a row's old end is counted with the token the row holds there: a slot whose
    history was rewritten behind its cached length cannot make the pair counts drift (eviction
    takes out exactly what the insert put in)."""
    c = SuffixCache.allocate(
        rows=2, width=8, slots=1, pair_vocab=16, place=to_place(np.zeros(1), place).place
    )
    t = lambda v, d: to_place(np.array(v, d), place)  # noqa: E731
    enc = t([0], np.int32)
    suffix_cache_insert(
        t([[9, 1, 2, 3, -1, -1]], np.int64),
        t([[1]], np.int64),
        t([[3]], np.int64),
        enc,
        t([4], np.int32),
        c,
    )  # response 1 2 3
    suffix_cache_insert(
        t([[9, 1, 2, 5, 4, -1]], np.int64),
        t([[1]], np.int64),
        t([[4]], np.int64),
        enc,
        t([5], np.int32),
        c,
    )  # history rewritten at 3 -> 5; 4 appended after the row's 3
    assert c.read("tokens")[0, :4].tolist() == [1, 2, 3, 4]
    pairs = c.read("pairs")
    assert sorted(zip(*np.nonzero(pairs))) == [(1, 2), (2, 3), (3, 4)] and pairs.sum() == 3
    suffix_cache_evict(c, 0)
    assert not c.read("pairs").any() and not c.read("counts").any()


@pytest.mark.parametrize("place", PLACES)
def test_line_filter_holds_the_cached_strings_and_forgets_evicted_rows(place):
    """The line filter has the bits of every cached position's strings in its line (32 positions of
    a row), and none of a response that the ring or suffix_cache_evict has dropped: a row's old bits
    would only cost scan work, but a filter that kept them would fill up."""
    c = SuffixCache.allocate(
        rows=2,
        width=40,
        slots=1,
        pair_vocab=16,
        line_planes=64,
        place=to_place(np.zeros(1), place).place,
    )
    t = lambda v, d: to_place(np.array(v, d), place)  # noqa: E731
    long = [int(x) for x in np.random.default_rng(5).integers(0, 20, 35)]

    def step(resp, prefill=False):
        ids = np.full((1, 41), -1, np.int64)
        ids[0, 0] = 9
        ids[0, 1 : 1 + len(resp)] = resp
        suffix_cache_insert(
            t(ids, np.int64),
            t([[1]], np.int64),
            t([[len(resp)]], np.int64),
            t([5 if prefill else 0], np.int32),
            t([0 if prefill else len(resp) + 1], np.int32),
            c,
        )

    def check(responses):
        lines = c.read("lines").view(np.uint32)
        np.testing.assert_array_equal(lines, line_filter_ref(responses, c.read("keys"), c))
        return lines

    step(long)  # request 0 in row 0: lines 0 (positions 0 .. 31) and 1 (32 .. 34)
    lines = check({0: long})
    assert (lines[:, 0] & 0b10).any() and not (lines[:, 0] & 0b1100).any()  # row 1's lines: empty
    step(long, prefill=True)
    step([3, 4])  # request 1 in row 1
    step([3, 4], prefill=True)
    step([7, 8, 9])  # request 2 takes row 0: request 0 leaves, and its line 1 with it
    lines = check({0: [7, 8, 9], 1: [3, 4]})
    assert not (lines[:, 0] & 0b10).any()  # row 0's line 1: nothing of request 0 is left
    assert (lines[:, 0] & 0b1).any() and (lines[:, 0] & 0b100).any()  # both rows' line 0
    suffix_cache_evict(c, 0)
    assert not c.read("lines").any()


@pytest.mark.parametrize("place", PLACES)
def test_evict_keeps_the_newest(place):
    """suffix_cache_evict(keep) drops all but the newest responses; an active slot whose response
    goes adds nothing more (detached) until its next request; keep=0 empties the cache."""
    drv, _ = run_stream(place, 21, 40, rows=8, width=30, slots=4, vocab=3, key_len=1, evict_every=5)
    drv.evict(0)
    assert (drv.cache.read("rows")[:, 0] == -1).all()
    drv.check_state()
    with pytest.raises(ValueError, match="keep must be >= 0"):
        drv.evict(-1)


def test_bad_inputs_are_named():
    c = SuffixCache.allocate(2, 4, 2)
    ids = to_place(np.zeros((2, 8), np.int64), "cpu")
    i64 = to_place(np.zeros((2, 1), np.int64), "cpu")
    i32 = to_place(np.zeros(2, np.int32), "cpu")
    with pytest.raises(OP_ERRORS, match="suffix_cache_insert: prompt_lens"):
        suffix_cache_insert(ids, i32, i64, i32, i32, c)
    with pytest.raises(OP_ERRORS, match="suffix_cache_insert: token_ids_all"):
        suffix_cache_insert(to_place(np.zeros((1, 8), np.int64), "cpu"), i64, i64, i32, i32, c)
    # The state: one uint8 tensor of exactly the size its configuration lays out.
    bad = SuffixCache.allocate(2, 4, 2)
    bad.state = to_place(np.zeros(bad.nbytes + 8, np.uint8), "cpu")
    with pytest.raises(OP_ERRORS, match=f"cache_state must have {c.nbytes} bytes"):
        suffix_cache_insert(ids, i64, i64, i32, i32, bad)
    bad.state = to_place(np.zeros(bad.nbytes // 8, np.int64), "cpu")
    with pytest.raises(OP_ERRORS, match="cache_state must be uint8, got int64"):
        suffix_cache_insert(ids, i64, i64, i32, i32, bad)
    bad = SuffixCache.allocate(2, 4, 2)
    object.__setattr__(bad, "config", SuffixCacheConfig(2, 4, 2, key_len=9))
    with pytest.raises(
        OP_ERRORS, match=r"suffix_cache_insert: cache_config: key_len must be in \[1, 8\]"
    ):
        suffix_cache_insert(ids, i64, i64, i32, i32, bad)
    small = SuffixCache.allocate(2, 4, 1)
    with pytest.raises(OP_ERRORS, match="the batch must have at most the cache's slots = 1"):
        suffix_cache_insert(ids, i64, i64, i32, i32, small)
    with pytest.raises(OP_ERRORS, match="suffix_cache_finish: finished"):
        suffix_cache_finish(to_place(np.zeros(2, np.int64), "cpu"), c)
    for kw, msg in [
        (dict(rows=0, width=4, slots=1), "rows must be"),
        (dict(rows=1, width=1 << 17, slots=1), "width must be"),
        (dict(rows=1, width=4, slots=1, key_len=9), "key_len must be"),
        (dict(rows=1, width=4, slots=1, max_occurrences=8), "max_occurrences must be"),
        (dict(rows=1, width=4, slots=1, vocab_size=0), "vocab_size must be"),
        (dict(rows=1, width=4, slots=1, pair_vocab=-1), "pair_vocab must be"),
        (dict(rows=1, width=4, slots=1, line_planes=48), "line_planes must be"),
        (dict(rows=1, width=4, slots=1, line_planes=16), "line_planes must be"),
    ]:
        with pytest.raises(ValueError, match=msg):
            SuffixCache.allocate(**kw)
    with pytest.raises(ValueError, match="max_cached_requests must be"):
        SuffixCache.from_config(0, 4, 100, 1)
    assert SuffixCache.from_config(-1, 10, 105, 1).read("tokens").shape == (10, 10)


def test_query_bad_inputs_are_named():
    rng = np.random.default_rng(0)
    stream = RequestStream(rng, 2, 32)
    d = stream.step().query_inputs(rng)
    c = SuffixCache.allocate(2, 8, 2)
    t = {n: to_place(d[n], "cpu") for n in QUERY_ARGS}
    t2 = dict(t, suffix_source=to_place(np.zeros(2, np.int64), "cpu"))
    with pytest.raises(OP_ERRORS, match="suffix_cache_query: suffix_source"):
        suffix_cache_query(*(t2[n] for n in QUERY_ARGS), c)
    with pytest.raises(OP_ERRORS, match="suffix_cache_query: max_tree_depth"):
        suffix_cache_query(*(t[n] for n in QUERY_ARGS), c, max_tree_depth=0)
    short = SuffixCache.allocate(2, 8, 1)
    with pytest.raises(
        OP_ERRORS, match="suffix_cache_query: the batch must have at most the cache's slots"
    ):
        suffix_cache_query(*(t[n] for n in QUERY_ARGS), short)


def test_step_bad_inputs_name_the_step():
    """The step checks the insert's arguments and the query's, under its own name."""
    rng = np.random.default_rng(0)
    d = RequestStream(rng, 2, 32).step().query_inputs(rng)
    t = {n: to_place(d[n], "cpu") for n in QUERY_ARGS}
    c = SuffixCache.allocate(2, 8, 2)
    with pytest.raises(OP_ERRORS, match="suffix_cache_step: suffix_source"):
        suffix_cache_step(
            *(dict(t, suffix_source=to_place(np.zeros(2, np.int64), "cpu"))[n] for n in QUERY_ARGS),
            c,
        )
    with pytest.raises(OP_ERRORS, match="suffix_cache_step: prompt_lens"):
        suffix_cache_step(
            *(dict(t, prompt_lens=to_place(np.zeros(2, np.int32), "cpu"))[n] for n in QUERY_ARGS), c
        )
    with pytest.raises(
        OP_ERRORS, match="suffix_cache_step: the batch must have at most the cache's slots"
    ):
        suffix_cache_step(*(t[n] for n in QUERY_ARGS), SuffixCache.allocate(2, 8, 1))
    with pytest.raises(OP_ERRORS, match="suffix_cache_step: max_tree_depth"):
        suffix_cache_step(*(t[n] for n in QUERY_ARGS), c, max_tree_depth=0)
    # Refused before anything ran: the cache is untouched.
    assert c.read("counter").tolist() == [0] and (c.read("rows")[:, 0] == -1).all()


def test_query_refuses_unaligned_state():
    # The GPU scan reads each slot's descriptor from the state's statistics 16 bytes at a time: a
    # view that starts 4 bytes into its buffer is refused, on every place (so that a CPU test
    # catches it too).
    rng = np.random.default_rng(0)
    d = RequestStream(rng, 2, 32).step().query_inputs(rng)
    t = {n: to_place(d[n], "cpu") for n in QUERY_ARGS}
    c = SuffixCache.allocate(2, 8, 2, place=paddle.CPUPlace())
    flat = to_place(np.zeros(c.nbytes + 4, np.uint8), "cpu")
    c.state = flat[4:]
    if not hasattr(c.state, "data_ptr") or c.state.data_ptr() % 16 == 0:
        pytest.skip("this Paddle copies slices: no unaligned view to pass")
    with pytest.raises(OP_ERRORS, match="cache_state must be 16-byte aligned"):
        suffix_cache_query(*(t[n] for n in QUERY_ARGS), c)


def test_layout_fills_the_state():
    """The parts' dtypes and shapes (PARTS, the Python mirror) fill exactly the sizes of the op
    library's layout (its one definition), in its order, 256-byte aligned; bytes per position."""
    for cfg in [
        SuffixCacheConfig(1, 1, 1),
        SuffixCacheConfig(7, 33, 3, key_len=2, line_planes=0),
        SuffixCacheConfig(100, 512, 64, pair_vocab=0),
        SuffixCacheConfig(5, 40, 2, max_occurrences=32, vocab_size=3, line_planes=32),
    ]:
        lay = cache_layout(cfg)
        at = 0
        for name, dtype, shape in PARTS:
            assert lay.offsets[name] == at and at % 256 == 0, (cfg, name)
            assert lay.sizes[name] == int(np.prod(shape(cfg))) * np.dtype(dtype).itemsize, (
                cfg,
                name,
            )
            at += -(-lay.sizes[name] // 256) * 256
        assert lay.total == at
        assert lay.line_bytes == 32 * 12 + cfg.line_planes // 8
    c = SuffixCache.allocate(4, 8, 2, place=paddle.CPUPlace())
    assert c.bytes_per_position == 20.0 and c.nbytes == int(np.prod(c.state.shape))
    assert (c.read("tokens") == -1).all() and (c.read("rows")[:, 0] == -1).all()
    assert (c.read("slots") == -1).all() and c.read("counter").tolist() == [0]


if given is not None:

    @pytest.mark.parametrize("place", PLACES)
    @given(
        seed=st.integers(0, 2**31 - 1),
        rows=st.integers(1, 6),
        width=st.integers(1, 20),
        slots=st.integers(1, 4),
        vocab=st.integers(1, 5),
        key_len=st.integers(1, 4),
    )
    def test_fuzz_streams(place, seed, rows, width, slots, vocab, key_len):
        run_stream(
            place,
            seed,
            12,
            rows=rows,
            width=width,
            slots=slots,
            vocab=vocab,
            key_len=key_len,
            params=params_of(np.random.default_rng(seed)),
        )


@pytest.mark.parametrize("key_len", [1, 2])
def test_soak_cpu(key_len):
    """Thousands of requests through a 32-row cache (evictions all along): state (with key_len 1 the
    per-token counts too) and drafts still equal to the reference at the end, memory unchanged."""
    drv = soak("cpu", 5, 3000, key_len=key_len)
    assert drv.ref.counter >= 3000


@pytest.mark.gpu
@pytest.mark.parametrize("key_len", [1, 2])
def test_soak_gpu(key_len):
    soak("gpu", 6, 3000, key_len=key_len)


def _replay(cfg, traces, slots=1):
    """Runs ``traces`` (prompt, answer) through the runner with the oracle target; returns the
    runner's stats and its proposer."""
    from examples import OracleTarget
    from fastdeploy_spec.proposers import create_proposer
    from fastdeploy_spec.runner import Request, SpecRunner

    answers = {i: list(a) for i, (_, a) in enumerate(traces)}
    reqs = [Request(i, list(p), len(a) + 1) for i, (p, a) in enumerate(traces)]
    width = max(len(p) + len(a) for p, a in traces) + 16
    proposer = create_proposer(cfg)
    runner = SpecRunner(
        cfg,
        OracleTarget(answers, 64, 0),
        max_num_seqs=slots,
        max_model_len=width,
        end_tokens=[0],
        proposer=proposer,
    )
    out = runner.run(reqs)
    assert all(out[i] == answers[i] + [0] for i in answers)
    return runner.stats, proposer


def test_proposer_drafts_from_earlier_requests():
    """Repeated traffic: the second request's answer is drafted from the first one's cached response
    (more tokens per step than with the request's own history alone), and suffix_source says so."""
    from fastdeploy_spec.config import SpeculativeConfig

    answer = [5, 9, 7, 3, 8, 2, 6, 4, 11, 12, 13, 14, 15, 16, 17, 18]
    traces = [([1, 2], answer), ([3, 1, 2], answer)]
    local = SpeculativeConfig(
        method="suffix", num_speculative_tokens=4, suffix_decoding_max_cached_requests=0
    )
    warm = SpeculativeConfig(
        method="suffix",
        num_speculative_tokens=4,
        suffix_decoding_max_cached_requests=8,
        suffix_decoding_cached_response_len=32,
    )
    st_local, p_local = _replay(local, traces)
    st_warm, p_warm = _replay(warm, traces)
    assert p_local.cache is None and p_warm.cache is not None
    assert p_warm.cache.read("tokens").shape == (8, 32)
    assert st_warm.tokens_per_decode_step > st_local.tokens_per_decode_step
    # The first response is cached whole, end token included: its last accepted tokens were added
    # when the second request took the slot (the proposer's reset). The second one, whose slot is
    # never seen again, up to the tokens accepted before its last decoding step.
    rows = p_warm.cache.read("rows")
    assert rows[:2, 0].tolist() == [0, 1] and rows[2:, 0].tolist() == [-1] * 6
    toks = p_warm.cache.read("tokens")
    assert toks[0, : rows[0, 1]].tolist() == answer + [0]
    assert 0 < rows[1, 1] <= len(answer)
    assert toks[1, : rows[1, 1]].tolist() == answer[: rows[1, 1]]


def two_slot_inserts(place, steps, counter_before=None):
    """Inserts of two slots with fixed histories (slot 0: prompt 1, response 5 6 7 8 9 4 3; slot 1:
    prompt 2, response 5 6 7 8 1) into a cache of 4 rows and its reference; ``steps`` are
    (step_idx, seq_lens_encoder, seq_lens_decoder) per call, ``counter_before`` {call: counter}
    written into both before that call (a state the ops did not write). Returns (cache, ref)."""
    from tests.reference.suffix_cache import SuffixCacheRef

    ids = np.full((2, 12), -1, np.int64)
    ids[0, :8] = [1, 5, 6, 7, 8, 9, 4, 3]
    ids[1, :6] = [2, 5, 6, 7, 8, 1]
    P = np.array([[1], [1]], np.int64)
    cache = SuffixCache.allocate(4, 16, 2, key_len=1, place=to_place(ids, place).place)
    ref = SuffixCacheRef(4, 16, 2, key_len=1)
    for i, (s, enc, dec) in enumerate(steps):
        if i in (counter_before or {}):
            cache.write("counter", [counter_before[i]])
            ref.counter = counter_before[i]
        args = (
            ids,
            P,
            np.array(s, np.int64).reshape(2, 1),
            np.array(enc, np.int32),
            np.array(dec, np.int32),
        )
        suffix_cache_insert(*(to_place(a, place) for a in args), cache)
        ref.insert(*args)
    return cache, ref


@pytest.mark.parametrize("place", PLACES)
def test_closing_slot_adds_its_last_tokens(place):
    """A request's last step: the runner's update frees the slot (seq_lens_decoder 0) after writing
    the accepted tokens into its row. At the next insert the slot is closing: those tokens are
    appended, then the slot is free (state -1). A slot that prefills instead holds a new prompt:
    nothing of it is appended. Equal to the reference."""
    steps = [  # (step_idx, seq_lens_encoder, seq_lens_decoder)
        ([3, 3], [0, 0], [4, 4]),  # both decoding: 3 tokens each
        ([7, 5], [0, 0], [0, 0]),  # slot 0 finished (empty, 7 tokens in its row), slot 1 too
        ([7, 5], [0, 3], [0, 0]),  # slot 0 still empty, slot 1 prefills: nothing changes
    ]
    cache, ref = two_slot_inserts(place, steps)
    rows = cache.read("rows")
    assert rows[:2].tolist() == [[0, 7], [1, 5]]
    assert cache.read("tokens")[0, :7].tolist() == [5, 6, 7, 8, 9, 4, 3]
    assert cache.read("tokens")[1, :5].tolist() == [5, 6, 7, 8, 1]
    assert cache.read("slots").tolist() == [-1, -1]
    assert ref.responses == {0: [5, 6, 7, 8, 9, 4, 3], 1: [5, 6, 7, 8, 1]}
    assert ref.slots == [-1, -1]


@pytest.mark.parametrize("place", PLACES)
def test_closing_slot_leaves_a_new_request_of_its_number_alone(place):
    """A counter the ops did not write (here 0, below the rows' request numbers) makes the call
    hand out a number a closing slot still holds: slot 1 begins request 0 in row 0 while slot 0
    closes request 0. The closing slot adds nothing (the row is the new request's) and is free,
    on every place and in the reference (docs/contract/suffix.md, "A state the ops did not
    write")."""
    steps = [  # (step_idx, seq_lens_encoder, seq_lens_decoder)
        ([3, 3], [0, 0], [4, 4]),  # both decoding: requests 0 and 1, 3 tokens each
        ([7, 5], [0, 0], [0, 6]),  # slot 0 closing request 0; slot 1 (state 1 >= 0) begins one
    ]
    cache, ref = two_slot_inserts(place, steps, counter_before={1: 0})
    assert cache.read("rows")[:2].tolist() == [[0, 5], [1, 3]]
    assert cache.read("tokens")[0, :5].tolist() == [5, 6, 7, 8, 1]  # slot 1's, none of slot 0's
    assert cache.read("slots").tolist() == [-1, 0]
    assert cache.read("counter").tolist() == [1]
    assert ref.responses == {0: [5, 6, 7, 8, 1], 1: [5, 6, 7]}
    assert ref.slots == [-1, 0] and ref.counter == 1


def test_proposer_source_output():
    """suffix_source marks the global winner per slot (0 local, 1 global)."""
    import paddle

    from fastdeploy_spec.buffers import copy_from_host, make_share_inputs
    from fastdeploy_spec.config import SpeculativeConfig
    from fastdeploy_spec.proposers import SuffixProposer

    cfg = SpeculativeConfig(
        method="suffix",
        num_speculative_tokens=3,
        suffix_decoding_max_cached_requests=4,
        suffix_decoding_cached_response_len=16,
    )
    bufs = make_share_inputs(2, 16, cfg)
    row = np.full((2, 16), -1, np.int64)
    row[0, :6] = [9, 5, 6, 7, 8, 1]  # prompt 9, response 5 6 7 8 1
    row[1, :4] = [4, 4, 5, 6]  # prompt 4 4, response 5 6
    copy_from_host(bufs["token_ids_all"], row)
    copy_from_host(bufs["prompt_lens"], np.array([[1], [2]], np.int64))
    copy_from_host(bufs["step_idx"], np.array([[5], [2]], np.int64))
    copy_from_host(bufs["max_dec_len"], np.array([[100], [100]], np.int64))
    copy_from_host(bufs["seq_lens_decoder"], np.array([6, 4], np.int32))
    proposer = SuffixProposer(cfg)
    proposer.run(share_inputs=bufs)
    assert proposer.suffix_source.numpy().tolist() == [0, 1]
    assert bufs["draft_tokens"].numpy()[1, 1].tolist() == 7
    proposer.finish(paddle.to_tensor(np.array([1, 0], np.int32)))
    assert proposer.cache.read("slots").tolist() == [-2, 1]


def test_fd_config_keys_reach_the_cache():
    from types import SimpleNamespace as NS

    from fastdeploy_spec.proposers import SuffixProposer

    fd = NS(
        speculative_config=NS(
            method="suffix",
            num_speculative_tokens=2,
            suffix_decoding_max_cached_requests=3,
            suffix_decoding_cached_response_len=8,
            suffix_decoding_global_min_match=2,
        ),
        graph_opt_config=NS(use_cudagraph=False),
        scheduler_config=NS(max_num_seqs=1),
        model_config=NS(max_model_len=32),
    )
    p = SuffixProposer(fd)
    assert p.max_cached_requests == 3
    assert p.config.suffix_decoding_cached_response_len == 8
    assert p.config.suffix_decoding_global_min_match == 2
    from fastdeploy_spec.config import SpeculativeConfig

    with pytest.raises(ValueError, match="suffix_decoding_max_cached_requests"):
        SpeculativeConfig(method="suffix", suffix_decoding_max_cached_requests=-2)
    with pytest.raises(ValueError, match="suffix_decoding_global_min_match"):
        SpeculativeConfig(method="suffix", suffix_decoding_global_min_match=0)
