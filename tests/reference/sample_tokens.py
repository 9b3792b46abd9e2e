"""NumPy reference of ``speculate_sample_tokens`` (custom_ops/speculate_sample_tokens/*.h,
docs/contract/sampling.md): the same float32 operations, the same integer weights, the same draw.

Also the exact distribution a row samples from (``row_distribution``), for the statistical tests.
"""

from __future__ import annotations

import numpy as np

from tests.reference.philox import STREAM_SAMPLE, philox_draw

MIN_TEMPERATURE = np.float32(1e-5)
WEIGHT_BITS = 40
LOG2E = np.float32(1.4426950408889634)
# 2^f - 1 = f q(f) on [0, 1): q's coefficients, highest first (the header's sample_exp2_frac).
EXP2_Q = [
    np.float32(float.fromhex(h))
    for h in ("0x1.e978aep-10", "0x1.277574p-7", "0x1.c91e02p-5", "0x1.ebdb30p-3", "0x1.62e4bcp-1")
]
P_MAX = np.float32(float.fromhex("0x1.fffffep0"))
F32_MAX = np.float32(np.finfo(np.float32).max)


def fmaf(a, b, c):
    """float32 fma, correctly rounded: a * b exact in float64, the sum split exactly (TwoSum), and
    the one case where rounding the float64 sum differs from rounding the exact one (a float32
    midpoint) settled by the sign of the remainder."""
    a, b, c = (np.asarray(v, np.float32) for v in (a, b, c))
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = c.astype(np.float64)
    s = p + c64
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    r = s.astype(np.float32)
    r64 = r.astype(np.float64)
    up = np.nextafter(r, np.float32(np.inf)).astype(np.float64)
    down = np.nextafter(r, np.float32(-np.inf)).astype(np.float64)
    mid_up = (s - r64) * 2 == (up - r64)  # s is the midpoint between r and the next float up
    mid_down = (r64 - s) * 2 == (r64 - down)  # ... or down
    r = np.where(mid_up & (e > 0), np.nextafter(r, np.float32(np.inf)), r)
    r = np.where(mid_down & (e < 0), np.nextafter(r, np.float32(-np.inf)), r)
    return r.astype(np.float32)


def keys(x):
    """Order-preserving uint32 keys of float32 logits (-0 is +0, NaN lowest)."""
    x = np.asarray(x, np.float32)
    b = x.view(np.uint32).copy()
    b[b == np.uint32(0x80000000)] = 0
    k = np.where(b & np.uint32(0x80000000), ~b, b | np.uint32(0x80000000)).astype(np.uint32)
    k[np.isnan(x)] = 0
    return k


def key_to_float(k):
    k = np.uint32(k)
    b = (k & np.uint32(0x7FFFFFFF)) if k & np.uint32(0x80000000) else ~k
    return np.array([b], np.uint32).view(np.float32)[0]


def weights(t):
    """uint64 W = floor(2^(t + 40)) by the header's arithmetic; 0 below t = -40 or NaN."""
    t = np.asarray(t, np.float32)
    ok = t >= np.float32(-40.0)
    tt = np.where(ok, t, np.float32(0))
    n = np.floor(tt).astype(np.float32)
    f = (tt - n).astype(np.float32)
    q = EXP2_Q[0]
    for c in EXP2_Q[1:]:
        q = fmaf(q, f, c)
    p = fmaf(q, f, np.float32(1.0))
    p = np.minimum(p, P_MAX)
    mant = (p.view(np.uint32) & np.uint32(0x7FFFFF)) | np.uint32(0x800000)
    sh = n.astype(np.int64) + (WEIGHT_BITS - 23)
    m64 = mant.astype(np.uint64)
    w = np.where(
        sh >= 0,
        m64 << np.maximum(sh, 0).astype(np.uint64),
        m64 >> np.maximum(-sh, 0).astype(np.uint64),
    )
    return np.where(ok, w, np.uint64(0)).astype(np.uint64)


def buckets(t):
    """round(-16 t) by adding 1.5 * 2^23 in float32 (the header's sample_bucket)."""
    s = (np.asarray(t, np.float32) * np.float32(-16.0)).astype(np.float32) + np.float32(12582912.0)
    return (s.astype(np.float32).view(np.uint32) & np.uint32(0x3FF)).astype(np.int64)


