"""NumPy reference of ``custom_ops/common/philox.h``: Philox-4x32-10 and the library's naming of draws
(key = seed, counter = (position, stream, lane)). Vectorised over arrays of positions and seeds."""

from __future__ import annotations

import numpy as np

STREAM_SAMPLE = 0
STREAM_VERIFY_TOPP = 1

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)


def philox4x32_10(ctr, key):
    """ctr: uint32 array [..., 4]; key: uint32 array [..., 2]. Returns uint32 [..., 4]."""
    c = [np.asarray(ctr, np.uint32)[..., i].astype(np.uint64) for i in range(4)]
    k0 = np.asarray(key, np.uint32)[..., 0].copy()
    k1 = np.asarray(key, np.uint32)[..., 1].copy()
    with np.errstate(over="ignore"):
        for r in range(10):
            if r > 0:
                k0 = k0 + _W0
                k1 = k1 + _W1
            p0 = _M0 * c[0]
            p1 = _M1 * c[2]
            hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK
            hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK
            c = [hi1 ^ c[1] ^ k0.astype(np.uint64), lo1, hi0 ^ c[3] ^ k1.astype(np.uint64), lo0]
    return np.stack([x.astype(np.uint32) for x in c], axis=-1)


def philox_draw(seed, position, stream, lane=0):
    """The four words of draw (seed, position, stream, lane); arrays broadcast."""
    seed, position = np.broadcast_arrays(
        np.asarray(seed, np.uint64), np.asarray(position, np.uint64)
    )
    ctr = np.stack(
        [
            position & _MASK,
            position >> np.uint64(32),
            np.full(position.shape, stream, np.uint64),
            np.full(position.shape, lane, np.uint64),
        ],
        axis=-1,
    ).astype(np.uint32)
    key = np.stack([seed & _MASK, seed >> np.uint64(32)], axis=-1).astype(np.uint32)
    return philox4x32_10(ctr, key)


def to_unit_float(word):
    """A word's top 24 bits as float32 in [0, 1)."""
    return (np.asarray(word, np.uint32) >> np.uint32(8)).astype(np.float32) * np.float32(
        1.0 / 16777216.0
    )


def philox_uniform(seed, position, stream):
    return to_unit_float(philox_draw(seed, position, stream)[..., 0])
