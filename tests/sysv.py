"""Raw System V message queues (libc through ctypes), for the transport tests and the msgqueue benchmark:
what the ops do not expose (hand-made fragments, upstream's fixed-size message) and the kernel limits."""

from __future__ import annotations

import ctypes
from functools import lru_cache
from pathlib import Path

MSGMAX = Path("/proc/sys/kernel/msgmax")  # largest message the kernel accepts
MSGMNB = Path("/proc/sys/kernel/msgmnb")  # default capacity of a queue, in bytes
IPC_CREAT, IPC_NOWAIT = 0o1000, 0o4000


@lru_cache(maxsize=1)
def libc() -> ctypes.CDLL:
    """libc with the prototypes of ftok, msgget, msgsnd and msgrcv (errno kept)."""
    lib = ctypes.CDLL(None, use_errno=True)
    lib.ftok.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.msgget.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.msgsnd.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    lib.msgrcv.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_long,
        ctypes.c_int,
    ]
    lib.msgrcv.restype = ctypes.c_ssize_t
    return lib


def raw_queue(queue_id: int) -> int:
    """The msqid of the queue that the ops name ``queue_id`` (ftok of /dev/shm, as msg_queue.cc), created
    if absent."""
    lib = libc()
    return lib.msgget(lib.ftok(b"/dev/shm", queue_id), IPC_CREAT | 0o666)
