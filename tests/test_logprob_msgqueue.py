"""Logprob message transport (docs/contract/transport.md): speculate_save_output_topk,
mtp_save_first_token_with_topk, speculate_get_output_topk, and the Python parser.

Round trips run a real sender process and a real receiver process (multiprocessing spawn) through
the kernel's message queue, with this machine's limits (msgmax 8192 by default: large messages go as
fragments) and, when the test may raise them (root), with raised limits. Every test gets its own
queue (INFERENCE_MSG_QUEUE_ID) and removes it at the end.

Paddle raises a failed PD_CHECK as OSError on 3.x and as other types on 2.6, so bad calls are
matched on the message with pytest.raises(Exception, match=...).
"""

from __future__ import annotations

import fcntl
import multiprocessing as mp
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import paddle
import pytest

from fastdeploy_spec import ops, transport
from fastdeploy_spec.transport import (
    child_env,
    free_queue_id,
    lock_path,
    parse_logprob_output,
    release_queue_id,
)
from tests.helpers import (
    MSG_ID,
    PLACES,
    assert_buffers_equal,
    fragments,
    payload_of,
    raw_send,
    to_place,
)
from tests.reference import logprob_msg as ref
from tests.sysv import MSGMAX, MSGMNB

FLAGS = [0, 1, 3, 4, 127, 128, 254, 255]


# ---- Fixtures -------------------------------------------------------------------------------------


def _can_write(path: Path) -> bool:
    return os.geteuid() == 0 and os.access(path, os.W_OK)


@pytest.fixture
def kernel_limits():
    """Sets kernel.msgmax / kernel.msgmnb for the test (root only) and restores them afterwards."""
    if not (_can_write(MSGMAX) and _can_write(MSGMNB)):
        pytest.skip("changing kernel.msgmax / kernel.msgmnb needs root and a writable /proc/sys")
    saved = MSGMAX.read_text(), MSGMNB.read_text()

    def set_limits(msgmax: int, msgmnb: int | None = None) -> None:
        MSGMAX.write_text(str(msgmax))
        if msgmnb is not None:
            MSGMNB.write_text(str(msgmnb))

    yield set_limits
    MSGMAX.write_text(saved[0])
    MSGMNB.write_text(saved[1])


def receive(bufs, wait: bool = False):
    ops.speculate_get_output_topk(*bufs, 20, 0, wait)
    return dict(
        tokens=bufs[0].numpy().reshape(-1),
        scores=bufs[1].numpy().reshape(-1),
        ranks=bufs[2].numpy(),
    )


def small_step(**kw):
    kw.setdefault("batch", 3)
    kw.setdefault("columns", 4)
    return ref.make_step(np.random.default_rng(kw.pop("seed", 0)), **kw)


# ---- Round trips between processes ------------------------------------------------------------------


def round_trip_steps() -> list:
    rng = np.random.default_rng(2024)
    steps = [
        ref.make_step(rng, batch=512, columns=21, full=True, flag=3),  # the largest message
        ref.make_step(rng, batch=2, columns=1, flag=4),  # small after large: no stale cell may show
    ]
    for m in range(
        1, 22
    ):  # every column count, flags cycling through 0 .. 255, stop flag both ways
        steps.append(
            ref.make_step(
                rng,
                batch=int(rng.integers(1, 40)),
                columns=m,
                flag=FLAGS[m % len(FLAGS)],
                not_need_stop=m % 5 != 0,
            )
        )
    steps += [
        ref.make_step(rng, mode="mtp", batch=33, columns=6, flag=4, preempt_frac=0.3),
        ref.make_step(
            rng, batch=40, columns=6, flag=3, preempt_frac=0.3
        ),  # with last_preempted_idx
        ref.make_step(rng, mode="mtp", batch=512, columns=21, flag=4, full=True),
        ref.make_step(rng, batch=300, columns=11, flag=255, prefill_frac=0.5, not_need_stop=False),
    ]
    return steps


