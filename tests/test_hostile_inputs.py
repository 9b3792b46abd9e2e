"""Hostile inputs: every op either raises an error naming the problem or clamps the value as
docs/contract/general.md says (to the tensor's bounds), and never reads or writes outside a tensor
(scripts/sanitize_cpu.sh runs this file under AddressSanitizer and UBSan).

Covered: lengths past the tensor width and at the integer limits (INT32_MAX / INT64_MAX and their
negatives), negative counts, accept_num above K + 1, offsets out of range, empty tensors,
non-contiguous views (slicing, transpose), NaN and Inf logits.
"""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from fastdeploy_spec import ops
from tests.helpers import PLACES, to_place
from tests.reference import get_accept_tokens as accept
from tests.reference import hybrid_mtp_ngram as hybrid
from tests.reference import logprob_msg as msg_ref
from tests.reference import logprobs_topk as logprobs
from tests.reference import ngram_match as ngram
from tests.reference import unified_update as update
from tests.reference import verify_draft_tokens as verify
from tests.reference.get_accept_tokens import ref_cu_batch_offset
from tests.reference.ngram_match import THRESHOLD_ENV, make_ngram_batch

I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
EXTREMES_32 = [I32_MIN, I32_MIN + 1, -1, I32_MAX - 1, I32_MAX]
EXTREMES_64 = [I64_MIN, I64_MIN + 1, I32_MIN, -1, I32_MAX, I32_MAX + 1, I64_MAX - 1, I64_MAX]


@pytest.fixture(autouse=True)
def _no_threshold_env(monkeypatch):
    for var in (THRESHOLD_ENV, "SPEC_TOKENUM_THRESHOLD"):
        monkeypatch.delenv(var, raising=False)


def spread(values, n, dtype, seed):
    """n values cycling through `values` in a shuffled order, one per slot."""
    v = np.resize(np.array(values, dtype=object), n)
    np.random.default_rng(seed).shuffle(v)
    return np.array(v.tolist(), dtype=dtype)


def extremes(case, field, seed):
    """Fills `case[field]` (16 slots) with the integer limits of its dtype, shuffled by `seed`."""
    v = case[field]
    big = EXTREMES_64 if v.dtype == np.int64 else EXTREMES_32
    case[field] = spread(big, 16, v.dtype, seed).reshape(v.shape)


# ---- Integer limits in every length and count: same answer as the reference (which clamps) --------


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize(
    "field",
    [
        "prompt_lens",
        "step_idx",
        "max_dec_len",
        "draft_token_num",
        "seq_lens_this_time",
        "seq_lens_encoder",
        "seq_lens_decoder",
    ],
)
def test_ngram_match_integer_limits(place, field):
    d = make_ngram_batch(np.random.default_rng(1), 16, 24, vocab=2)
    extremes(d, field, 2)
    for threshold in (10**6, 20):
        ngram.check(d, place, 3, threshold)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize(
    "field", ["prompt_lens", "step_idx", "max_dec_len", "seq_lens_this_time", "seq_lens_decoder"]
)
def test_hybrid_mtp_ngram_integer_limits(place, field):
    case = hybrid.make_case(np.random.default_rng(3), 16, 20, 12, 2)
    extremes(case, field, 4)
    for threshold in (10**6, 20):
        hybrid.check(case, place, 3, 1, 5, threshold)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("strategy", [verify.TOPP, verify.GREEDY])
@pytest.mark.parametrize(
    "field",
    [
        "step_idx",
        "max_dec_len",
        "seq_lens_this_time",
        "seq_lens_encoder",
        "reasoning_status",
        "seeds",
        "candidate_lens",
        "step_input_ids",
    ],
)
def test_verify_draft_tokens_integer_limits(place, strategy, field):
    case = verify.random_case(np.random.default_rng(5), 16, 4, 2, strategy, rows=0, seeds=True)
    if case.get(field) is None or case[field].size != 16:
        pytest.skip(f"{field} is not a 16-slot tensor in this case")
    extremes(case, field, 6)
    verify.check(case, place)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize(
    "field",
    [
        "step_output_len",
        "prompt_lens",
        "step_idx",
        "max_dec_len",
        "seq_lens_encoder",
        "seq_lens_decoder",
    ],
)
def test_unified_update_integer_limits(place, field):
    case = update.random_update_case(np.random.default_rng(7), 16, 4, 3, L=12, rows=0)
    extremes(case, field, 8)
    update.check_update(case, place)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("field", ["accept_num", "cu_q", "enc"])