def row_params(temperature, top_p, top_k, min_p, vocab):
    T = np.float32(temperature)
    greedy = not (T >= MIN_TEMPERATURE and T <= F32_MAX)
    c = np.float32(0) if greedy else np.float32(LOG2E / T)
    k = int(top_k)
    k = k if 0 < k < vocab else 0
    tp = np.float32(top_p)
    if tp >= 1 or np.isnan(tp):
        p24 = 1 << 24
    else:
        p24 = int(np.float32(tp * np.float32(16777216.0))) if tp > 0 else 0
    mp = np.float32(min_p)
    mp = min(mp, np.float32(1.0))
    minw = int(np.float32(mp * np.float32(2.0**40))) if mp > 0 else 0
    return greedy, c, k, p24, max(minw, 1)


def _cut(x, temperature, top_p, top_k, min_p):
    """The row's entries in S (the set sampled from): ids, weights, buckets; or (argmax,) when greedy."""
    x = np.asarray(x, np.float32)
    V = x.shape[0]
    greedy, c, k, p24, minw = row_params(temperature, top_p, top_k, min_p, V)
    key = keys(x)
    ids = np.arange(V, dtype=np.int64)
    best = int(np.lexsort((ids, -key.astype(np.int64)))[0])
    M = key_to_float(key[best])
    if greedy or not np.isfinite(M):
        return best, None
    with np.errstate(invalid="ignore", over="ignore"):
        t = ((x - M).astype(np.float32) * c).astype(np.float32)
    w = weights(t)
    keep = w >= np.uint64(minw)
    ids, w, key, b = ids[keep], w[keep], key[keep], buckets(t[keep])
    order = np.lexsort((ids, -key.astype(np.int64)))
    ids, w, b = ids[order], w[order], b[order]
    if k:
        ids, w, b = ids[:k], w[:k], b[:k]
    mass_a = int(w.astype(object).sum())
    target = max(1, (mass_a >> 24) * p24 + (((mass_a & 0xFFFFFF) * p24 + 0xFFFFFF) >> 24))
    cum = np.cumsum(w.astype(object))
    n_s = int(np.argmax(cum >= target)) + 1
    return None, (ids[:n_s], w[:n_s], b[:n_s])


def sample_row(x, temperature, top_p, top_k, min_p, seed, position):
    """The token of one row."""
    greedy_token, s = _cut(x, temperature, top_p, top_k, min_p)
    if s is None:
        return greedy_token
    ids, w, b = s
    order = np.lexsort((ids, b))
    ids, w = ids[order], w[order]
    mass = int(w.astype(object).sum())
    d = philox_draw(np.uint64(seed & (2**64 - 1)), np.uint64(position), STREAM_SAMPLE)
    R = (int(d[0]) << 96) | (int(d[1]) << 64) | (int(d[2]) << 32) | int(d[3])
    u = (R * mass) >> 128
    cum = np.cumsum(w.astype(object))
    return int(ids[int(np.argmax(cum > u))])


def row_distribution(x, temperature, top_p, top_k, min_p=0.0):
    """The exact probabilities (float64 [V]) the row's token is drawn with."""
    x = np.asarray(x, np.float32)
    greedy_token, s = _cut(x, temperature, top_p, top_k, min_p)
    p = np.zeros(x.shape[0])
    if s is None:
        p[greedy_token] = 1.0
        return p
    ids, w, _ = s
    p[ids] = w.astype(np.float64) / float(w.astype(object).sum())
    return p


def sample_tokens(
    logits, cu_seqlens_q_output, step_idx, seed, temperature, top_p, top_k, min_p=None
):
    """int64 [N]: the op's output for float32 logits [N, V] (widen 16-bit logits first)."""
    logits = np.asarray(logits, np.float32)
    N = logits.shape[0]
    cu = np.asarray(cu_seqlens_q_output, np.int64).reshape(-1)
    B = cu.shape[0] - 1
    valid = int(np.clip(cu[B], 0, N)) if B > 0 else 0
    out = np.full(N, -1, np.int64)
    flat = lambda a, d: np.asarray(a, d).reshape(-1)
    step_idx, seed = flat(step_idx, np.int64), flat(seed, np.int64)
    temperature, top_p, top_k = (
        flat(temperature, np.float32),
        flat(top_p, np.float32),
        flat(top_k, np.int64),
    )
    min_p = np.zeros(B, np.float32) if min_p is None else flat(min_p, np.float32)
    for r in range(valid):
        b = 0
        lo, hi = 0, B - 1
        while lo < hi:  # the last b with cu[b] <= r
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if cu[mid] <= r else (lo, mid - 1)
        b = lo
        pos = int(step_idx[b]) + (r - int(cu[b]))
        out[r] = sample_row(
            logits[r],
            temperature[b],
            top_p[b],
            top_k[b],
            min_p[b],
            int(seed[b]) % (2**64),
            pos % (2**64),
        )
    return out
