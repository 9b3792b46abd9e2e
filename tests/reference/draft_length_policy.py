"""NumPy reference of ``speculate_draft_length_policy`` (docs/contract/policy.md), and its random cases.

Written from the contract, not from the kernel: the candidate drafts are sorted explicitly (gain
descending, then slot, then position) and the objective is evaluated with Python integers at every
prefix; the kernels count gains in a histogram instead. Both must give the same bits.
"""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops import speculate_draft_length_policy
from fastdeploy_spec.ops._common import SPECS
from tests.helpers import run_in_place

ONE = 65536
MAX_NS = 2**32 - 1


def _q16(v: int) -> int:
    return min(max(int(v), 0), ONE)


def _blend(p: int, target: int, w: int) -> int:
    return (p * (ONE - w) + target * w) >> 16


def _cost(table, n: int) -> int:
    if n <= 0:
        return 0
    entry = [min(max(int(v), 0), MAX_NS) for v in table]
    L = len(entry)
    if n <= L:
        return entry[n - 1]
    slope = max(entry[L - 1] - entry[L - 2], 0) if L >= 2 else 0
    return entry[L - 1] + slope * (n - L)


def gains_of(row, n: int) -> list:
    """The Q10 gains of a slot's first n drafts: products of its Q16 estimates, floored at each step."""
    out, c = [], ONE
    for j in range(n):
        c = (c * _q16(row[j])) >> 16
        out.append(c >> 6)
    return out


def policy_ref(
    accept_num,
    draft_tokens,
    draft_len,
    draft_probe,
    accept_ewma,
    opt_out,
    slt,
    enc,
    dec,
    stop,
    cost_table,
    alpha,
    prior,
    seq_cost_ns,
    step_cost_ns,
):
    """Returns the mutated arrays (draft_len, draft_probe, accept_ewma, seq_lens_this_time) after the op."""
    draft_len, probe, ewma, slt = (
        draft_len.copy(),
        draft_probe.copy(),
        accept_ewma.copy(),
        slt.copy(),
    )
    B = slt.shape[0]
    K = ewma.shape[1]
    alpha, prior = _q16(alpha), _q16(prior)
    kinds = []
    for b in range(B):
        stopped = bool(stop[b])
        if stopped or (enc[b] <= 0 and dec[b] == 0) or slt[b] <= 0:
            kinds.append("idle")
        elif enc[b] > 0:
            kinds.append("prefill")
        else:
            kinds.append("opted_out" if opt_out[b] else "decoding")
    scheduled = sum(k != "idle" for k in kinds)
    base = 0
    cands = []  # (gain, slot, position)
    for b, kind in enumerate(kinds):
        if kind == "idle":
            continue
        if kind == "prefill":
            base += int(slt[b])
            continue
        base += 1
        d = min(max(int(draft_len[b]), 0), K)
        a = min(max(int(accept_num[b]) - 1, 0), d)
        for i in range(a):
            ewma[b, i] = _blend(_q16(ewma[b, i]), ONE, alpha)
        if a < K:
            if a < d:  # the first rejected draft
                ewma[b, a] = _blend(_q16(ewma[b, a]), 0, alpha)
            elif probe[b] >= 0:  # every verified draft accepted: the probe against the bonus token
                hit = int(probe[b]) == int(draft_tokens[b, 0])
                ewma[b, a] = _blend(_q16(ewma[b, a]), ONE if hit else 0, alpha)
        if kind == "decoding":
            n = min(max(int(slt[b]) - 1, 0), K)
            cands += [(g, b, j) for j, g in enumerate(gains_of(ewma[b], n))]
    cands.sort(key=lambda c: (-c[0], c[1], c[2]))
    # A new request starts from the decoding slots' mean estimates (after their learning).
    learners = [b for b, kind in enumerate(kinds) if kind in ("decoding", "opted_out")]
    for b, kind in enumerate(kinds):
        if kind == "prefill":
            for i in range(K):
                ewma[b, i] = (
                    sum(_q16(ewma[x, i]) for x in learners) // len(learners) if learners else prior
                )

    def score(m: int, gain_sum: int) -> int:
        A = 1024 * scheduled + gain_sum
        D = max(_cost(cost_table, base + m) + scheduled * int(seq_cost_ns) + int(step_cost_ns), 1)
        return (A << 20) // D

    best_m, best, total = 0, score(0, 0), 0
    for m, (g, _, _) in enumerate(cands, start=1):
        total += g
        s = score(m, total)
        if s > best:
            best, best_m = s, m
    k = np.zeros(B, np.int64)
    for _, b, _ in cands[:best_m]:
        k[b] += 1
    for b, kind in enumerate(kinds):
        probe[b] = -1
        if kind in ("decoding", "opted_out"):
            n = min(max(int(slt[b]) - 1, 0), K)
            if k[b] < n:  # the first cut draft
                probe[b] = draft_tokens[b, k[b] + 1]
            slt[b] = 1 + k[b]
        draft_len[b] = k[b]
    return dict(draft_len=draft_len, draft_probe=probe, accept_ewma=ewma, seq_lens_this_time=slt)


