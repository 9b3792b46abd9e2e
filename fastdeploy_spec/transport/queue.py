"""The System V message queues of the logprob transport (docs/contract/transport.md), seen from Python.

The ops name a queue by ``INFERENCE_MSG_QUEUE_ID`` (default 1). These helpers call into the op
library (ctypes), so they derive the queue key exactly as the ops do: tools and tests use them to
inspect and remove queues, and a runner to reserve a queue id of its own.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator

import numpy as np

from fastdeploy_spec.transport.layout import _lib

QUEUE_ID_ENV = "INFERENCE_MSG_QUEUE_ID"

# ftok() keeps the low 8 bits of a queue id (msg_queue.cc): 1 .. 255 name distinct queues, 1 is the
# default one that a server on this machine would use.
_QUEUE_IDS = range(2, 256)
_LOCK_DIR = Path(tempfile.gettempdir())
_reserved: Dict[int, int] = {}  # queue id -> descriptor of its locked lock file


def _queue_id(queue_id: int | None) -> int:
    if queue_id is not None:
        return int(queue_id)
    out = ctypes.c_int64()
    _check(
        _lib().fdspec_msg_queue_id_from_env(ctypes.byref(out)),
        f"{QUEUE_ID_ENV} = {os.environ.get(QUEUE_ID_ENV)!r}",
    )
    return int(out.value)


def _check(rc: int, what: str) -> bool:
    if rc < 0:
        raise OSError(-rc, f"{what}: {os.strerror(-rc)}")
    return rc == 0


@dataclass(frozen=True)
class QueueStats:
    messages: int  # SysV messages queued (fragments count one each)
    bytes: int  # bytes queued
    capacity: int  # the queue's msg_qbytes


def queue_stats(queue_id: int | None = None) -> QueueStats | None:
    """Occupancy of the queue (``None`` when it does not exist). Default: ``$INFERENCE_MSG_QUEUE_ID``."""
    out = (ctypes.c_int64 * 3)()
    qid = _queue_id(queue_id)
    if not _check(_lib().fdspec_msg_queue_stat(qid, out), f"stat of message queue {qid}"):
        return None
    return QueueStats(*[int(v) for v in out])


def remove_queue(queue_id: int | None = None) -> bool:
    """Removes the queue (IPC_RMID); False when it did not exist. Default: ``$INFERENCE_MSG_QUEUE_ID``."""
    qid = _queue_id(queue_id)
    rc = _lib().fdspec_msg_queue_remove(qid)
    if rc == -errno.EINVAL:  # removed by someone else between lookup and removal
        return False
    return _check(rc, f"removal of message queue {qid}")


def last_send_stats() -> tuple[int, int]:
    """(bytes, fragments) of the last message this process sent: SysV text bytes, headers included."""
    out = (ctypes.c_int64 * 2)()
    _lib().fdspec_msg_queue_last_send(out)
    return int(out[0]), int(out[1])


def lock_path(queue_id: int) -> Path:
    """The lock file whose ``flock`` reserves ``queue_id`` (see :func:`free_queue_id`)."""
    return _LOCK_DIR / f"fastdeploy_spec_msg_queue_{int(queue_id)}.lock"


def free_queue_id(seed: int | None = None) -> int:
    """A queue id (2 .. 255) reserved for this process, tried in an order seeded by the pid.

    The id's queue does not exist now, and no other process that reserves ids here holds it: the
    queue itself is only created by the first send or receive, so "does not exist" alone would let
    two processes (parallel test workers, two runners) pick the same id in between and read each
    other's messages. The reservation is an exclusive ``flock`` on a lock file per id, held until
    :func:`release_queue_id` (``LogprobReceiver.close`` calls it) or the end of the process.
    """
    order = np.random.default_rng(os.getpid() if seed is None else seed).permutation(
        list(_QUEUE_IDS)
    )
    for qid in order.tolist():
        if qid in _reserved:
            continue
        fd = os.open(lock_path(qid), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if queue_stats(qid) is None:
            _reserved[qid] = fd
            return qid
        os.close(fd)  # in use by a process that does not reserve ids (a server's queue)
    raise RuntimeError("every message queue id 2 .. 255 is in use or reserved (ipcs -q lists them)")


def release_queue_id(queue_id: int) -> None:
    """Ends this process's reservation of ``queue_id`` (from :func:`free_queue_id`); no-op if none."""
    fd = _reserved.pop(int(queue_id), None)
    if fd is not None:
        os.close(fd)  # closing the only descriptor releases the flock


@contextmanager
def private_queue() -> Iterator[int]:
    """A queue id of this process's own (:func:`free_queue_id`) for the ops' ``queue_id`` keyword;
    on exit the queue is removed, with any message left in it, and the id released.

    Examples
    --------
    >>> from fastdeploy_spec.transport import private_queue, queue_stats
    >>> with private_queue() as qid:
    ...     2 <= qid <= 255
    True
    >>> queue_stats(qid) is None
    True
    """
    qid = free_queue_id()
    try:
        yield qid
    finally:
        try:
            remove_queue(qid)
        finally:
            release_queue_id(qid)


@contextmanager
def queue_env(queue_id: int) -> Iterator[None]:
    """Names ``queue_id`` in ``INFERENCE_MSG_QUEUE_ID`` for the ops called inside, then restores it."""
    old = os.environ.get(QUEUE_ID_ENV)
    os.environ[QUEUE_ID_ENV] = str(queue_id)
    try:
        yield
    finally:
        if old is None:
            del os.environ[QUEUE_ID_ENV]
        else:
            os.environ[QUEUE_ID_ENV] = old