def test_get_accept_tokens_integer_limits(place, field):
    case = accept.make_case(np.random.default_rng(9), 10, 8, 4, "mixed", "float32")
    case[field] = spread(EXTREMES_32 + [0, 1], case[field].size, np.int32, 10)
    accept.check(case, "float32", place)


@pytest.mark.parametrize("place", PLACES)
def test_accept_num_above_k_plus_1(place):
    # K + 1 = 3: counts of 4, 100 and INT32_MAX are taken as 3 (offsets and copies alike).
    case = accept.make_case(np.random.default_rng(11), 4, 8, 3, "decode", "float32")
    case["accept_num"] = np.array([4, 100, I32_MAX, 3], np.int32)
    _, cu = accept.check(case, "float32", place)
    assert cu.tolist() == [0, 3, 6, 9, 12]


# ---- speculate_compute_cu_batch_offset: an offset past INT32_MAX --------------------------------


@pytest.mark.parametrize("place", PLACES)
def test_cu_batch_offset_saturates_or_clamps(place):
    accept_num = np.array([I32_MAX, I32_MAX, 5], np.int32)
    cu = to_place(np.full(4, -5, np.int32), place)
    ops.speculate_compute_cu_batch_offset(cu, to_place(accept_num, place), 3, max_accept_num=7)
    assert cu.numpy().tolist() == ref_cu_batch_offset(accept_num, 7).tolist() == [0, 7, 14, 19]
    cu = to_place(np.full(4, -5, np.int32), place)
    ops.speculate_compute_cu_batch_offset(cu, to_place(accept_num, place), 3)
    got = cu.numpy()
    assert got[0] == 0 and got[1] == I32_MAX
    assert (np.diff(got.astype(np.int64)) >= 0).all(), f"offsets must not wrap around: {got}"


# ---- speculate_logprobs_topk: NaN and Inf logits, hostile offsets and tokens --------------------------


def _run_logprobs(values, tokens, cu, k, place, temperature=None):
    case = dict(
        logits=values.astype(np.float32),
        tokens=np.asarray(tokens, np.int64),
        cu=np.asarray(cu, np.int32),
        temperature=temperature,
    )
    return logprobs.run_op(case, "float32", place, k)


@pytest.mark.parametrize("place", PLACES)
def test_logprobs_inf_logits(place):
    # +-inf are ordinary ordered values for the ids and ranks. A row holding +inf has log-sum-exp
    # NaN (inf - inf), so all its scores are NaN; a row of only -inf scores the lowest float.
    v = np.array(
        [
            [0.0, np.inf, 1.0, -np.inf],
            [-np.inf, -np.inf, -np.inf, -np.inf],
            [1.0, 2.0, -np.inf, 3.0],
        ],
        np.float32,
    )
    ids, scores, ranks = _run_logprobs(v, [2, 0, 2], [0, 3], 4, place)
    assert ids[:, 0].tolist() == [2, 0, 2]
    assert ids[0, 1] == 1 and ids[2, 1:].tolist() == [3, 1, 0, 2]
    assert ranks.tolist()[2] == 4
    assert np.all(np.isfinite(scores[2, :4]))
    assert scores[2, 4] == np.finfo(np.float32).min
    assert np.isnan(scores[0]).all() and (scores[1] == np.finfo(np.float32).min).all()
    assert not np.any(scores > 0)  # a logprob is never positive (NaN compares false)


@pytest.mark.parametrize("place", PLACES)
def test_logprobs_nan_logits(place):
    # Documented outcome (docs/contract/logprobs.md): no crash, no out-of-bounds; a row holding NaN has
    # NaN or finite scores, ids inside [0, V) or -1, and rank within [0, V]; other rows are exact.
    rng = np.random.default_rng(12)
    v = rng.standard_normal((4, 9)).astype(np.float32)
    v[0, 3] = np.nan
    v[1, :] = np.nan
    ids, scores, ranks = _run_logprobs(v, [3, 0, 5, 8], [0, 4], 5, place)
    assert ((ids[:, 1:] >= -1) & (ids[:, 1:] < 9)).all()
    assert ((ranks >= 0) & (ranks <= 9)).all()
    clean = dict(
        logits=v[2:],
        tokens=np.array([5, 8], np.int64),
        cu=np.array([0, 2], np.int32),
        temperature=None,
    )
    logprobs.check(clean, "float32", place, 5)
    np.testing.assert_array_equal(ids[2:], logprobs.run_op(clean, "float32", place, 5)[0])


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("temperature", [np.nan, np.inf, -np.inf, -1.0, 0.0, 1e-45])
def test_logprobs_hostile_temperature(place, temperature):
    rng = np.random.default_rng(13)
    case = dict(
        logits=rng.standard_normal((3, 7)).astype(np.float32),
        tokens=np.array([1, 2, 3], np.int64),
        cu=np.array([0, 3], np.int32),
        temperature=np.array([temperature], np.float32),
    )
    if temperature == 1e-45:  # a denormal: 1 / T overflows to inf; no crash, ids still ordered
        ids, scores, ranks = logprobs.run_op(case, "float32", place, 3)
        assert ids[:, 0].tolist() == [1, 2, 3] and ((ranks >= 1) & (ranks <= 7)).all()
    else:  # non-positive or non-finite: the slot is left unscaled
        logprobs.check(case, "float32", place, 3)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("cu_end", [I32_MIN, -1, 0, 2, 3, 4, I32_MAX])
