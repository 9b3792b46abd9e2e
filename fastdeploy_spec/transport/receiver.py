"""The token processor's end of the logprob transport, in a second process (as in a server).

A model runner sends one ``speculate_save_output_topk`` message per step to the System V queue named
by ``INFERENCE_MSG_QUEUE_ID``; the token processor, another process, reads them with
``speculate_get_output_topk`` and parses them (``fastdeploy_spec.transport.parser``).
``LogprobReceiver`` starts that process (``python -m fastdeploy_spec.transport.receiver``): it blocks
on the queue, parses each message and passes it back through a pipe, so that the runner's process
gets what arrived.

The receiver runs apart from the sender on purpose: a send blocks while the queue is full
(``kernel.msgmnb``, 16 KiB by default), so a receiver in the sending process could deadlock on a
large step. It is a plain subprocess, not a multiprocessing one, so that the caller's main module
needs no ``if __name__ == "__main__"`` guard.
"""

from __future__ import annotations

import os
import pickle
import queue as queue_mod
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from fastdeploy_spec.transport.layout import layout
from fastdeploy_spec.transport.parser import LogprobMessage, parse_logprob_output
from fastdeploy_spec.transport.queue import QUEUE_ID_ENV, release_queue_id, remove_queue

_EOF = object()


def child_env(**extra: str) -> Dict[str, str]:
    """The environment for a child Python process that imports this package, plus ``extra``.

    The directory holding the package goes first on ``PYTHONPATH``; the caller's entries are kept
    after it, since Paddle itself may live there (it does on the GPU machine).
    """
    env = dict(os.environ, **extra)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def receive_buffers():
    """The three receive buffers of ``speculate_get_output_topk`` (tokens int64 [3 + 512 + 512 * 126,
    1], scores float32 [512 * 126, 1], ranks int64 [512 * 6], sized from the op library's layout),
    zeroed, on the host (also under a GPU Paddle: the receive is a host op)."""
    import paddle

    lay = layout()
    cpu = paddle.CPUPlace()
    return (
        paddle.to_tensor(np.zeros((lay.tokens_len, 1), np.int64), place=cpu),
        paddle.to_tensor(np.zeros((lay.scores_len, 1), np.float32), place=cpu),
        paddle.to_tensor(np.zeros(lay.ranks_len, np.int64), place=cpu),
    )


def _receive_forever(out) -> None:
    """The child: blocking receive, parse, pickle to ``out``; until the parent ends it."""
    try:
        from fastdeploy_spec.ops import speculate_get_output_topk

        lay = layout()
        tokens, scores, ranks = receive_buffers()
        while True:
            speculate_get_output_topk(tokens, scores, ranks, lay.k, 0, True)
            message = parse_logprob_output(tokens, scores, ranks)
            if message is not None:
                pickle.dump(message, out)
                out.flush()
    except Exception as exc:  # reported to the parent, which raises it
        pickle.dump(f"{type(exc).__name__}: {exc}", out)
        out.flush()


class LogprobReceiver:
    """A child process that receives and parses the logprob messages of queue ``queue_id``.

    Parameters
    ----------
    queue_id : int
        The ``INFERENCE_MSG_QUEUE_ID`` the sender uses (e.g. ``free_queue_id()``).

    Examples
    --------
    One step's message (two tokens of slot 0, top-2 logprobs), sent on a reserved queue and received
    by the child; ``close`` removes the queue and releases the id:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_save_output_topk
    >>> from fastdeploy_spec.transport import LogprobReceiver, free_queue_id
    >>> t = paddle.to_tensor
    >>> receiver = LogprobReceiver(free_queue_id())
    >>> speculate_save_output_topk(
    ...     t(np.array([7, 8], np.int64)), t(np.array([[0, 5, 6], [0, 9, 7]], np.int64)),
    ...     t(np.array([[-0.5, -1.0, -2.0], [-0.1, -0.2, -3.0]], np.float32)),
    ...     t(np.array([1, 0], np.int64)), t(np.array([2], np.int32)), t(np.array([0, 2], np.int32)),
    ...     t(np.array([True])), t(np.array([4], np.int32)), t(np.array([[4]], np.int64)),
    ...     3, 0, queue_id=receiver.queue_id)
    >>> [msg] = receiver.take(count=1, timeout_s=60)
    >>> msg.kind, msg.slots[0].token_ids, msg.slots[0].topk_token_ids
    ('target', [7, 8], [[7, 5, 6], [8, 9, 7]])
    >>> receiver.close()
    """

    def __init__(self, queue_id: int) -> None:
        self.queue_id = int(queue_id)
        env = child_env(**{QUEUE_ID_ENV: str(self.queue_id)})
        self._stderr = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "fastdeploy_spec.transport.receiver"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        self._inbox: queue_mod.Queue[object] = queue_mod.Queue()
        self._reader = threading.Thread(
            target=self._read_pipe, name=f"logprob-receiver-{queue_id}", daemon=True
        )
        self._reader.start()

    def _read_pipe(self) -> None:
        try:
            while True:
                self._inbox.put(pickle.load(self._process.stdout))
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            self._inbox.put(_EOF)

    def _failure(self, what: str) -> RuntimeError:
        self._stderr.seek(0)
        tail = self._stderr.read()[-2000:].decode(errors="replace").strip()
        return RuntimeError(
            f"logprob receiver (queue {self.queue_id}): {what}" + (f"\n{tail}" if tail else "")
        )

    def take(self, count: int | None = None, timeout_s: float = 60.0) -> List[LogprobMessage]:
        """The messages received since the last call, in order; with ``count``, waits (up to
        ``timeout_s``) until that many have arrived and raises ``TimeoutError`` if they do not."""
        got: List[LogprobMessage] = []
        deadline = time.monotonic() + timeout_s
        while True:
            wait = count is not None and len(got) < count
            try:
                item = (
                    self._inbox.get(timeout=max(deadline - time.monotonic(), 1e-3))
                    if wait
                    else self._inbox.get_nowait()
                )
            except queue_mod.Empty:
                if wait:
                    raise TimeoutError(
                        f"logprob receiver (queue {self.queue_id}): {len(got)} of "
                        f"{count} messages arrived within {timeout_s:.0f} s"
                    ) from None
                return got
            if item is _EOF:
                self._inbox.put(_EOF)
                raise self._failure(f"exited with code {self._process.wait()}")
            if isinstance(item, str):
                raise self._failure(item)
            got.append(item)

    def close(self) -> None:
        """Ends the child (it waits in msgrcv: there is no cleaner way out), removes the queue and
        releases the id if this process reserved it (:func:`free_queue_id`)."""
        if self._process.poll() is None:
            self._process.terminate()
        self._process.wait(timeout=10)
        self._process.stdout.close()
        self._stderr.close()
        remove_queue(self.queue_id)
        release_queue_id(self.queue_id)


if __name__ == "__main__":
    # The pipe carries pickles only: whatever else writes to stdout (Paddle, C++ code) goes to stderr.
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _receive_forever(channel)
