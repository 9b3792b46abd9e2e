"""NumPy reference of ``hybrid_mtp_ngram`` (SPEC §2), written as the walk reads, plus the clamps that
SPEC is silent on (custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.h): P to [0, W], s to [0, D - 1], a
negative seq_lens_this_time taken (and written back) as 0, and q capped at the K + 1 - ori columns
left after the MTP drafts. With ``pad_to_max`` every slot with ori > 0 is padded after the walk.
"""

from __future__ import annotations

import numpy as np

from tests.ref_ngram_match import graph_pad


def _scan(hay: np.ndarray, pattern: np.ndarray, budget: int):
    """Leftmost productive match: the continuation (possibly empty: None)."""
    n = len(pattern)
    for i in range(len(hay) - n + 1):
        if np.array_equal(hay[i:i + n], pattern):
            start, end = i + n, min(i + n + budget, len(hay))
            if start < end:
                return hay[start:end]
    return None


def hybrid_mtp_ngram_ref(token_ids_all, prompt_lens, pre_ids, step_idx, draft_tokens,
                         seq_lens_this_time, seq_lens_decoder, max_dec_len, max_ngram_size,
                         min_ngram_size, max_draft_tokens, threshold, pad_to_max=False):
    """Returns (draft_tokens, seq_lens_this_time) after the op; the inputs are not modified."""
    draft = np.array(draft_tokens, dtype=np.int64, copy=True)
    slt_shape = np.shape(seq_lens_this_time)
    slt = np.array(seq_lens_this_time, dtype=np.int32, copy=True).reshape(-1)
    B = slt.shape[0]
    W = token_ids_all.shape[1]
    D = pre_ids.shape[1]
    K1 = draft.shape[1]
    prompt_lens = np.asarray(prompt_lens).reshape(-1)
    step_idx = np.asarray(step_idx).reshape(-1)
    dec = np.asarray(seq_lens_decoder).reshape(-1)
    max_dec_len = np.asarray(max_dec_len).reshape(-1)

    slt[slt < 0] = 0
    scheduled = [int(v) > 0 for v in slt]
    unprocessed = int(np.sum(dec > 0))
    for b in range(B):
        ori = int(slt[b])
        P = min(max(int(prompt_lens[b]), 0), W)
        s = min(max(int(step_idx[b]), 0), D - 1)
        q = min(max_draft_tokens - ori + 1, int(max_dec_len[b]) - s - 1, K1 - ori)
        if ori == 0 or q <= 0:
            continue
        unprocessed -= 1
        S = int(np.sum(slt[:b + 1], dtype=np.int64))
        L = unprocessed
        if S + q + L > threshold:
            q = threshold - S - L
        if S + L >= threshold - 1:
            continue
        prompt = token_ids_all[b, :P]
        pre = pre_ids[b, :s]
        for n in range(max_ngram_size, min_ngram_size - 1, -1):
            if s < n:
                continue
            pattern = pre_ids[b, s + 1 - n:s + 1]
            cont = _scan(prompt, pattern, q)
            if cont is None:
                cont = _scan(pre, pattern, q)
            if cont is not None:
                draft[b, ori:ori + len(cont)] = cont
                slt[b] = ori + len(cont)
                break
    if pad_to_max:
        lengths = [int(v) for v in slt]
        graph_pad(draft, lengths, scheduled, max_draft_tokens)
        slt = np.array(lengths, np.int32)
    return draft, slt.reshape(slt_shape)
