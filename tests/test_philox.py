"""The NumPy Philox reference against Random123's published known-answer vectors (kat_vectors,
philox4x32 with 10 rounds): the ops' CPU and GPU draws are checked against this reference."""

import numpy as np
import pytest

from tests.reference.philox import philox4x32_10, philox_draw, philox_uniform, to_unit_float

KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("ctr, key, want", KAT)
def test_known_answers(ctr, key, want):
    got = philox4x32_10(np.array(ctr, np.uint32), np.array(key, np.uint32))
    assert tuple(int(x) for x in got) == want


def test_draw_names_counter_and_key():
    seed, pos = (0x299F31D0 << 32) | 0xA4093822, (0x85A308D3 << 32) | 0x243F6A88
    # stream 0x13198a2e and lane 0x03707344 make the third KAT vector's counter.
    got = philox_draw(seed, pos, 0x13198A2E, lane=0x03707344)
    assert tuple(int(x) for x in got) == KAT[2][2]


def test_uniform_range_and_vectorised():
    u = philox_uniform(np.arange(1000, dtype=np.uint64), 7, 0)
    assert u.dtype == np.float32 and (u >= 0).all() and (u < 1).all()
    assert to_unit_float(0xFFFFFFFF) < 1.0 and to_unit_float(0) == 0.0
    assert abs(float(u.mean()) - 0.5) < 0.05
