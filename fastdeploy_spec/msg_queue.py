"""The System V message queues of the logprob transport (docs/contract/transport.md), seen from Python.

The ops name a queue by ``INFERENCE_MSG_QUEUE_ID`` (default 1). These helpers call into the op
library (ctypes), so they derive the queue key exactly as the ops do; tools and tests use them to
inspect and remove queues. The receive layout's constants are read from the same library.
"""

from __future__ import annotations

import ctypes
import errno
import os
from dataclasses import dataclass
from functools import lru_cache

from fastdeploy_spec.ops import _loader

QUEUE_ID_ENV = "INFERENCE_MSG_QUEUE_ID"


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    _loader.load()  # refuses a missing or stale library before ctypes opens it
    lib = ctypes.CDLL(str(_loader._LIB))
    int64_p = ctypes.POINTER(ctypes.c_int64)
    lib.fdspec_msg_queue_id_from_env.argtypes = [int64_p]
    lib.fdspec_msg_queue_remove.argtypes = [ctypes.c_int64]
    lib.fdspec_msg_queue_stat.argtypes = [ctypes.c_int64, int64_p]
    lib.fdspec_msg_queue_last_send.argtypes = [int64_p]
    lib.fdspec_logprob_layout.argtypes = [int64_p, ctypes.c_int]
    return lib


def _queue_id(queue_id: int | None) -> int:
    if queue_id is not None:
        return int(queue_id)
    out = ctypes.c_int64()
    _check(_lib().fdspec_msg_queue_id_from_env(ctypes.byref(out)),
           f"{QUEUE_ID_ENV} = {os.environ.get(QUEUE_ID_ENV)!r}")
    return int(out.value)


def _check(rc: int, what: str) -> bool:
    if rc < 0:
        raise OSError(-rc, f"{what}: {os.strerror(-rc)}")
    return rc == 0


@dataclass(frozen=True)
class Layout:
    """Limits and receive layout of the logprob messages (from ``logprob_msg.h``)."""

    max_bsz: int
    max_draft_tokens: int
    k: int
    tokens_offset: int
    no_message: int
    flag_target: int
    flag_draft: int
    preempted_count: int
    fill_token: int
    fill_rank: int
    flag_bits: int
    flag_mask: int
    columns_mask: int

    @property
    def columns(self) -> int:
        return self.k + 1

    @property
    def tokens_len(self) -> int:
        return self.tokens_offset + self.max_bsz * self.max_draft_tokens * self.columns

    @property
    def scores_len(self) -> int:
        return self.max_bsz * self.max_draft_tokens * self.columns

    @property
    def ranks_len(self) -> int:
        return self.max_bsz * self.max_draft_tokens


@lru_cache(maxsize=1)
def layout() -> Layout:
    """The layout constants, read once from the op library."""
    n = len(Layout.__dataclass_fields__)
    buf = (ctypes.c_int64 * n)()
    have = _lib().fdspec_logprob_layout(buf, n)
    if have != n:
        raise RuntimeError(f"the op library reports {have} layout values, this module expects {n}")
    return Layout(*[int(v) for v in buf])


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
