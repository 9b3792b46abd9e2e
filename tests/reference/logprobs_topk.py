"""NumPy reference of ``speculate_logprobs_topk`` (docs/contract/logprobs.md), and its random cases."""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops import speculate_logprobs_topk
from tests.helpers import FLOAT32_MIN, as_f32, logits_to_place, make_logits, to_place

# Temperatures below this are a greedy slot (the op's kMinTemperature, restated).
MIN_TEMPERATURE = np.float32(1e-5)


def ref_logprobs_topk(
    x: np.ndarray,
    token_ids: np.ndarray,
    cu: np.ndarray,
    k: int,
    temperature: np.ndarray | None = None,
    raw_logits: bool = False,
):
    """Float64 reference of speculate_logprobs_topk on the float32 logit values ``x`` [N, V].

    Returns ids [N, k+1] int64, scores [N, k+1] float64, ranks [N] int64. The scaling is done in
    float32 exactly as the ops do (x * (1 / T)), so ids and ranks are exact; only the log-sum-exp is
    float64.
    """
    N, V = x.shape
    B = cu.size - 1
    valid = min(max(int(cu[B]), 0), N) if B > 0 else 0
    ids = np.full((N, k + 1), -1, np.int64)
    scores = np.zeros((N, k + 1), np.float64)
    ranks = np.zeros(N, np.int64)
    for r in range(valid):
        scale = np.float32(1)
        if temperature is not None:
            b = _slot_of_row(cu, B, r)
            t = np.float32(temperature.reshape(-1)[b])
            if t >= MIN_TEMPERATURE and np.isfinite(t):  # else a greedy slot: unscaled
                scale = np.float32(1) / t
        xs = (x[r].astype(np.float32) * scale).astype(np.float32)
        m = xs.max()
        lse = (
            0.0
            if m == -np.inf
            else float(m) + np.log(np.exp(xs.astype(np.float64) - float(m)).sum())
        )

        def score(v, lse=lse):
            s = float(v) if raw_logits else float(v) - lse
            return max(s, FLOAT32_MIN)

        order = np.lexsort((np.arange(V), -xs))[:k]  # larger value first, then lower id
        for j, v in enumerate(order):
            ids[r, 1 + j] = v
            scores[r, 1 + j] = score(xs[v])
        tok = int(token_ids[r])
        ids[r, 0] = tok
        if 0 <= tok < V:
            scores[r, 0] = score(xs[tok])
            ranks[r] = int((xs >= xs[tok]).sum())
    return ids, scores, ranks


def _slot_of_row(cu: np.ndarray, B: int, r: int) -> int:
    """The last b in [0, B) with cu[b] <= r (0 if none): the ops' binary search, for sorted cu."""
    below = np.nonzero(cu[:B] <= r)[0]
    return int(below[-1]) if below.size else 0


# ---- Random cases and the op against the reference ------------------------------------------------


# Score tolerance against the float64 reference, the same for every dtype: the 16-bit logits widen to
# float32 exactly and the scaling is the ops' own float32 arithmetic in the reference too, so what is
# left is the float32 log-sum-exp: fp32 partial sums of up to V exp terms (GPU: exp2f, 2 ulp), and the
# float32 subtraction x - lse (ulp of |x| ~ 1e-6 for logits of magnitude ~10).
SCORE_TOL = {
    "float32": (2e-5, 1e-5),
    "float16": (2e-5, 1e-5),
    "bfloat16": (2e-5, 1e-5),
}  # (atol, rtol)


STRIDE = 3  # K + 1: rows per slot in N = B * (K + 1)


def make_case(rng, B, V, dtype, *, tie_range=None, temperature=False, accept=None):
    accept = rng.integers(0, STRIDE + 1, B) if accept is None else np.asarray(accept)
    cu = np.concatenate([[0], np.cumsum(accept)]).astype(np.int32)
    N = B * STRIDE
    if tie_range is None:
        values = rng.standard_normal((N, V)).astype(np.float32) * 3
    else:  # few distinct values: ties everywhere
        values = rng.integers(0, tie_range, (N, V)).astype(np.float32)
    storage = make_logits(values, dtype)
    tokens = rng.integers(0, V, N).astype(np.int64)
    temp = rng.choice(np.array([0.5, 1.0, 1.7, 0.0], np.float32), B) if temperature else None
    return dict(logits=storage, tokens=tokens, cu=cu, temperature=temp)


def run_op(case, dtype, place, k, raw_logits=False):
    N = case["tokens"].shape[0]
    ids = to_place(np.full((N, k + 1), 99, np.int64), place)
    scores = to_place(np.full((N, k + 1), 99, np.float32), place)
    ranks = to_place(np.full(N, 99, np.int64), place)
    temp = None if case["temperature"] is None else to_place(case["temperature"], place)
    speculate_logprobs_topk(
        logits_to_place(case["logits"], dtype, place),
        to_place(case["tokens"], place),
        to_place(case["cu"], place),
        ids,
        scores,
        ranks,
        temperature=temp,
        raw_logits=raw_logits,
    )
    return ids.numpy(), scores.numpy(), ranks.numpy()


def check(case, dtype, place, k, raw_logits=False):
    want_ids, want_scores, want_ranks = ref_logprobs_topk(
        as_f32(case["logits"], dtype),
        case["tokens"],
        case["cu"],
        k,
        case["temperature"],
        raw_logits,
    )
    ids, scores, ranks = run_op(case, dtype, place, k, raw_logits)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(ranks, want_ranks)
    atol, rtol = SCORE_TOL[dtype]
    np.testing.assert_allclose(scores, want_scores, atol=atol, rtol=rtol)
    return ids, scores, ranks
