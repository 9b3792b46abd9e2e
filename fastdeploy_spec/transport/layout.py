"""The limits and receive layout of the logprob messages, read from the op library.

``custom_ops/logprob_msg/logprob_msg.h`` is their one definition; this module asks the loaded library
for them (ctypes), so Python never restates a number (docs/contract/transport.md).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

from fastdeploy_spec.ops import _loader


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    """The op library opened with ctypes, for its plain C entry points (layout and queue helpers)."""
    _loader.load()  # refuses a missing or stale library before ctypes opens it
    lib = ctypes.CDLL(str(_loader._LIB))
    int64_p = ctypes.POINTER(ctypes.c_int64)
    lib.fdspec_msg_queue_id_from_env.argtypes = [int64_p]
    lib.fdspec_msg_queue_remove.argtypes = [ctypes.c_int64]
    lib.fdspec_msg_queue_stat.argtypes = [ctypes.c_int64, int64_p]
    lib.fdspec_msg_queue_last_send.argtypes = [int64_p]
    lib.fdspec_logprob_layout.argtypes = [ctypes.POINTER(ctypes.c_char_p), int64_p, ctypes.c_int]
    return lib


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
    """The layout constants, read once from the op library, by name."""
    lib = _lib()
    n = lib.fdspec_logprob_layout(None, None, 0)
    names, values = (ctypes.c_char_p * n)(), (ctypes.c_int64 * n)()
    lib.fdspec_logprob_layout(names, values, n)
    entries = {name.decode(): int(value) for name, value in zip(names, values)}
    fields = set(Layout.__dataclass_fields__)
    if set(entries) != fields:
        raise RuntimeError(
            f"the op library's logprob layout names {sorted(set(entries) - fields)} that this "
            f"module lacks and lacks {sorted(fields - set(entries))}: rebuild it"
        )
    return Layout(**entries)
