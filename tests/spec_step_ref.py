"""NumPy references of speculate_verify_greedy and speculate_step_update, written from their headers.

Each takes and returns NumPy arrays (per-slot tensors flattened to [B]); inputs are not modified.
"""

from __future__ import annotations

import numpy as np


def slot_kind(stop: bool, enc: int, dec: int) -> str:
    if stop:
        return "empty"
    if enc > 0:
        return "prefill"
    return "decoding" if dec != 0 else "empty"


def verify_greedy_ref(target, accept_tokens, accept_num, step_idx, stop_flags, enc, dec, drafts, slt,
                      max_dec_len, end_tokens):
    """Returns (accept_tokens, accept_num) after the op."""
    acc, num = accept_tokens.copy(), accept_num.copy()
    width = drafts.shape[1]
    ends = set(int(t) for t in end_tokens)
    for b in range(slt.shape[0]):
        kind = slot_kind(bool(stop_flags[b]), int(enc[b]), int(dec[b]))
        if kind == "empty" or slt[b] <= 0:
            num[b] = 0
            continue
        n_drafts = 0 if kind == "prefill" else min(int(slt[b]) - 1, width - 1)
        n = 0
        for j in range(n_drafts + 1):
            n = j + 1
            t = int(target[b, j])
            if j == n_drafts or int(drafts[b, j + 1]) != t or t in ends:
                break
        n = max(0, min(n, int(max_dec_len[b]) - int(step_idx[b])))
        acc[b, :n] = target[b, :n]
        num[b] = n
    return acc, num


def step_update_ref(accept_tokens, accept_num, token_ids_all, prompt_lens, step_idx, max_dec_len,
                    end_tokens, stop_flags, slt, enc, dec, drafts):
    """Returns dict of the mutated arrays after the op."""
    ids, step, stop = token_ids_all.copy(), step_idx.copy(), stop_flags.copy()
    slt, enc, dec, drafts = slt.copy(), enc.copy(), dec.copy(), drafts.copy()
    W = ids.shape[1]
    width = accept_tokens.shape[1]
    ends = set(int(t) for t in end_tokens)
    for b in range(slt.shape[0]):
        kind = slot_kind(bool(stop[b]), int(enc[b]), int(dec[b]))
        if kind == "empty":
            slt[b] = 0
            if stop[b]:
                enc[b] = dec[b] = 0
            continue
        if slt[b] <= 0:
            continue
        P = min(max(int(prompt_lens[b]), 0), W)
        s = min(max(int(step[b]), 0), W - P)
        n = min(max(int(accept_num[b]), 0), width, W - P - s)
        ids[b, P + s:P + s + n] = accept_tokens[b, :n]
        step[b] = s + n
        if n > 0:
            drafts[b, 0] = accept_tokens[b, n - 1]
        grown = int(dec[b]) + (int(enc[b]) if enc[b] > 0 else n)  # the KV length, unbounded
        finished = (n > 0 and int(accept_tokens[b, n - 1]) in ends) or s + n >= max_dec_len[b] \
            or P + s + n >= W or grown > np.iinfo(np.int32).max
        if finished:
            stop[b] = True
            slt[b] = enc[b] = dec[b] = 0
            continue
        dec[b] = grown
        enc[b] = 0
        slt[b] = 1
    return dict(token_ids_all=ids, step_idx=step, stop_flags=stop, seq_lens_this_time=slt,
                seq_lens_encoder=enc, seq_lens_decoder=dec, draft_tokens=drafts)