# ---- Random cases and the op against the reference ------------------------------------------------

# The op's tensor order, in-place outputs and attributes: the wrapper's own.
ORDER = SPECS["speculate_draft_length_policy"].tensors
MUTATED = SPECS["speculate_draft_length_policy"].written
ATTRS = tuple(name for name, _ in SPECS["speculate_draft_length_policy"].attrs)


def random_table(rng: np.random.Generator) -> np.ndarray:
    """A cost table: flat then linear (a GPU's shape), random increments, or any values."""
    L = int(rng.choice([1, 2, 7, 64, 300]))
    shape = int(rng.integers(0, 3))
    i = np.arange(L, dtype=np.int64)
    if shape == 0:
        knee, slope = int(rng.integers(1, 200)), int(rng.integers(0, 60000))
        return int(rng.integers(1000, 8_000_000)) + np.where(
            i > knee, (i - knee) * slope, i * (slope // 50)
        )
    if shape == 1:
        return int(rng.integers(1000, 8_000_000)) + np.cumsum(rng.integers(0, 40000, L))
    return rng.integers(-5, 9_000_000, L)


def random_case(rng: np.random.Generator, B: int, K: int) -> dict:
    """Prefill, decoding, opted-out, empty, stopped and unscheduled slots; estimates sometimes on few
    levels (many tied gains) and sometimes out of range; draft_len and accept_num sometimes nonsense."""
    kind = rng.integers(0, 10, B)
    enc = np.where(kind == 1, rng.integers(1, 40, B), 0).astype(np.int32)
    dec = np.where(kind == 2, 0, rng.integers(1, 500, B)).astype(np.int32)
    draft_len = np.where(
        rng.random(B) < 0.05, rng.integers(-2, K + 4, B), rng.integers(0, K + 1, B)
    )
    accept = 1 + (rng.random(B) * (np.maximum(draft_len, 0) + 1)).astype(np.int64)
    accept = np.where(rng.random(B) < 0.05, rng.integers(-3, K + 5, B), accept)
    if rng.random() < 0.5:
        ewma = rng.choice(np.array([0, 32768, 49152, 65536]), (B, K))
    else:
        ewma = np.where(
            rng.random((B, K)) < 0.03,
            rng.integers(-100, 70000, (B, K)),
            rng.integers(0, ONE + 1, (B, K)),
        )
    slt = np.where(enc > 0, enc, 1 + rng.integers(0, K + 3, B))
    slt = np.where(rng.random(B) < 0.05, rng.integers(-1, 1, B), slt)
    # Tokens of a vocabulary of 3, so that probes hit the bonus token (column 0) often.
    drafts = rng.integers(0, 3, (B, K + 1)).astype(np.int64)
    probe = np.where(rng.random(B) < 0.2, -1, rng.integers(0, 3, B)).astype(np.int64)
    return dict(
        accept_num=accept.astype(np.int32),
        draft_tokens=drafts,
        draft_len=draft_len.astype(np.int32),
        draft_probe=probe,
        accept_ewma=ewma.astype(np.int32).reshape(B, K),
        draft_opt_out=rng.random(B) < 0.1,
        seq_lens_this_time=slt.astype(np.int32),
        seq_lens_encoder=enc,
        seq_lens_decoder=dec,
        stop_flags=(kind == 0).reshape(B, 1),
        cost_table=random_table(rng).astype(np.int64),
        alpha=int(rng.choice([0, 6554, 16384, 65536, int(rng.integers(0, ONE + 1))])),
        prior=int(rng.choice([0, 39322, 65536, int(rng.integers(0, ONE + 1))])),
        seq_cost_ns=int(rng.choice([0, 42000, int(rng.integers(0, 100000))])),
        step_cost_ns=int(rng.choice([0, 20000, int(rng.integers(0, 3_000_000))])),
    )


def run(case: dict, place: str) -> dict:
    return run_in_place(speculate_draft_length_policy, case, place, *(case[k] for k in ATTRS))


def expected(case: dict) -> dict:
    flat = {k: (case[k].ravel() if k == "stop_flags" else case[k]) for k in ORDER}
    return policy_ref(*(flat[k] for k in ORDER), *(case[k] for k in ATTRS))


def check(case: dict, place: str) -> dict:
    want = expected(case)
    got = run(case, place)
    for k in MUTATED:
        np.testing.assert_array_equal(got[k].reshape(want[k].shape), want[k], err_msg=k)
    return got
