"""NumPy reference of ``hybrid_mtp_ngram`` (docs/contract/ngram.md#hybrid_mtp_ngram), written as the walk
reads, plus the clamps that the contract is silent on (custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.h): P
to [0, W], s to [0, D - 1], a negative seq_lens_this_time taken (and written back) as 0, and q capped at
the K + 1 - ori columns left after the MTP drafts. With ``pad_to_max`` every slot with ori > 0 is
padded after the walk.
"""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops import hybrid_mtp_ngram
from fastdeploy_spec.ops.hybrid_mtp_ngram import SPEC as HYBRID_SPEC
from tests.helpers import to_place
from tests.reference.ngram_match import graph_pad


def _scan(hay: np.ndarray, pattern: np.ndarray, budget: int):
    """Leftmost productive match: the continuation (possibly empty: None)."""
    n = len(pattern)
    for i in range(len(hay) - n + 1):
        if np.array_equal(hay[i : i + n], pattern):
            start, end = i + n, min(i + n + budget, len(hay))
            if start < end:
                return hay[start:end]
    return None


def hybrid_mtp_ngram_ref(
    token_ids_all,
    prompt_lens,
    pre_ids,
    step_idx,
    draft_tokens,
    seq_lens_this_time,
    seq_lens_decoder,
    max_dec_len,
    max_ngram_size,
    min_ngram_size,
    max_draft_tokens,
    threshold,
    pad_to_max=False,
):
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
        S = int(np.sum(slt[: b + 1], dtype=np.int64))
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
            pattern = pre_ids[b, s + 1 - n : s + 1]
            cont = _scan(prompt, pattern, q)
            if cont is None:
                cont = _scan(pre, pattern, q)
            if cont is not None:
                draft[b, ori : ori + len(cont)] = cont
                slt[b] = ori + len(cont)
                break
    if pad_to_max:
        lengths = [int(v) for v in slt]
        graph_pad(draft, lengths, scheduled, max_draft_tokens)
        slt = np.array(lengths, np.int32)
    return draft, slt.reshape(slt_shape)


# ---- Random cases and the op against the reference ------------------------------------------------


UNTOUCHED = -7  # draft_tokens filler: a column that must keep its value shows it


def make_case(rng, B, W, D, vocab, K1=6, extra_rows=0):
    """Random inputs, mostly valid, with the odd out-of-range length the kernels must clamp."""
    rows = B + extra_rows
    ids = rng.integers(0, vocab, (rows, W), dtype=np.int64)
    P = rng.integers(0, W + 1, B)
    for b in range(B):
        ids[b, P[b] :] = -1
    prompt_lens = P.reshape(B, 1).astype(np.int64)
    pre_ids = rng.integers(0, vocab, (rows, D), dtype=np.int64)
    step_idx = rng.integers(0, D, (B, 1)).astype(np.int64)
    slt = rng.integers(0, K1 + 2, B).astype(np.int32)
    dec = np.where(rng.random(B) < 0.8, rng.integers(1, 50, B), 0).astype(np.int32)
    max_dec_len = (step_idx + rng.integers(-1, 12, (B, 1))).astype(np.int64)
    if B:
        odd = rng.random(B)
        prompt_lens[odd < 0.05, 0] = W + 3
        prompt_lens[(odd >= 0.05) & (odd < 0.1), 0] = -2
        step_idx[(odd >= 0.1) & (odd < 0.15), 0] = D + 4
        step_idx[(odd >= 0.15) & (odd < 0.2), 0] = -1
        slt[(odd >= 0.2) & (odd < 0.25)] = 40  # a prefill chunk: counted, never processed
        slt[(odd >= 0.25) & (odd < 0.28)] = -3
        dec[(odd >= 0.28) & (odd < 0.3)] = -1
    return dict(
        token_ids_all=ids,
        prompt_lens=prompt_lens,
        pre_ids=pre_ids,
        step_idx=step_idx,
        draft_token_num=np.full(B, K1 - 1, np.int32),
        draft_tokens=np.full((rows, K1), UNTOUCHED, np.int64)[:B].copy(),
        seq_lens_this_time=slt,
        seq_lens_decoder=dec,
        max_dec_len=max_dec_len,
    )


# The op's tensor order (the wrapper's own), its history inputs under the n-gram family's names.
ORDER = tuple(
    {"input_ids": "token_ids_all", "input_ids_len": "prompt_lens"}.get(k, k)
    for k in HYBRID_SPEC.tensors
)


def run_op(
    case, place, max_ngram_size, min_ngram_size, max_draft_tokens, *pad, op=hybrid_mtp_ngram, **kw
):
    t = {k: to_place(case[k], place) for k in ORDER}
    op(*(t[k] for k in ORDER), max_ngram_size, min_ngram_size, max_draft_tokens, *pad, **kw)
    return t["draft_tokens"].numpy(), t["seq_lens_this_time"].numpy()


def run_ref(case, max_ngram_size, min_ngram_size, max_draft_tokens, threshold, pad_to_max=False):
    c = case
    return hybrid_mtp_ngram_ref(
        c["token_ids_all"],
        c["prompt_lens"],
        c["pre_ids"],
        c["step_idx"],
        c["draft_tokens"],
        c["seq_lens_this_time"],
        c["seq_lens_decoder"],
        c["max_dec_len"],
        max_ngram_size,
        min_ngram_size,
        max_draft_tokens,
        threshold,
        pad_to_max,
    )


def check(case, place, max_n, min_n, max_draft, threshold, pad_to_max=False):
    got_d, got_s = run_op(
        case, place, max_n, min_n, max_draft, threshold=threshold, pad_to_max=pad_to_max
    )
    want_d, want_s = run_ref(case, max_n, min_n, max_draft, threshold, pad_to_max)
    np.testing.assert_array_equal(got_s, want_s)
    np.testing.assert_array_equal(got_d, want_d)
    return want_d, want_s
