"""IPC faults of the logprob transport (docs/contract/transport.md): peers that die or restart, a queue
removed while in use, a full queue, two ranks sending at once. The rule checked everywhere: no message is lost
or corrupted without an error, and nothing hangs (every wait has a timeout; every test removes its
queue).

Processes are spawned (multiprocessing) and run the bodies in tests/reference/logprob_msg.py or the
small ones below; messages are checked against the NumPy reference of the receive buffers.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest

from fastdeploy_spec import ops, transport
from tests.helpers import (
    MSG_ID,
    assert_buffers_equal,
    fragments,
    payload_of,
    raw_send,
    reserved_queue_id,
)
from tests.reference import logprob_msg as ref

CTX = mp.get_context("spawn")
BIG = dict(batch=60, columns=21, flag=3, full=True)  # ~62 KB: 8 fragments at msgmax 8192, > msgmnb


@pytest.fixture
def queue_id(monkeypatch):
    with reserved_queue_id() as qid:
        monkeypatch.setenv("INFERENCE_MSG_QUEUE_ID", str(qid))
        monkeypatch.setenv("INFERENCE_MSG_ID", str(MSG_ID))
        monkeypatch.setenv("FDSPEC_MSG_FRAGMENT_TIMEOUT_MS", "1500")
        yield qid


def env_of(qid: int) -> dict:
    return {
        "INFERENCE_MSG_QUEUE_ID": str(qid),
        "INFERENCE_MSG_ID": str(MSG_ID),
        "FDSPEC_MSG_FRAGMENT_TIMEOUT_MS": "1500",
    }


def as_dict(t) -> dict:
    return dict(
        tokens=t[0].numpy().reshape(-1).copy(),
        scores=t[1].numpy().reshape(-1).copy(),
        ranks=t[2].numpy().copy(),
    )


def receive_until(t, deadline_s: float, wait: bool = False):
    """Non-blocking receives until a message (its dict) or the deadline (None). Errors propagate."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        ops.speculate_get_output_topk(*t, 20, 0, wait)
        if t[0].numpy()[0, 0] != -2:
            return as_dict(t)
        time.sleep(0.002)
    return None


def receive_all(n: int, deadline_s: float = 30.0) -> tuple[list, list]:
    """Up to n messages (fresh buffers each), and the errors met on the way, within the deadline."""
    got, errors = [], []
    end = time.monotonic() + deadline_s
    while len(got) < n and time.monotonic() < end:
        t = ref.receive_tensors()
        try:
            msg = receive_until(t, end - time.monotonic())
        except Exception as e:  # a transport error: recorded, the stream goes on
            errors.append(str(e))
            continue
        if msg is not None:
            got.append(msg)
    return got, errors


def want_alone(step) -> dict:
    return ref.apply_message(ref.fresh_buffers(), step, MSG_ID)


def stop(p) -> None:
    if p.pid is not None:
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join()


# ---- process bodies ---------------------------------------------------------------------------------


def _sender(steps, env, results, rank_id=0, save_each_rank=False):
    os.environ.update(env)
    try:
        for step in steps:
            ref.send_step(step, rank_id, save_each_rank)
        results.put(("sent", len(steps)))
    except Exception as e:
        results.put(("error", repr(e)))


def _receiver_killed_mid_message(env, ready):
    """Waits for a message; takes its first fragment, then is killed (SIGKILL) before the rest."""
    os.environ.update(env)
    os.environ["FDSPEC_MSG_FRAGMENT_TIMEOUT_MS"] = "60000"
    import paddle  # noqa: F401

    t = ref.receive_tensors()
    ready.set()
    ops.speculate_get_output_topk(*t, 20, 0, True)  # blocks in reassembly; killed there


def _blocking_receiver(env, results):
    os.environ.update(env)
    try:
        t = ref.receive_tensors()
        ops.speculate_get_output_topk(*t, 20, 0, True)
        results.put(("msg", as_dict(t)))
    except Exception as e:
        results.put(("error", str(e)))


def steps_of(seed: int, n: int, **kw) -> list:
    rng = np.random.default_rng(seed)
    return [ref.make_step(rng, **kw) for _ in range(n)]


# ---- tests -------------------------------------------------------------------------------------------


