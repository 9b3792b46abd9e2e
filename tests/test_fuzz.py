"""Differential fuzzing of every token op with hypothesis: CPU against the NumPy reference, GPU
against CPU (and the reference) where a GPU exists.

Generated batches mix slot states (prefill, decoding, empty, stopped, unscheduled), use vocabularies
of 1 to 3 tokens so that n-grams and drafts match, lengths from negative to past the tensor width,
and thresholds that bind (``suffix_match`` too). ``ngram_match`` on CPU is fuzzed in test_ngram_match_property.py; here it
only gets the GPU-against-CPU run.

Budget: the hypothesis profile from tests/conftest.py ("ci": 150 derandomized examples per test;
``HYPOTHESIS_PROFILE=long`` or ``FDSPEC_FUZZ_EXAMPLES=N`` for a longer search).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("hypothesis")  # a test-only dependency; the GPU machine may lack it

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from fastdeploy_spec import ops  # noqa: E402
from tests.helpers import LOGITS_DTYPES, PLACES, make_logits, to_place  # noqa: E402
from tests.reference import draft_model as draft  # noqa: E402
from tests.reference import get_accept_tokens as accept  # noqa: E402
from tests.reference import hybrid_mtp_ngram as hybrid  # noqa: E402
from tests.reference import logprob_msg as msg_ref  # noqa: E402
from tests.reference import logprobs_topk as logprobs  # noqa: E402
from tests.reference import ngram_match as ngram  # noqa: E402
from tests.reference import suffix_match as suffix  # noqa: E402
from tests.reference import unified_update as update  # noqa: E402
from tests.reference import verify_draft_tokens as verify  # noqa: E402
from tests.reference.get_accept_tokens import ref_cu_batch_offset  # noqa: E402
from tests.reference.ngram_match import THRESHOLD_ENV  # noqa: E402

FIXTURES_OK = settings(
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ]
)
THRESHOLDS = st.one_of(st.integers(0, 30), st.just(10**6))


def fuzz_on_places(test):
    """A hypothesis test (``data``) run on every place."""
    return pytest.mark.parametrize("place", PLACES)(FIXTURES_OK(given(data=st.data())(test)))


@pytest.fixture(autouse=True)
def _no_threshold_env(monkeypatch):
    for var in (THRESHOLD_ENV, "SPEC_TOKENUM_THRESHOLD"):
        monkeypatch.delenv(var, raising=False)


def ints(data, shape, lo, hi, dtype, label):
    """An integer array of `shape` with elements in [lo, hi] (shrinks towards lo..)."""
    return data.draw(hnp.arrays(dtype, shape, elements=st.integers(lo, hi)), label=label)


def choice(data, shape, values, dtype, label):
    # The values in `dtype` already: NumPy 1.x compares float32(1.7) != 1.7, which hypothesis refuses.
    values = [np.asarray(v, dtype)[()] for v in values]
    return data.draw(hnp.arrays(dtype, shape, elements=st.sampled_from(values)), label=label)


def on_places(place, run, want):
    """Runs `run(place)`; on the GPU also `run("cpu")`: both must equal `want` (a tuple of arrays)."""
    got = run(place)
    if place == "gpu":
        for g, c in zip(got, run("cpu")):
            np.testing.assert_array_equal(g, c, err_msg="GPU against CPU")
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).reshape(np.shape(w)), w)


def draft_inputs(data, B, W, K, rows, vocab, *, max_dec_len_hi):
    """The nine share inputs of the n-gram/suffix ops (ngram_match's order), drawn with hostile
    lengths: negative and past-the-row prompt and step counts, negative budgets, odd slot states."""
    return {
        "token_ids_all": ints(data, (rows, W), -1, vocab - 1, np.int64, "tokens"),
        "prompt_lens": ints(data, (B, 1), -2, W + 2, np.int64, "P"),
        "step_idx": ints(data, (B, 1), -2, W + 2, np.int64, "s"),
        "draft_token_num": ints(data, (B,), -1, K + 2, np.int32, "draft_token_num"),
        "draft_tokens": ngram.sentinels(B, K),
        "seq_lens_this_time": ints(data, (B,), -3, 12, np.int32, "slt"),
        "seq_lens_encoder": choice(data, (B,), [0, 0, 0, 3, -1], np.int32, "enc"),
        "seq_lens_decoder": choice(data, (B,), [0, 5, 5, 5, -1], np.int32, "dec"),
        "max_dec_len": ints(data, (B, 1), -1, max_dec_len_hi, np.int64, "max_dec_len"),
    }


# ---- ngram_match: GPU against CPU ------------------------------------------------------------------


@pytest.mark.gpu
@FIXTURES_OK
@given(data=st.data())
def test_ngram_match_gpu_against_cpu(data):
    B, W, k = (
        data.draw(st.integers(0, 40), label="B"),
        data.draw(st.integers(1, 24), label="W"),
        data.draw(st.integers(0, 6), label="K"),
    )
    rows = B + data.draw(st.integers(0, 2), label="extra rows")
    vocab = data.draw(st.integers(1, 3), label="vocab")
    d = draft_inputs(data, B, W, k, rows, vocab, max_dec_len_hi=24)
    ngram.check(
        d,
        "gpu",
        data.draw(st.integers(1, 5), label="n"),
        data.draw(st.one_of(st.none(), THRESHOLDS), label="threshold"),
    )


# ---- hybrid_mtp_ngram ----------------------------------------------------------------------------------


@fuzz_on_places
def test_hybrid_mtp_ngram(place, data):
    B = data.draw(st.integers(0, 7), label="B")
    W, D = data.draw(st.integers(1, 16), label="W"), data.draw(st.integers(1, 12), label="D")
    K1 = data.draw(st.integers(1, 6), label="K+1")
    rows = B + data.draw(st.integers(0, 2), label="extra rows")
    vocab = data.draw(st.integers(1, 3), label="vocab")
    case = dict(
        token_ids_all=ints(data, (rows, W), -1, vocab - 1, np.int64, "tokens"),
        prompt_lens=ints(data, (B, 1), -2, W + 2, np.int64, "P"),
        pre_ids=ints(data, (rows, D), -1, vocab - 1, np.int64, "pre_ids"),
        step_idx=ints(data, (B, 1), -2, D + 2, np.int64, "s"),
        draft_token_num=np.full(B, K1 - 1, np.int32),
        draft_tokens=np.full((B, K1), hybrid.UNTOUCHED, np.int64),
        seq_lens_this_time=choice(data, (B,), [-3, 0, 1, 1, 2, 3, K1, K1 + 1, 40], np.int32, "slt"),
        seq_lens_decoder=choice(data, (B,), [-1, 0, 5, 5, 5], np.int32, "dec"),
        max_dec_len=ints(data, (B, 1), -1, 24, np.int64, "max_dec_len"),
    )
    max_n = data.draw(st.integers(1, 5), label="max_ngram_size")
    min_n = data.draw(st.integers(1, max_n), label="min_ngram_size")
    max_draft = data.draw(st.integers(0, K1 + 2), label="max_draft_tokens")
    threshold = data.draw(THRESHOLDS, label="threshold")
    want = hybrid.run_ref(case, max_n, min_n, max_draft, threshold)
    on_places(
        place, lambda p: hybrid.run_op(case, p, max_n, min_n, max_draft, threshold=threshold), want
    )


# ---- draft-model ops (MTP proposer): preprocess, update, accept ------------------------------------


def _draft_state(data, B, K, D, vocab):
    """Draft and target slot state: every slot kind, lengths from negative to past the row."""
    return dict(
        input_ids=ints(data, (B, 1), -2, vocab, np.int64, "input_ids"),
        seq_lens_decoder=choice(data, (B,), [-1, 0, 0, 3, 2**31 - 1], np.int32, "draft dec"),
        step_idx=ints(data, (B, 1), -2, D + 2, np.int64, "step_idx"),
        pre_ids=ints(data, (B, D), -1, vocab - 1, np.int64, "pre_ids"),
        mtp_draft_num=ints(data, (B,), -1, K + 2, np.int32, "mtp_draft_num"),
        max_dec_len=ints(data, (B, 1), -1, 9, np.int64, "max_dec_len"),
        base_model_seq_lens_this_time=ints(data, (B,), -1, K + 2, np.int32, "slt"),
        base_model_seq_lens_encoder=choice(data, (B,), [0, 0, 0, 3, -2], np.int32, "enc"),
        base_model_seq_lens_decoder=choice(data, (B,), [0, 5, 5, 17, -1], np.int32, "dec"),
        base_model_stop_flags=data.draw(hnp.arrays(np.bool_, (B, 1)), label="stop"),
        base_model_max_dec_len=ints(data, (B, 1), -1, 30, np.int64, "base max_dec_len"),
        base_model_draft_tokens=ints(data, (B, K + 1), -1, vocab - 1, np.int64, "drafts"),
        accept_tokens=ints(data, (B, K + 1), 0, vocab - 1, np.int64, "accept_tokens"),
        accept_num=ints(data, (B,), -2, K + 3, np.int32, "accept_num"),
    )


@fuzz_on_places
def test_draft_model_ops(place, data):
    """A random chain of preprocess / update(substep) / accept / accept_preprocess calls on one state."""
    B, K = data.draw(st.integers(0, 9), label="B"), data.draw(st.integers(1, 5), label="K")
    D, vocab = data.draw(st.integers(1, 10), label="D"), data.draw(st.integers(1, 4), label="vocab")
    dtype = data.draw(st.sampled_from(LOGITS_DTYPES), label="dtype")
    state = _draft_state(data, B, K, D, vocab)
    calls = data.draw(
        st.lists(
            st.one_of(
                st.just(("preprocess", 0)),
                st.just(("accept", 0)),
                st.just(("accept_preprocess", 0)),
                st.tuples(st.just("update"), st.integers(0, K - 1)),
            ),
            min_size=1,
            max_size=6,
        ),
        label="calls",
    )
    logits = [
        make_logits(
            choice(data, (B, vocab), [-1.0, 0.0, 0.5, 0.5, np.inf, np.nan], np.float32, "logits"),
            dtype,
        )
        for _ in calls
    ]

    def run(p, side):
        for (op, substep), storage in zip(calls, logits):
            if op == "update":
                side.update(storage, dtype, substep)
            else:
                getattr(side, op)()
        return side.host() if p is not None else side.s

    want = run(None, draft.Reference(state))
    keys = sorted(want)
    on_places(
        place,
        lambda p: tuple(run(p, draft.Device(state, p))[k] for k in keys),
        tuple(want[k] for k in keys),
    )


# ---- suffix_match --------------------------------------------------------------------------------------


@fuzz_on_places
def test_suffix_match(place, data):
    B, W = data.draw(st.integers(0, 6), label="B"), data.draw(st.integers(1, 40), label="W")
    K = data.draw(st.integers(1, 8), label="K")
    rows = B + data.draw(st.integers(0, 2), label="extra rows")
    vocab = data.draw(st.integers(1, 3), label="vocab")
    case = {
        **draft_inputs(data, B, W, K, rows, vocab, max_dec_len_hi=40),
        "suffix_tokens": np.full((rows, K), -7, np.int64),
        "suffix_probs": np.full((rows, K), -7.0, np.float32),
        "suffix_meta": np.full((rows, 2), -7, np.int32),
    }
    kw = dict(
        max_tree_depth=data.draw(st.integers(1, 12), label="max_tree_depth"),
        max_spec_factor=data.draw(st.sampled_from([0.0, 0.5, 1.0, 3.0]), label="factor"),
        max_spec_offset=data.draw(st.sampled_from([-1.0, 0.0, 0.5, 2.0]), label="offset"),
        min_token_prob=data.draw(
            st.sampled_from([0.0, 0.1, 0.34, 0.5, 1.0]), label="min_token_prob"
        ),
        max_draft_tokens=data.draw(st.integers(0, K), label="max_draft_tokens"),
        pad_to_max=data.draw(st.booleans(), label="pad_to_max"),
        threshold=data.draw(st.one_of(st.none(), THRESHOLDS), label="threshold"),
    )
    suffix.check(case, place, **kw)


# ---- speculate_get_accept_tokens_and_logits / speculate_compute_cu_batch_offset -------------------


@fuzz_on_places
def test_get_accept_tokens_and_logits(place, data):
    B = data.draw(st.integers(0, 7), label="B")
    V, stride = data.draw(st.integers(1, 9), label="V"), data.draw(st.integers(1, 5), label="K+1")
    dtype = data.draw(st.sampled_from(LOGITS_DTYPES), label="dtype")
    R = data.draw(st.integers(0, B * stride + 2), label="logits rows")
    N = data.draw(st.integers(0, B * stride + 2), label="N")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    case = dict(
        token_ids=np.full(N, accept.SENTINEL_TOKEN, np.int64),
        target_logits=make_logits(np.full((N, V), -3.5, np.float32), dtype),
        logits=make_logits(rng.standard_normal((R, V)).astype(np.float32), dtype),
        cu=np.full(
            B + 1 + data.draw(st.integers(0, 2), label="extra offsets"),
            accept.SENTINEL_OFFSET,
            np.int32,
        ),
        cu_q=ints(data, (B + 1,), -2, R + 2, np.int32, "cu_seqlens_q_output"),
        slt=ints(data, (B,), -1, stride + 1, np.int32, "slt"),
        enc=choice(data, (B,), [0, 0, 0, 9, -1], np.int32, "enc"),
        accept_num=ints(data, (B,), -3, stride + 3, np.int32, "accept_num"),
        accept_tokens=rng.integers(0, 1000, (B, stride)).astype(np.int64),
    )
    accept.check(case, dtype, place)
    if place == "gpu":
        gpu, cpu = accept.run_op(case, dtype, "gpu"), accept.run_op(case, dtype, "cpu")
        for g, c in zip(gpu, cpu):
            np.testing.assert_array_equal(g, c, err_msg="GPU against CPU")


@fuzz_on_places
def test_compute_cu_batch_offset(place, data):
    real_bsz = data.draw(st.integers(0, 40), label="real_bsz")
    accept_num = (
        ints(
            data,
            (real_bsz + data.draw(st.integers(0, 3)),),
            -(2**31),
            2**31 - 1,
            np.int32,
            "accept_num",
        )
        if data.draw(st.booleans(), label="extreme counts")
        else ints(data, (real_bsz + data.draw(st.integers(0, 3)),), -3, 9, np.int32, "accept_num")
    )
    max_accept = data.draw(st.one_of(st.none(), st.integers(0, 7)), label="max_accept_num")
    cu = np.full(real_bsz + 1 + data.draw(st.integers(0, 2)), accept.SENTINEL_OFFSET, np.int32)
    want = cu.copy()
    if max_accept is None and np.maximum(accept_num[:real_bsz].astype(np.int64), 0).sum() >= 2**31:
        return  # an offset past INT32_MAX: no int32 answer exists (checked in test_hostile_inputs)
    want[: real_bsz + 1] = ref_cu_batch_offset(
        accept_num[:real_bsz], max_accept
    )  # real_bsz 0: cu[0] = 0

    def run(p):
        t = to_place(cu, p)
        ops.speculate_compute_cu_batch_offset(
            t, to_place(accept_num, p), real_bsz, max_accept_num=max_accept
        )
        return (t.numpy(),)

    on_places(place, run, (want,))


# ---- speculate_logprobs_topk ----------------------------------------------------------------------------


@fuzz_on_places
def test_logprobs_topk(place, data):
    B = data.draw(st.integers(0, 5), label="B")
    V, k = data.draw(st.integers(1, 40), label="V"), data.draw(st.integers(0, 20), label="k")
    dtype = data.draw(st.sampled_from(LOGITS_DTYPES), label="dtype")
    N = data.draw(st.integers(0, 3 * B + 2), label="N")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    tie_range = data.draw(st.sampled_from([None, 1, 2, 3]), label="tie range")
    values = (
        rng.standard_normal((N, V)) * 3 if tie_range is None else rng.integers(0, tie_range, (N, V))
    )
    counts = ints(data, (B,), -1, 4, np.int64, "accepted per slot")
    case = dict(
        logits=make_logits(values.astype(np.float32), dtype),
        tokens=ints(data, (N,), -2, V + 1, np.int64, "tokens"),
        # offsets as the gather op leaves them, or hostile (decreasing, negative, past N)
        cu=(
            np.concatenate([[0], np.cumsum(np.maximum(counts, 0))]).astype(np.int32)
            if data.draw(st.booleans(), label="valid offsets")
            else ints(data, (B + 1,), -2, N + 3, np.int32, "cu")
        ),
        temperature=(
            choice(data, (B,), [0.0, 0.5, 1.0, 1.7, -1.0], np.float32, "temperature")
            if data.draw(st.booleans(), label="with temperature")
            else None
        ),
    )
    raw = data.draw(st.booleans(), label="raw_logits")
    if not np.all(np.diff(case["cu"]) >= 0):
        case["cu"] = np.sort(case["cu"])  # the row -> slot search assumes sorted offsets
    logprobs.check(case, dtype, place, k, raw)
    if place == "gpu":
        gpu, cpu = (
            logprobs.run_op(case, dtype, "gpu", k, raw),
            logprobs.run_op(case, dtype, "cpu", k, raw),
        )
        for g, c in zip(gpu[::2], cpu[::2]):  # ids and ranks exactly (scores: check's tolerance)
            np.testing.assert_array_equal(g, c, err_msg="GPU against CPU")


# ---- verify_draft_tokens / unified_update_model_status / naive_update_model_status -----------------------


@fuzz_on_places
def test_verify_draft_tokens(place, data):
    B, K = data.draw(st.integers(0, 9), label="B"), data.draw(st.integers(0, 6), label="K")
    strategy = data.draw(
        st.sampled_from([verify.TOPP, verify.GREEDY, verify.TARGET_MATCH]), label="strategy"
    )
    flags = data.draw(
        st.sampled_from([{}, {"accept_all": True}, {"reject_all": True}]), label="flags"
    )
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    case = verify.random_case(
        rng,
        B,
        K,
        data.draw(st.integers(1, 3), label="vocab"),
        strategy,
        C=data.draw(st.integers(1, 4), label="C"),
        seeds=data.draw(st.booleans()),
        **flags,
    )
    on_places(place, lambda p: verify.run(case, p), verify.verify_draft_tokens_ref(case))


@fuzz_on_places
def test_unified_update(place, data):
    B, K = data.draw(st.integers(0, 9), label="B"), data.draw(st.integers(0, 6), label="K")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    case = update.random_update_case(
        rng,
        B,
        K,
        data.draw(st.integers(1, 3), label="vocab"),
        L=data.draw(st.integers(0, 16), label="L"),
    )
    want = update.unified_update_ref(case)

    def run(p):
        got = update.run_update(case, p)
        return tuple(got[k] for k in update.UPDATE_OUTPUTS)

    on_places(place, run, tuple(want[k] for k in update.UPDATE_OUTPUTS))


@fuzz_on_places
def test_naive_update(place, data):
    B = data.draw(st.integers(0, 9), label="B")
    case = update.random_naive_case(
        np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed")), B
    )
    want = update.naive_update_ref(case)

    def run(p):
        got = update.run_naive(case, p)
        return tuple(got[k] for k in update.NAIVE_OUTPUTS)

    on_places(place, run, tuple(want[k] for k in update.NAIVE_OUTPUTS))


# ---- logprob messages: save op -> queue -> receive op, in one process ----------------------------------


@pytest.mark.parametrize("place", PLACES)
@settings(FIXTURES_OK, max_examples=max(1, settings.default.max_examples * 2 // 5))  # IPC: fewer
@given(data=st.data())
def test_message_round_trip(place, queue_id, data):
    mode = data.draw(st.sampled_from(["save", "mtp"]), label="mode")
    step = msg_ref.make_step(
        np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed")),
        mode=mode,
        batch=data.draw(st.integers(1, 8), label="batch"),
        columns=data.draw(st.integers(1, 21), label="M"),
        flag=data.draw(st.integers(0, 255), label="flag"),
        not_need_stop=data.draw(st.booleans()),
        prefill_frac=data.draw(st.sampled_from([0.0, 0.3, 1.0]), label="prefill"),
        preempt_frac=data.draw(st.sampled_from([0.0, 0.3, 1.0]), label="preempted"),
        full=data.draw(st.booleans(), label="full"),
    )
    # At most 8 slots: the message (fragments included) fits the default queue capacity (msgmnb
    # 16384), so this one process can send it before it receives.
    op = ops.speculate_save_output_topk if mode == "save" else ops.mtp_save_first_token_with_topk
    op(*[to_place(step[k], place) for k in msg_ref.input_names(step)], step["flag"], 0, False)
    t = msg_ref.receive_tensors()
    ops.speculate_get_output_topk(*t, 20, 0, False)
    want = msg_ref.apply_message(msg_ref.fresh_buffers(), step)
    np.testing.assert_array_equal(t[0].numpy().reshape(-1), want["tokens"])
    np.testing.assert_array_equal(
        t[1].numpy().reshape(-1).view(np.int32), want["scores"].view(np.int32)
    )
    np.testing.assert_array_equal(t[2].numpy(), want["ranks"])
