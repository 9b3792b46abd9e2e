"""NumPy reference of ``speculate_get_accept_tokens_and_logits`` and ``speculate_compute_cu_batch_offset``
(docs/contract/logprobs.md), and their random cases."""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops import speculate_get_accept_tokens_and_logits
from tests.helpers import logits_to_place, make_logits, raw_bits, to_place


def ref_cu_batch_offset(accept_num: np.ndarray, max_accept: int | None) -> np.ndarray:
    a = np.maximum(accept_num.astype(np.int64), 0)
    if max_accept is not None:
        a = np.minimum(a, max_accept)
    return np.concatenate([[0], np.cumsum(a)]).astype(np.int32)


def ref_get_accept_tokens_and_logits(
    token_ids, target_logits, logits, cu, cu_q, enc, accept_num, accept_tokens
):
    """The docs/contract/logprobs.md walk on copies of the in/out arrays (any storage dtype: rows are
    copied whole)."""
    token_ids, target_logits, cu = token_ids.copy(), target_logits.copy(), cu.copy()
    B = accept_num.size
    if B == 0:  # an empty batch still says so: cu[0] = 0 (no valid row)
        cu[0] = 0
        return token_ids, target_logits, cu
    stride = accept_tokens.shape[1]
    N, R = token_ids.shape[0], logits.shape[0]
    cu[: B + 1] = ref_cu_batch_offset(accept_num.reshape(-1), stride)
    for b in range(B):
        n = min(max(int(accept_num.reshape(-1)[b]), 0), stride)
        rows = min(n, 1) if enc.reshape(-1)[b] > 0 else n
        for i in range(n):
            dst = int(cu[b]) + i
            if dst >= N:
                break
            token_ids[dst] = accept_tokens[b, i]
            src = int(cu_q[b]) + i
            if i < rows and 0 <= src < R:
                target_logits[dst] = logits[src]
    return token_ids, target_logits, cu


# ---- Random cases and the op against the reference ------------------------------------------------


SENTINEL_TOKEN = -7


SENTINEL_OFFSET = -5


def make_case(rng, B, V, stride, mix, dtype, *, n_rows=None, accept_lo=0, accept_hi=None):
    """Random step of B slots: per-slot output rows in `logits`, accept counts, sentinel outputs."""
    enc = {"decode": np.zeros(B), "prefill": np.full(B, 9), "mixed": rng.integers(0, 2, B) * 9}[mix]
    enc = enc.astype(np.int32)
    slt = np.where(enc > 0, enc, rng.integers(1, stride + 1, B)).astype(np.int32)
    out_rows = np.where(enc > 0, 1, slt)
    cu_q = np.concatenate([[0], np.cumsum(out_rows)]).astype(np.int32)
    accept_hi = stride if accept_hi is None else accept_hi
    accept = rng.integers(accept_lo, accept_hi + 1, B).astype(np.int32)
    accept = np.where((enc > 0) & (accept_hi <= stride), np.minimum(accept, 1), accept).astype(
        np.int32
    )
    accept_tokens = rng.integers(0, 1000, (B, stride)).astype(np.int64)
    R = int(cu_q[-1])
    logits = make_logits(rng.standard_normal((R, V)).astype(np.float32) * 4, dtype)
    N = B * stride if n_rows is None else n_rows
    token_ids = np.full(N, SENTINEL_TOKEN, np.int64)
    target = make_logits(np.full((N, V), -3.5, np.float32), dtype)
    cu = np.full(B + 1, SENTINEL_OFFSET, np.int32)
    return dict(
        token_ids=token_ids,
        target_logits=target,
        logits=logits,
        cu=cu,
        cu_q=cu_q,
        slt=slt,
        enc=enc,
        accept_num=accept,
        accept_tokens=accept_tokens,
    )


def call(t: dict) -> None:
    """The op over the tensors of ``t``, named as ``make_case`` names them."""
    speculate_get_accept_tokens_and_logits(
        t["token_ids"],
        t["target_logits"],
        t["logits"],
        t["cu"],
        t["cu_q"],
        t["slt"],
        t["enc"],
        t["accept_num"],
        t["accept_tokens"],
    )


def run_op(case, dtype, place):
    t = {k: to_place(v, place) for k, v in case.items() if k not in ("target_logits", "logits")}
    target = logits_to_place(case["target_logits"], dtype, place)
    logits = logits_to_place(case["logits"], dtype, place)
    call(dict(t, target_logits=target, logits=logits))
    return t["token_ids"].numpy(), raw_bits(target), t["cu"].numpy()


def check(case, dtype, place):
    want_ids, want_rows, want_cu = ref_get_accept_tokens_and_logits(
        case["token_ids"],
        case["target_logits"],
        case["logits"],
        case["cu"],
        case["cu_q"],
        case["enc"],
        case["accept_num"],
        case["accept_tokens"],
    )
    got_ids, got_bits, got_cu = run_op(case, dtype, place)
    want_bits = want_rows.view(np.uint32 if want_rows.dtype == np.float32 else np.uint16)
    np.testing.assert_array_equal(got_cu, want_cu)
    np.testing.assert_array_equal(got_ids, want_ids)
    np.testing.assert_array_equal(got_bits, want_bits)
    return got_ids, got_cu
