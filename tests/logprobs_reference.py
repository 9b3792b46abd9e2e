"""NumPy references for the speculative logprob ops (SPEC §3), plus the logits dtype helpers the
tests share.

bfloat16 has no NumPy dtype: the tests hold bfloat16 logits as their raw uint16 bits. To make a
Paddle tensor of them, the bf16-representable float32 values are cast on the host
(``astype('bfloat16')`` on a CPU tensor: exact, works on Paddle 2.6 and 3.x) and then copied to the
device with ``.cuda()`` (a copy: on the GPU machine Paddle's own GPU cast kernel cannot be used).
``Tensor.numpy()`` of a bfloat16 tensor returns the uint16 bits on both versions.
"""

from __future__ import annotations

import numpy as np
import paddle

from tests.conftest import to_place

LOGITS_DTYPES = ["float32", "float16", "bfloat16"]
FLOAT32_MIN = float(np.finfo(np.float32).min)


# Temperatures below this are a greedy slot (the op's kMinTemperature, restated).
MIN_TEMPERATURE = np.float32(1e-5)

def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounding to nearest even (finite inputs)."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def make_logits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Host storage of ``values`` in ``dtype``: float32, float16, or uint16 bits for bfloat16."""
    if dtype == "float32":
        return values.astype(np.float32)
    if dtype == "float16":
        return values.astype(np.float16)
    return bf16_bits(values)


def as_f32(storage: np.ndarray, dtype: str) -> np.ndarray:
    """The exact float32 values of host storage made by make_logits."""
    return bf16_to_f32(storage) if dtype == "bfloat16" else storage.astype(np.float32)


def logits_to_place(storage: np.ndarray, dtype: str, place: str) -> paddle.Tensor:
    if dtype != "bfloat16":
        return to_place(storage, place)
    tensor = paddle.to_tensor(bf16_to_f32(storage), place=paddle.CPUPlace()).astype("bfloat16")
    return tensor.cuda() if place == "gpu" else tensor


def raw_bits(tensor: paddle.Tensor) -> np.ndarray:
    """Bit pattern of a logits tensor (for exact comparison of copies; also NaN-safe)."""
    a = tensor.numpy()
    return a.view(np.uint32) if a.dtype == np.float32 else a.view(np.uint16)


def ref_cu_batch_offset(accept_num: np.ndarray, max_accept: int | None) -> np.ndarray:
    a = np.maximum(accept_num.astype(np.int64), 0)
    if max_accept is not None:
        a = np.minimum(a, max_accept)
    return np.concatenate([[0], np.cumsum(a)]).astype(np.int32)


def ref_get_accept_tokens_and_logits(token_ids, target_logits, logits, cu, cu_q, enc, accept_num,
                                     accept_tokens):
    """The SPEC §3 walk on copies of the in/out arrays (any storage dtype: rows are copied whole)."""
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


def ref_logprobs_topk(x: np.ndarray, token_ids: np.ndarray, cu: np.ndarray, k: int,
                      temperature: np.ndarray | None = None, raw_logits: bool = False):
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
        lse = 0.0 if m == -np.inf else float(m) + np.log(np.exp(xs.astype(np.float64) - float(m)).sum())

        def score(v):
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