def test_receiver_killed_mid_stream(queue_id):
    # A receiver dies (SIGKILL) holding the first fragment of a message; the rest reach the queue
    # afterwards. The next receiver reports the orphaned fragments with an error (never silently,
    # never as a corrupt message) and gets every later message whole.
    step = ref.make_step(np.random.default_rng(1), batch=3, columns=4, flag=3)
    frags = fragments(payload_of(step), 77, 3)
    later = steps_of(2, 3, batch=4, columns=5, flag=4)
    ready = CTX.Event()
    victim = CTX.Process(target=_receiver_killed_mid_message, args=(env_of(queue_id), ready))
    victim.start()
    try:
        assert ready.wait(60)
        raw_send(queue_id, 4300, frags[0])
        deadline = time.monotonic() + 30
        while transport.queue_stats(queue_id).messages and time.monotonic() < deadline:
            time.sleep(0.005)
        assert transport.queue_stats(queue_id).messages == 0  # the victim took fragment 0
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(10)
        for f in frags[1:]:
            raw_send(queue_id, 4300, f)
        for s in later:
            ref.send_step(s)
        got, errors = receive_all(len(later))
        assert (
            len(errors) == 1
            and (
                "dropped fragment 1 of 3 of message 77 of sender pid 4300: its first "
                "fragment was never received here"
            )
            in errors[0]
        )
        assert len(got) == len(later)
        for s, msg in zip(later, got):
            assert_buffers_equal(msg, want_alone(s), "message after the dead receiver")
    finally:
        stop(victim)


def test_sender_killed_mid_message_then_restarted(queue_id):
    # The sender dies after part of a big message (simulated: the rest never comes). The receiver
    # drops it with an error after the fragment timeout; a restarted sender's messages arrive whole.
    big = ref.make_step(np.random.default_rng(3), **BIG)
    results = CTX.Queue()
    sender = CTX.Process(target=_sender, args=([big], env_of(queue_id), results))
    sender.start()
    try:
        deadline = time.monotonic() + 30
        while (
            transport.queue_stats(queue_id) is None or transport.queue_stats(queue_id).messages == 0
        ) and time.monotonic() < deadline:
            time.sleep(0.002)
        os.kill(sender.pid, signal.SIGKILL)  # blocked on a full queue, mid-message
        sender.join(10)
        t = ref.receive_tensors()
        start = time.monotonic()
        with pytest.raises(Exception, match="did not arrive within 1500 ms.*stopped mid-message"):
            receive_until(t, 10)
        assert time.monotonic() - start < 8
        assert t[0].numpy()[0, 0] == -2  # nothing of the broken message was written
        restarted = CTX.Process(
            target=_sender, args=(steps_of(4, 2, batch=3, columns=4), env_of(queue_id), results)
        )
        restarted.start()
        assert results.get(timeout=30) == ("sent", 2)
        stop(restarted)
        got, errors = receive_all(2)
        assert errors == [] and len(got) == 2
        for step, msg in zip(steps_of(4, 2, batch=3, columns=4), got):
            assert_buffers_equal(msg, want_alone(step), "message of the restarted sender")
    finally:
        stop(sender)


def remove_under_blocked_peer(queue_id, target, args, ready, message: str) -> None:
    """Starts a peer process, waits until ``ready(stats)`` holds for the queue (then a little, so that
    the peer blocks in the kernel), removes the queue, and requires the peer's error to contain
    ``message`` (no hang)."""
    results = CTX.Queue()
    p = CTX.Process(target=target, args=args + (results,))
    p.start()
    try:
        deadline = time.monotonic() + 30
        while not ready(transport.queue_stats(queue_id)) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # let it block in msgrcv / msgsnd
        assert transport.remove_queue(queue_id)
        kind, value = results.get(timeout=30)
        assert kind == "error" and message in value
    finally:
        stop(p)


def test_queue_removed_while_receiver_waits(queue_id):
    # A blocking receiver whose queue is removed returns with an error naming it (no hang).
    remove_under_blocked_peer(
        queue_id,
        _blocking_receiver,
        (env_of(queue_id),),
        lambda stats: stats is not None,
        "was removed while waiting",
    )


def test_queue_removed_while_sender_blocks(queue_id):
    # A sender blocked on a full queue gets an error when the queue is removed, naming the cause.
    remove_under_blocked_peer(
        queue_id,
        _sender,
        (steps_of(5, 3, **BIG), env_of(queue_id)),
        lambda stats: stats is not None and stats.messages > 0,
        "removed",
    )


def test_queue_removed_between_messages(queue_id):
    # Removal between messages: the next send recreates the queue and the message arrives whole.
    step = ref.make_step(np.random.default_rng(6), batch=2, columns=3)
    ref.send_step(step)
    assert transport.remove_queue(queue_id)  # the queued message is lost with the queue: by design
    ref.send_step(step)
    got, errors = receive_all(1, deadline_s=5)
    assert errors == [] and len(got) == 1
    assert_buffers_equal(got[0], want_alone(step), "after removal")