def test_logprobs_hostile_offsets_and_tokens(place, cu_end):
    # cu[B] (rows to compute) clamped to [0, N]; token ids outside [0, V) give logprob 0 and rank 0.
    rng = np.random.default_rng(14)
    case = dict(
        logits=rng.standard_normal((3, 5)).astype(np.float32),
        tokens=np.array([I64_MIN, 5, I64_MAX], np.int64),
        cu=np.array([0, cu_end], np.int32),
        temperature=None,
    )
    logprobs.check(case, "float32", place, 2)


# ---- Empty tensors and zero-width rows ----------------------------------------------------------------


@pytest.mark.parametrize("place", PLACES)
def test_empty_batches_are_no_ops(place):
    ngram.check(make_ngram_batch(np.random.default_rng(0), 0, 8), place, 3)
    hybrid.check(hybrid.make_case(np.random.default_rng(0), 0, 4, 4, 2), place, 2, 1, 3, 100)
    verify.check(
        verify.random_case(np.random.default_rng(0), 0, 3, 2, verify.GREEDY, rows=0), place
    )
    update.check_update(update.random_update_case(np.random.default_rng(0), 0, 3, 2, rows=0), place)
    accept.check(
        accept.make_case(np.random.default_rng(0), 0, 4, 3, "decode", "float32"), "float32", place
    )


@pytest.mark.parametrize("place", PLACES)
def test_zero_width_rows(place):
    # W = 0: no prompt or generated token fits; every length clamps to 0 and nothing is drafted.
    d = make_ngram_batch(np.random.default_rng(1), 4, 8)
    d["token_ids_all"] = np.zeros((4, 0), np.int64)
    ngram.check(d, place, 3)
    case = update.random_update_case(np.random.default_rng(2), 4, 2, 3)
    case["token_ids_all"] = np.zeros((case["stop_flags"].size, 0), np.int64)
    update.check_update(case, place)  # nothing to write: every column is past the row's end
    assert update.run_update(case, place)["token_ids_all"].shape == (case["stop_flags"].size, 0)


# ---- Non-contiguous views and misplaced tensors -----------------------------------------------------


def _view(array, how):
    """A non-contiguous Paddle view holding `array`'s values."""
    if how == "transpose":
        return paddle.to_tensor(np.ascontiguousarray(array.T)).transpose([1, 0])
    wide = np.zeros((array.shape[0], 2 * array.shape[1]), array.dtype)
    wide[:, ::2] = array
    return paddle.to_tensor(wide)[:, ::2]


@pytest.mark.parametrize("how", ["transpose", "strided slice"])
@pytest.mark.parametrize("name", ["step_output_ids", "step_input_ids", "candidate_ids"])
def test_non_contiguous_view_rejected(how, name):
    # Paddle 3 gives a custom op a contiguous copy of a view: what the op writes into a mutated view
    # would be lost. Every wrapper refuses views, inputs and outputs alike.
    case = verify.random_case(np.random.default_rng(15), 4, 3, 2, verify.TOPP, rows=0)
    t = {k: (to_place(v, "cpu") if isinstance(v, np.ndarray) else v) for k, v in case.items()}
    t[name] = _view(case[name], how)
    if t[name].is_contiguous():
        pytest.skip("this Paddle makes no strided views")
    with pytest.raises(ValueError, match=f"verify_draft_tokens: {name} is a non-contiguous view"):
        ops.verify_draft_tokens(*(t[k] for k in verify.TENSORS), *(case[k] for k in verify.ATTRS))


