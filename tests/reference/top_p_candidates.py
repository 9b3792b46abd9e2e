"""NumPy reference of ``top_p_candidates`` (docs/contract/decode_step.md), written from the contract.
Probabilities are given as float32 values (a float16 / bfloat16 input widened exactly); scores are
returned as those float32 values."""

from __future__ import annotations

import numpy as np


def top_p_candidates_ref(probs: np.ndarray, top_p: np.ndarray, batch_ids: np.ndarray, C: int):
    """Returns (scores [T, C] float32, ids [T, C] int64, lens [T] int32)."""
    T, V = probs.shape
    scores = np.zeros((T, C), np.float32)
    ids = np.zeros((T, C), np.int64)
    lens = np.zeros(T, np.int32)
    top_p = np.asarray(top_p, np.float32).ravel()
    picks = min(C, V)
    for t in range(T):
        b = int(batch_ids[t])
        if b < 0 or b >= top_p.size or picks == 0:
            continue
        row = probs[t].astype(np.float32)
        key = np.where(np.isnan(row), -np.inf, row)
        order = sorted(range(V), key=lambda v: (-key[v], v))[:picks]
        total, length = np.float32(0.0), picks
        for k, v in enumerate(order):
            ids[t, k], scores[t, k] = v, row[v]
            total = np.float32(total + row[v])
            if total >= top_p[b]:
                length = k + 1
                break
        lens[t] = length
    return scores, ids, lens