@pytest.mark.parametrize("wait", [False, True], ids=["non-blocking", "blocking"])
def test_full_queue(queue_id, wait):
    # More than the queue holds: the sender blocks (never drops), the receiver drains, all arrive in
    # order; a non-blocking receiver sees "no message" only when the queue is really empty.
    steps = steps_of(7, 4, **BIG) + steps_of(8, 6, batch=3, columns=2, flag=4)
    results = CTX.Queue()
    sender = CTX.Process(target=_sender, args=(steps, env_of(queue_id), results))
    sender.start()
    try:
        deadline = time.monotonic() + 30
        while (
            transport.queue_stats(queue_id) is None
            or transport.queue_stats(queue_id).bytes < transport.queue_stats(queue_id).capacity // 2
        ) and time.monotonic() < deadline:
            time.sleep(0.01)
        stats = transport.queue_stats(queue_id)
        assert stats.bytes >= stats.capacity // 2  # really full-ish: the sender is blocked
        assert results.empty()
        got = []
        t = ref.receive_tensors()
        while len(got) < len(steps) and time.monotonic() < deadline:
            if wait:
                ops.speculate_get_output_topk(*t, 20, 0, True)
                got.append(as_dict(t))
            else:
                msg = receive_until(t, deadline - time.monotonic())
                if msg is not None:
                    got.append(msg)
        assert results.get(timeout=30) == ("sent", len(steps))
        state = ref.fresh_buffers()
        assert len(got) == len(steps)
        for n, (step, msg) in enumerate(zip(steps, got)):
            state = ref.apply_message(state, step, MSG_ID)
            assert_buffers_equal(msg, state, f"message {n}")
    finally:
        stop(sender)


def test_two_ranks_sending_at_once(queue_id):
    # Ranks 0 and 1 with save_each_rank send big (fragmented) messages at the same time into one
    # queue: fragments of the two never mix; each rank's messages arrive whole and in its order.
    # Rank 1 without save_each_rank sends nothing.
    steps = {0: steps_of(9, 3, **BIG), 1: steps_of(10, 3, **dict(BIG, flag=4))}
    results = CTX.Queue()
    senders = [
        CTX.Process(target=_sender, args=(steps[r], env_of(queue_id), results, r, True))
        for r in (0, 1)
    ]
    silent = CTX.Process(target=_sender, args=(steps[1], env_of(queue_id), results, 1, False))
    for p in senders + [silent]:
        p.start()
    try:
        got, errors = receive_all(6, deadline_s=60)
        assert errors == [] and len(got) == 6
        for _ in range(3):
            assert results.get(timeout=30) == ("sent", 3)
        expected = {id(s): want_alone(s) for r in (0, 1) for s in steps[r]}
        order = {0: [], 1: []}
        for msg in got:
            matches = [
                (r, i)
                for r in (0, 1)
                for i, s in enumerate(steps[r])
                if all(np.array_equal(msg[k][3:], expected[id(s)][k][3:]) for k in ("tokens",))
                and np.array_equal(
                    msg["scores"].view(np.int32), expected[id(s)]["scores"].view(np.int32)
                )
                and np.array_equal(msg["ranks"], expected[id(s)]["ranks"])
            ]
            assert len(matches) == 1, "a message that is no rank's step (fragments mixed?)"
            order[matches[0][0]].append(matches[0][1])
        assert order == {0: [0, 1, 2], 1: [0, 1, 2]}
        assert transport.queue_stats(queue_id).messages == 0  # nothing from the silent rank
    finally:
        for p in senders + [silent]:
            stop(p)


def test_nonblocking_receive_while_a_message_is_half_sent(queue_id):
    # wait_flag=False must not block on a message whose sender has not finished it: the sender (a real
    # process) fills the queue with the first fragments of an 8-fragment message and is stopped
    # (SIGSTOP) there. Non-blocking receives return "no message" (-2) at once, keeping the fragments
    # they took; once the sender goes on, the message arrives whole.
    (step,) = steps_of(31, 1, **BIG)
    results = CTX.Queue()
    p = CTX.Process(target=_sender, args=([step], env_of(queue_id), results))
    p.start()
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            stats = transport.queue_stats(queue_id)
            if stats is not None and stats.bytes + 8192 > stats.capacity:  # full: the sender blocks
                break
            time.sleep(0.005)
        else:
            pytest.fail("the sender never filled the queue")
        os.kill(p.pid, signal.SIGSTOP)
        t = ref.receive_tensors()
        slowest = 0.0
        for _ in range(20):
            start = time.monotonic()
            ops.speculate_get_output_topk(*t, 20, 0, False)
            slowest = max(slowest, time.monotonic() - start)
            assert t[0].numpy()[0, 0] == -2, (
                "a message arrived although its sender is stopped mid-message"
            )
        assert slowest < 0.2, f"a non-blocking receive took {slowest:.3f} s"
        os.kill(p.pid, signal.SIGCONT)
        msg = receive_until(t, 30)
        assert msg is not None, "the message never completed"
        assert_buffers_equal(msg, want_alone(step), "the half-sent message, completed")
        assert results.get(timeout=30) == ("sent", 1)
    finally:
        if p.is_alive():
            os.kill(p.pid, signal.SIGCONT)
        stop(p)