def test_row_slices_stay_usable():
    # A slice of leading rows is contiguous: the runner's share_inputs[...][:bsz] pattern works.
    case = update.random_update_case(np.random.default_rng(16), 6, 3, 2, rows=0)
    big = {
        k: to_place(np.concatenate([v, v]), "cpu")
        for k, v in case.items()
        if k not in ("end_tokens", "has_running_seqs")
    }
    t = {k: v[:6] for k, v in big.items()}
    for k in ("end_tokens", "has_running_seqs"):
        t[k] = to_place(case[k], "cpu")
    ops.unified_update_model_status(*(t[k] for k in update.UPDATE_ORDER))
    want = update.unified_update_ref(case)
    for k in ("step_idx", "token_ids_all", "seq_lens_decoder", "stop_flags"):
        np.testing.assert_array_equal(big[k].numpy()[:6], want[k], err_msg=k)


@pytest.mark.gpu
def test_wrongly_placed_tensor_named():
    case = update.random_update_case(np.random.default_rng(17), 4, 3, 2)
    t = {k: to_place(v, "cpu") for k, v in case.items()}
    t["step_input_ids"] = to_place(case["step_input_ids"], "gpu")
    with pytest.raises(ValueError, match="step_input_ids is on GPU but seq_lens_encoder is on CPU"):
        ops.unified_update_model_status(*(t[k] for k in update.UPDATE_ORDER))


# ---- Message ops: hostile counts and offsets are refused before anything is sent -------------------


@pytest.fixture
def queue_id(monkeypatch):
    from tests.helpers import reserved_queue_id

    with reserved_queue_id() as qid:
        monkeypatch.setenv("INFERENCE_MSG_QUEUE_ID", str(qid))
        yield qid


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("token_num_per_batch", I32_MAX, "at most MAX_DRAFT_TOKENS"),
        ("cu_batch_token_offset", I32_MIN, "outside sampled_token_ids"),
        ("cu_batch_token_offset", I32_MAX, "outside sampled_token_ids"),
    ],
)
def test_message_hostile_counts(queue_id, field, value, match):
    from fastdeploy_spec import transport

    step = msg_ref.make_step(np.random.default_rng(18), batch=3, columns=4, full=True)
    step[field] = step[field].copy()
    step[field][1] = value
    with pytest.raises(Exception, match=match):
        msg_ref.send_step(step)
    stats = transport.queue_stats(queue_id)
    assert stats is None or stats.messages == 0


@pytest.mark.parametrize("value", [I32_MIN, -1])
def test_message_negative_count_carries_no_rows(queue_id, value):
    # A negative token count (the save op has no meaning for it) travels as it is; the receiver
    # reads no row of that slot, and the other slots arrive whole.
    step = msg_ref.make_step(np.random.default_rng(19), batch=3, columns=4, full=True)
    step["token_num_per_batch"] = step["token_num_per_batch"].copy()
    step["token_num_per_batch"][1] = value
    msg_ref.send_step(step)
    t = msg_ref.receive_tensors()
    ops.speculate_get_output_topk(*t, 20, 0, False)
    want = msg_ref.apply_message(msg_ref.fresh_buffers(), step)
    np.testing.assert_array_equal(t[0].numpy().reshape(-1), want["tokens"])
    np.testing.assert_array_equal(t[2].numpy(), want["ranks"])
    assert t[0].numpy()[3 + 1, 0] == value


# ---- The hostile suite: every op, every family, each case where a crash cannot take the run down -----

CASE_TIMEOUT_S = (
    30.0  # a case running longer is a hang (the slowest real case takes well under 1 s)
)
STARTUP_TIMEOUT_S = 120.0
PASS = ("named error", "correct result")
OUTCOMES = (
    "named error",
    "correct result",
    "unnamed error",
    "unexpected error",
    "silent garbage",
    "crash",
    "hang",
)