def run_processes(
    steps,
    *,
    receiver_delay_s: float = 0.0,
    wait_flag: bool = False,
    sender_done_before_receiver: bool = False,
) -> list:
    """Runs a sender process over `steps` and a receiver process; returns the received buffers."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    env = {
        "INFERENCE_MSG_QUEUE_ID": os.environ["INFERENCE_MSG_QUEUE_ID"],
        "INFERENCE_MSG_ID": str(MSG_ID),
    }
    sender = ctx.Process(target=ref.sender_main, args=(steps, env, results))
    receiver = ctx.Process(
        target=ref.receiver_main, args=(len(steps), env, results, wait_flag, 25.0)
    )
    sender.start()
    try:
        if sender_done_before_receiver:
            sender.join(20)
            assert sender.exitcode == 0, "the sender did not finish on its own"
        time.sleep(receiver_delay_s)
        receiver.start()
        received, sent, done = [], None, False
        while sent is None or not done:
            kind, value = results.get(timeout=30)
            assert kind != "error", value
            if kind == "msg":
                received.append(value)
            elif kind == "sent":
                sent = value
            else:
                done = True
        return received
    finally:
        for p in (sender, receiver):
            if p.pid is not None:
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join()


def check_round_trip(steps, received) -> None:
    assert len(received) == len(steps)
    state = ref.fresh_buffers()
    for n, (step, got) in enumerate(zip(steps, received)):
        state = ref.apply_message(state, step, MSG_ID)
        assert_buffers_equal(got, state, f"message {n}")


@pytest.mark.parametrize("limits", ["default", "raised"])
def test_round_trip_every_field(queue_id, limits, request):
    if limits == "raised":  # the largest message fits one SysV message
        request.getfixturevalue("kernel_limits")(1 << 20, 4 << 20)
    steps = round_trip_steps()
    check_round_trip(steps, run_processes(steps))


def test_receiver_started_late_loses_nothing(queue_id):
    rng = np.random.default_rng(7)
    # Small messages: all of them sit in the kernel queue, the sender has exited before the receiver
    # starts; blocking receive is safe (they are there).
    steps = [ref.make_step(rng, batch=4, columns=3, flag=3) for _ in range(6)]
    check_round_trip(steps, run_processes(steps, sender_done_before_receiver=True, wait_flag=True))


def test_receiver_started_late_with_fragmented_messages(queue_id):
    rng = np.random.default_rng(8)
    # Larger than the queue: the sender blocks until the receiver drains it; nothing is lost.
    steps = [ref.make_step(rng, batch=200, columns=21, flag=3, full=True) for _ in range(3)]
    steps.append(ref.make_step(rng, batch=1, columns=2, flag=4))
    check_round_trip(steps, run_processes(steps, receiver_delay_s=0.5))


# ---- In one process (messages that fit the queue) ---------------------------------------------------


def test_queue_ids_are_reserved_across_processes():
    # A reservation, not only a queue that does not exist yet: parallel test workers (or runners) that
    # picked the same id before either created the queue would read each other's messages.
    mine, other = free_queue_id(seed=7), free_queue_id(seed=7)
    try:
        assert other != mine  # the same order: the next free id
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                "from fastdeploy_spec.transport import free_queue_id; print(free_queue_id(seed=7))",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env=child_env(),
        )
        assert int(child.stdout.split()[-1]) not in (mine, other)
    finally:
        release_queue_id(mine)
        release_queue_id(other)
    for qid in (mine, other):  # released: the lock can be taken again
        fd = os.open(lock_path(qid), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)


def test_nonblocking_receive_on_empty_queue(queue_id):
    bufs = ref.receive_tensors()
    got = receive(bufs)
    want = ref.fresh_buffers()
    want["tokens"][:3] = [-2, 0, 0]
    assert_buffers_equal(got, want, "empty queue")
    assert transport.queue_stats(queue_id).messages == 0  # created by the receive


@pytest.mark.parametrize("mode", ["save", "mtp"])
@pytest.mark.parametrize("batch", [1, 2, 7, 11])
@pytest.mark.parametrize("columns", [1, 6, 21])
def test_message_in_process(queue_id, mode, batch, columns):
    step = small_step(mode=mode, batch=batch, columns=columns, seed=batch * 100 + columns)
    if (
        ref.wire_bytes(step) > 15000
    ):  # must fit the default queue (msgmnb 16384): no receiver runs yet
        pytest.skip("message larger than the default queue capacity; covered by the round trips")
    ref.send_step(step)
    bufs = ref.receive_tensors()
    assert_buffers_equal(receive(bufs), ref.apply_message(ref.fresh_buffers(), step), mode)
    assert transport.last_send_stats()[0] >= ref.wire_bytes(step)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("mode", ["save", "mtp"])
@pytest.mark.parametrize(
    "stop_flag_on_host", [False, True], ids=["all-on-place", "not_need_stop-on-cpu"]
)
def test_inputs_on_any_place(queue_id, place, mode, stop_flag_on_host):
    # FastDeploy keeps not_need_stop on the host while the step's tensors are on the GPU: each input
    # is read from wherever it is.
    step = small_step(mode=mode, batch=9, columns=5, seed=13, flag=4 if mode == "mtp" else 3)
    tensors = [
        to_place(step[k], "cpu" if (k == "not_need_stop" and stop_flag_on_host) else place)
        for k in ref.input_names(step)
    ]
    op = ops.speculate_save_output_topk if mode == "save" else ops.mtp_save_first_token_with_topk
    op(*tensors, step["flag"], 0, False)
    assert_buffers_equal(
        receive(ref.receive_tensors()), ref.apply_message(ref.fresh_buffers(), step), place
    )


@pytest.mark.gpu
def test_receive_buffers_must_be_on_the_host(queue_id):
    tokens, scores, ranks = ref.receive_tensors()
    with pytest.raises(Exception, match="output_tokens must be a CPU tensor"):
        ops.speculate_get_output_topk(to_place(tokens.numpy(), "gpu"), scores, ranks, 20, 0, False)


def test_mtp_first_token_semantics(queue_id):
    b, m = 6, 3
    step = small_step(mode="mtp", batch=b, columns=m, flag=4)
    step["token_num_per_batch"] = np.array([2, 0, 3, 1, 5, 4], np.int32)
    step["preempted_idx"] = np.array([0, 0, 0, 1, 0, 0], np.int32)
    step["seq_lens_decoder"] = np.array([10, 10, 10, 10, 10, 3], np.int32)
    step["prompt_lens"] = np.full((b, 1), 5, np.int64)  # slot 5: chunked prefill
    ref.send_step(step)
    msg = parse_logprob_output(*fresh_tensors_after_receive())
    assert [s.count for s in msg.slots] == [3, 0, 4, -9, 6, 0]
    assert msg.slots[3].preempted and msg.slots[3].token_ids == []
    s0 = msg.slots[0]
    assert s0.token_ids == step["sampled_token_ids"][0, :3].tolist()
    o = step["cu_batch_token_offset"][0]
    assert (
        s0.topk_token_ids[0]
        == [int(step["sampled_token_ids"][0, 0])] + step["logprob_token_ids"][o, 1:].tolist()
    )
    assert s0.topk_logprobs[0] == step["logprob_scores"][o].tolist()
    assert s0.ranks[0] == step["logprob_ranks"][o]
    # draft tokens: their id only, the rest filler
    assert s0.topk_token_ids[1:] == [[int(t), -1, -1] for t in step["sampled_token_ids"][0, 1:3]]
    assert s0.topk_logprobs[1:] == [[0.0] * m] * 2 and s0.ranks[1:] == [0, 0]
    assert msg.kind == "draft"


def test_save_op_upstream_forms(queue_id):
    """FastDeploy's current call passes its last_preempted_idx buffer as the op's preempted_idx, after
    prompt_lens (a preempted slot reports -9 and no token); the call before it did not. Both forms,
    positional and keyword (upstream's input name, and the buffer's name as an alias)."""
    step = small_step(mode="save", batch=4, columns=3, flag=3, prefill_frac=0.0)
    t = [paddle.to_tensor(step[k], place=paddle.CPUPlace()) for k in ref.input_names(step)]
    preempted = np.array([0, 1, 0, 0], np.int32)
    ops.speculate_save_output_topk(*t, 3, 0, False)
    old = parse_logprob_output(*fresh_tensors_after_receive())
    ops.speculate_save_output_topk(*t, paddle.to_tensor(preempted.reshape(4, 1)), 3, 0, False)
    new = parse_logprob_output(*fresh_tensors_after_receive())
    ops.speculate_save_output_topk(
        *t, last_preempted_idx=paddle.to_tensor(preempted), message_flag=3, rank_id=0
    )
    kw = parse_logprob_output(*fresh_tensors_after_receive())
    ops.speculate_save_output_topk(
        *t, preempted_idx=paddle.to_tensor(preempted), message_flag=3, rank_id=0
    )
    kw_upstream = parse_logprob_output(*fresh_tensors_after_receive())
    assert [s.count for s in kw_upstream.slots] == [s.count for s in kw.slots]
    counts = step["token_num_per_batch"].tolist()
    assert [s.count for s in old.slots] == counts
    assert (
        [s.count for s in new.slots] == [counts[0], -9] + counts[2:] == [s.count for s in kw.slots]
    )
    assert new.slots[1].preempted and new.slots[1].token_ids == []
    assert new.slots[2].token_ids == old.slots[2].token_ids
    with pytest.raises(TypeError, match="missing rank_id"):
        ops.speculate_save_output_topk(*t, 3)
    with pytest.raises(TypeError, match="preempted_idx given twice"):
        ops.speculate_save_output_topk(
            *t, paddle.to_tensor(preempted), 3, 0, preempted_idx=paddle.to_tensor(preempted)
        )
    with pytest.raises(
        TypeError, match=r"preempted_idx given twice \(also as last_preempted_idx\)"
    ):
        ops.speculate_save_output_topk(
            *t,
            preempted_idx=paddle.to_tensor(preempted),
            message_flag=3,
            rank_id=0,
            last_preempted_idx=paddle.to_tensor(preempted),
        )


def test_queue_id_keyword_names_a_private_queue(queue_id):
    """queue_id= sends to and reads from that queue, whatever INFERENCE_MSG_QUEUE_ID says."""
    from fastdeploy_spec.transport import private_queue

    step = small_step(mode="mtp", batch=3, columns=2, flag=4)
    with private_queue() as mine:
        assert mine != queue_id
        t = [paddle.to_tensor(step[k], place=paddle.CPUPlace()) for k in ref.input_names(step)]
        ops.mtp_save_first_token_with_topk(*t, 4, 0, False, queue_id=mine)
        assert (
            transport.queue_stats(queue_id) is None or transport.queue_stats(queue_id).messages == 0
        )
        assert transport.queue_stats(mine).messages == 1
        bufs = ref.receive_tensors()
        ops.speculate_get_output_topk(*bufs, 20, 0, False, queue_id=mine)
        got = dict(
            tokens=bufs[0].numpy().reshape(-1),
            scores=bufs[1].numpy().reshape(-1),
            ranks=bufs[2].numpy(),
        )
        assert_buffers_equal(got, ref.apply_message(ref.fresh_buffers(), step), "private queue")
    assert transport.queue_stats(mine) is None  # removed on exit
    with pytest.raises(ValueError, match="queue_id must be >= 0"):
        ops.speculate_get_output_topk(*ref.receive_tensors(), 20, 0, False, queue_id=-3)


def fresh_tensors_after_receive():
    bufs = ref.receive_tensors()
    ops.speculate_get_output_topk(*bufs, 20, 0, False)
    return bufs


def test_parser_mirrors_the_token_processor(queue_id, monkeypatch):
    monkeypatch.setenv("INFERENCE_MSG_ID", "9")
    step = small_step(batch=5, columns=4, flag=3, not_need_stop=False)
    step["seq_lens_decoder"][1] = 0  # chunked prefill: count 0
    ref.send_step(step)
    bufs = fresh_tensors_after_receive()
    msg = parse_logprob_output(*bufs)
    counts, rows = ref.expected_rows(step)
    assert (
        msg.stop_flag,
        msg.not_need_stop,
        msg.message_flag,
        msg.topk_columns,
        msg.batch,
        msg.kind,
    ) == (-9, False, 3, 4, 5, "target")
    assert [s.count for s in msg.slots] == counts and counts[1] == 0
    for slot, want in zip(msg.slots, rows):
        assert slot.topk_token_ids == [r[0] for r in want]
        assert slot.topk_logprobs == [r[1].tolist() for r in want]
        assert slot.token_ids == [r[0][0] for r in want]
        assert slot.logprobs == [float(r[1][0]) for r in want]
        assert slot.ranks == [r[2] for r in want]
    # The upstream reading of the same buffers: reshape to [batch, 6, 21], keep [:, :, :M].
    tokens = bufs[0].numpy().reshape(-1)
    upstream = tokens[515 : 515 + 5 * 126].reshape(5, 6, 21)[:, :, :4]
    assert all(upstream[i][: counts[i], 0].tolist() == msg.slots[i].token_ids for i in range(5))
    assert parse_logprob_output(*fresh_tensors_after_receive()) is None  # queue empty now


def test_small_message_after_large_shows_no_stale_data(queue_id):
    large = small_step(batch=12, columns=21, full=True, seed=1)  # two fragments at msgmax 8192
    small = small_step(batch=3, columns=2, seed=2)
    assert ref.wire_bytes(large) + ref.wire_bytes(small) < 15000
    ref.send_step(large)
    ref.send_step(small)
    bufs = ref.receive_tensors()
    receive(bufs)
    got = receive(bufs)
    want = ref.apply_message(ref.apply_message(ref.fresh_buffers(), large), small)
    assert_buffers_equal(got, want, "small after large")
    # inside the small message's slots nothing of the large one is left
    block = got["tokens"][515 : 515 + 3 * 126].reshape(3, 6, 21)
    assert (block[:, :, 2:] == -1).all()


def test_message_size_grows_with_content(queue_id):
    sizes = []
    for batch, columns in [(1, 1), (8, 1), (8, 6), (8, 21), (12, 21)]:
        step = small_step(batch=batch, columns=columns, full=True, seed=batch)
        ref.send_step(step)
        nbytes, fragments = transport.last_send_stats()
        assert nbytes == ref.wire_bytes(step) + 24 * fragments  # payload + one header per fragment
        sizes.append(nbytes)
        receive(ref.receive_tensors())
    assert sizes == sorted(sizes) and sizes[0] < 200 and sizes[-1] > 8192  # upstream: 530 KB each


def test_fragmented_message_in_process(queue_id):
    step = small_step(
        batch=12, columns=21, full=True, seed=3
    )  # 12.4 KB: two fragments at msgmax 8192
    assert 8192 < ref.wire_bytes(step) < 15000
    ref.send_step(step)
    if int(MSGMAX.read_text()) <= 8192:
        assert transport.last_send_stats()[1] == 2
    assert_buffers_equal(
        receive(ref.receive_tensors()), ref.apply_message(ref.fresh_buffers(), step), "fragments"
    )


def test_rank_filter_and_empty_batch(queue_id):
    step = small_step()
    ref.send_step(step, rank_id=1)
    assert transport.queue_stats(queue_id) is None  # nothing sent: the queue was not even created
    empty = dict(
        step,
        token_num_per_batch=np.zeros(0, np.int32),
        cu_batch_token_offset=np.zeros(1, np.int32),
        seq_lens_decoder=np.zeros(0, np.int32),
        prompt_lens=np.zeros((0, 1), np.int64),
    )
    ref.send_step(empty)  # B = 0: a no-op
    assert transport.queue_stats(queue_id) is None
    ref.send_step(step, rank_id=1, save_each_rank=True)
    assert transport.queue_stats(queue_id).messages == 1


def test_stop_flag_from_environment(queue_id, monkeypatch):
    for msg_id, nns in [("1", True), ("7", True), ("7", False), ("", False)]:
        monkeypatch.setenv("INFERENCE_MSG_ID", msg_id)
        ref.send_step(small_step(not_need_stop=nns))
        want = int(msg_id or 1) * (1 if nns else -1)
        assert receive(ref.receive_tensors())["tokens"][0] == want


@pytest.mark.parametrize("value", ["2", "-1", "0", "abc"])
def test_bad_inference_msg_id(queue_id, monkeypatch, value):
    monkeypatch.setenv("INFERENCE_MSG_ID", value)
    with pytest.raises(Exception, match="INFERENCE_MSG_ID"):
        ref.send_step(small_step())


def test_bad_queue_id(queue_id, monkeypatch):
    monkeypatch.setenv("INFERENCE_MSG_QUEUE_ID", "12x")
    with pytest.raises(Exception, match="INFERENCE_MSG_QUEUE_ID = '12x' is not an integer"):
        ref.send_step(small_step())
    with pytest.raises(Exception, match="INFERENCE_MSG_QUEUE_ID"):
        receive(ref.receive_tensors())


def _bad(step, **changes):
    step = dict(step)
    step.update(changes)
    return step


BAD_INPUTS = [
    ("flag 256", lambda s: _bad(s, flag=256), "message_flag 256 must be in \\[0, 255\\]"),
    ("flag -1", lambda s: _bad(s, flag=-1), "message_flag -1 must be in \\[0, 255\\]"),
    (
        "22 columns",
        lambda s: _bad(
            s,
            logprob_token_ids=np.zeros((20, 22), np.int64),
            logprob_scores=np.zeros((20, 22), np.float32),
        ),
        "22 columns",
    ),
    (
        "scores shape",
        lambda s: _bad(s, logprob_scores=s["logprob_scores"][:, :2].copy()),
        "logprob_scores must have the shape",
    ),
    (
        "ranks dtype",
        lambda s: _bad(s, logprob_ranks=s["logprob_ranks"].astype(np.int32)),
        "logprob_ranks must be int64",
    ),
    (
        "7 tokens",
        lambda s: _bad(s, token_num_per_batch=np.array([7, 0, 0], np.int32)),
        "slot 0 has 7 tokens .* at most MAX_DRAFT_TOKENS = 6",
    ),
    (
        "offset out of range",
        lambda s: _bad(s, cu_batch_token_offset=np.array([0, 1, 1000, 0], np.int32)),
        "outside sampled_token_ids",
    ),
    (
        "short offsets",
        lambda s: _bad(s, cu_batch_token_offset=np.array([0, 1], np.int32)),
        "cu_batch_token_offset must hold at least B = 3",
    ),
    (
        "id beyond int32",
        lambda s: _bad(s, sampled_token_ids=np.full(20, 2**31, np.int64)),
        "does not fit int32",
    ),
]


@pytest.mark.parametrize("name,change,match", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_rejected_inputs(queue_id, name, change, match):
    step = small_step(batch=3, columns=4, full=True)
    step["logprob_token_ids"] = np.zeros((20, 4), np.int64)
    step["logprob_scores"] = np.zeros((20, 4), np.float32)
    step["logprob_ranks"] = np.zeros(20, np.int64)
    step["sampled_token_ids"] = np.zeros(20, np.int64)
    with pytest.raises(Exception, match=match):
        ref.send_step(change(step))
    stats = transport.queue_stats(queue_id)
    assert stats is None or stats.messages == 0  # nothing half-sent


def test_batch_over_512_rejected(queue_id):
    step = small_step(batch=513, columns=1)
    with pytest.raises(Exception, match="513 slots; a message holds at most MAX_BSZ = 512"):
        ref.send_step(step)
    mtp = small_step(mode="mtp", batch=513, columns=1)
    with pytest.raises(Exception, match="MAX_BSZ = 512"):
        ref.send_step(mtp)


def test_receive_buffer_checks(queue_id):
    tokens, scores, ranks = ref.receive_tensors()
    with pytest.raises(Exception, match="output_tokens must hold at least 65027 values"):
        ops.speculate_get_output_topk(
            paddle.to_tensor(np.zeros(100, np.int64)), scores, ranks, 20, 0, False
        )
    with pytest.raises(Exception, match="output_scores must be float32"):
        ops.speculate_get_output_topk(
            tokens, paddle.to_tensor(np.zeros(64512, np.float64)), ranks, 20, 0, False
        )
    with pytest.raises(Exception, match="real_k 21 must be in \\[0, K = 20\\]"):
        ops.speculate_get_output_topk(tokens, scores, ranks, 21, 0, False)


# ---- Transport robustness (hand-made fragments) -------------------------------------------------------


def test_incomplete_message_then_a_new_one(queue_id):
    step_a, step_b = small_step(seed=1), small_step(seed=2, batch=2)
    a, b = payload_of(step_a), payload_of(step_b)
    frags_a, frags_b = fragments(a, 10, 3), fragments(b, 11, 2)
    for text in [frags_a[0], frags_a[1], frags_b[0], frags_b[1]]:  # a's last fragment never comes
        raw_send(queue_id, 4242, text)
    bufs = ref.receive_tensors()
    with pytest.raises(
        Exception, match="dropped incomplete message 10 of sender pid 4242 \\(fragment 2 of 3"
    ):
        receive(bufs)
    assert bufs[0].numpy()[0, 0] == -2
    assert_buffers_equal(
        receive(bufs), ref.apply_message(ref.fresh_buffers(), step_b), "message after a loss"
    )


def test_orphan_fragments_are_dropped(queue_id):
    step = small_step(seed=3)
    payload = payload_of(step)
    orphans = fragments(payload, 20, 4)[1:]  # the first fragment was taken by someone else
    for text in orphans + fragments(payload, 21, 2):
        raw_send(queue_id, 4243, text)
    bufs = ref.receive_tensors()
    with pytest.raises(Exception, match="dropped fragment 1 of 4 of message 20 of sender pid 4243"):
        receive(bufs)
    # the other orphans of message 20 go silently; message 21 arrives whole
    assert_buffers_equal(
        receive(bufs), ref.apply_message(ref.fresh_buffers(), step), "after orphans"
    )
    assert transport.queue_stats(queue_id).messages == 0


def test_fragments_of_two_senders_do_not_mix(queue_id):
    step_a, step_b = small_step(seed=4), small_step(seed=5, batch=5)
    fa, fb = fragments(payload_of(step_a), 1, 3), fragments(payload_of(step_b), 1, 3)
    for x, y in zip(fa, fb):  # interleaved in the queue; same message ids, different senders
        raw_send(queue_id, 5001, x)
        raw_send(queue_id, 5002, y)
    bufs = ref.receive_tensors()
    state = ref.apply_message(ref.fresh_buffers(), step_a)
    assert_buffers_equal(receive(bufs), state, "sender 5001")
    assert_buffers_equal(receive(bufs), ref.apply_message(state, step_b), "sender 5002")


def test_sender_that_stops_mid_message_times_out(queue_id, monkeypatch):
    monkeypatch.setenv("FDSPEC_MSG_FRAGMENT_TIMEOUT_MS", "100")
    frags = fragments(payload_of(small_step(seed=6)), 30, 3)
    raw_send(queue_id, 4244, frags[0])
    start = time.monotonic()
    with pytest.raises(Exception, match="fragment 1 of 3 did not arrive within 100 ms"):
        receive(ref.receive_tensors(), wait=True)  # a blocking receive waits out the timeout
    assert time.monotonic() - start < 5


def test_foreign_and_malformed_messages(queue_id):
    raw_send(queue_id, 1, b"hello")
    with pytest.raises(Exception, match="not a fastdeploy_spec fragment"):
        receive(ref.receive_tensors())
    payload = bytearray(payload_of(small_step(seed=7)))
    payload[8:12] = struct.pack("<i", 3 | (22 << 8))  # flag word announcing 22 columns
    raw_send(queue_id, 4245, fragments(bytes(payload), 40, 1)[0])
    bufs = ref.receive_tensors()
    with pytest.raises(Exception, match="22 top-k columns"):
        receive(bufs)
    want = ref.fresh_buffers()
    want["tokens"][:3] = [-2, 0, 0]
    assert_buffers_equal(
        dict(
            tokens=bufs[0].numpy().reshape(-1),
            scores=bufs[1].numpy().reshape(-1),
            ranks=bufs[2].numpy(),
        ),
        want,
        "nothing written but 'no message'",
    )


# ---- Kernel limits ------------------------------------------------------------------------------------


def test_limits_too_small_name_the_sysctl(queue_id, kernel_limits):
    kernel_limits(16)
    with pytest.raises(Exception, match="kernel.msgmax = 16.*raise them"):
        ref.send_step(small_step())


def test_lowered_msgmax_is_noticed(queue_id, kernel_limits):
    kernel_limits(65536, 262144)
    step = small_step(batch=20, columns=21, full=True, seed=9)  # 20.7 KB
    ref.send_step(step)
    assert transport.last_send_stats()[1] == 1
    kernel_limits(8192)
    ref.send_step(step)  # the cached limit is refused (EINVAL): re-read, re-fragmented
    assert transport.last_send_stats()[1] == 3
    bufs = ref.receive_tensors()
    want = ref.apply_message(ref.fresh_buffers(), step)
    assert_buffers_equal(receive(bufs), want, "one fragment")
    assert_buffers_equal(receive(bufs), want, "three fragments")


def test_queue_helpers(queue_id):
    assert transport.queue_stats(queue_id) is None
    assert transport.remove_queue(queue_id) is False
    receive(ref.receive_tensors())  # creates it
    stats = transport.queue_stats(queue_id)
    assert stats.messages == 0 and stats.capacity == int(MSGMNB.read_text())
    assert transport.remove_queue(queue_id) is True
    assert transport.queue_stats() is None  # default: $INFERENCE_MSG_QUEUE_ID