def _run_children(
    place: str, ids: list[str], case_timeout_s: float = CASE_TIMEOUT_S, env: dict | None = None
) -> dict[str, tuple[str, str]]:
    """Runs the cases in child processes (tests/hostile_runner.py), restarting one after a crash or a
    hang with the cases left. Returns {id: (outcome, detail)}."""
    import json
    import os
    import selectors
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from fastdeploy_spec.transport import child_env

    root = Path(__file__).resolve().parent.parent
    results: dict[str, tuple[str, str]] = {}
    todo = list(ids)
    while todo:
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.hostile_runner", place],
                cwd=root,
                env=child_env(**(env or {})),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
            proc.stdin.write(json.dumps(todo).encode())
            proc.stdin.close()
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            current, ready = None, False
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            pending = b""  # read unbuffered: a buffered readline would hide lines from select()
            while True:
                line = None  # None: the deadline passed; b"": the child closed its stdout (exited)
                while b"\n" not in pending:
                    if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                        break
                    chunk = os.read(proc.stdout.fileno(), 1 << 16)
                    if not chunk:
                        line = b""
                        break
                    pending += chunk
                else:
                    line, pending = pending.split(b"\n", 1)
                    line += b"\n"
                if line is None:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    if current is None:
                        raise AssertionError(
                            f"the hostile runner did not start within {STARTUP_TIMEOUT_S} s"
                        )
                    results[current] = ("hang", f"no answer within {case_timeout_s} s")
                    break
                if line == b"":
                    rc = proc.wait()
                    err.seek(0)
                    tail = err.read().decode(errors="replace")[-600:]
                    if current is None:
                        if not ready or todo:
                            raise AssertionError(
                                f"the hostile runner exited ({rc}) before a case: {tail}"
                            )
                    else:
                        results[current] = ("crash", f"exit {rc}: {tail}")
                    break
                line = line.decode(errors="replace").rstrip("\n")
                if not line.startswith("HOSTILE "):
                    continue
                rec = json.loads(line[len("HOSTILE ") :])
                if rec["event"] == "ready":
                    ready = True
                elif rec["event"] == "start":
                    current = rec["id"]
                elif rec["event"] == "done":
                    results[rec["id"]] = (rec["outcome"], rec["detail"])
                    current = None
                    todo.remove(rec["id"])
                deadline = time.monotonic() + case_timeout_s
            if proc.poll() is None:
                proc.wait(30)
        todo = [i for i in todo if i not in results]
    return results


def hostile_table(cases, results) -> str:
    """Markdown table: cases per family and outcome (what tools/gpu_check.sh hostile prints)."""
    families = list(dict.fromkeys(c.family for c in cases))
    counts = {f: {o: 0 for o in OUTCOMES} for f in families}
    for c in cases:
        counts[c.family][results[c.id][0]] += 1
    head = "| Family | Cases | " + " | ".join(OUTCOMES) + " |"
    rows = [head, "|" + "---|" * (len(OUTCOMES) + 2)]
    total = {o: 0 for o in OUTCOMES}
    for f in families:
        n = sum(counts[f].values())
        rows.append(f"| {f} | {n} | " + " | ".join(str(counts[f][o]) for o in OUTCOMES) + " |")
        for o in OUTCOMES:
            total[o] += counts[f][o]
    rows.append(
        f"| **all** | **{sum(total.values())}** | "
        + " | ".join(f"**{total[o]}**" for o in OUTCOMES)
        + " |"
    )
    return "\n".join(rows)


@pytest.mark.parametrize("place", PLACES)
def test_hostile_suite(place):
    """Every hostile case of tests/hostile_cases.py: a named error or the correct result; 0 crashes,
    0 hangs, 0 silent garbage (and 0 unnamed or unexpected errors). The table goes to stdout and, with
    FDSPEC_HOSTILE_REPORT=path, to a file (markdown + a JSON line per case)."""
    import json
    import os

    from tests.hostile_cases import build_cases

    cases = build_cases(place)
    results = _run_children(place, [c.id for c in cases])
    table = hostile_table(cases, results)
    print(f"\nhostile suite ({place}):\n{table}")
    report = os.environ.get("FDSPEC_HOSTILE_REPORT")
    if report:
        with open(f"{report}.{place}.md", "w") as f:
            f.write(table + "\n")
        with open(f"{report}.{place}.jsonl", "w") as f:
            for c in cases:
                f.write(
                    json.dumps(
                        dict(
                            id=c.id,
                            family=c.family,
                            outcome=results[c.id][0],
                            detail=results[c.id][1],
                        )
                    )
                    + "\n"
                )
    bad = [(c.id, *results[c.id]) for c in cases if results[c.id][0] not in PASS]
    assert not bad, f"{len(bad)} of {len(cases)} hostile cases failed:\n" + "\n".join(
        f"  {cid}: {outcome}: {detail[:300]}" for cid, outcome, detail in bad[:60]
    )


def test_hostile_runner_reports_crash_and_hang():
    # The classification itself: a case that kills its process is a crash, one that never returns a
    # hang, and the cases after them still run (in a fresh child).
    results = _run_children(
        "cpu",
        ["selftest/crash", "selftest/hang", "selftest/after"],
        case_timeout_s=3.0,
        env={"FDSPEC_HOSTILE_SELFTEST": "1"},
    )
    assert results["selftest/crash"][0] == "crash", results
    assert results["selftest/hang"][0] == "hang", results
    assert results["selftest/after"][0] == "correct result"
