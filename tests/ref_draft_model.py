"""NumPy references of the draft-model ops (draft_model_preprocess, draft_model_update,
draft_model_accept), written from docs/contract/draft_model.md.

Each takes NumPy arrays (per-slot tensors flattened to [B]), leaves its inputs alone and returns the
mutated arrays in a dict.
"""

from __future__ import annotations

import numpy as np

SAFE_TOKEN = 0


def _verified_step(step: int, drafted: int, D: int) -> int:
    s0 = min(max(step, 0), D - 1)
    return s0 - min(max(drafted, 0), s0)


def preprocess_ref(input_ids, seq_lens_decoder, step_idx, pre_ids, mtp_draft_num, max_dec_len,
                   base_slt, base_enc, base_dec, base_stop, base_max_dec_len):
    ids, dec, step, pre = input_ids.copy(), seq_lens_decoder.copy(), step_idx.copy(), pre_ids.copy()
    num, mdl, slt = mtp_draft_num.copy(), max_dec_len.copy(), base_slt.copy()
    D = pre.shape[1]
    for b in range(slt.shape[0]):
        s = _verified_step(int(step[b]), int(num[b]), D)
        ids[b], dec[b] = SAFE_TOKEN, 0
        if not base_stop[b] and base_enc[b] > 0:          # a request starts: clear the slot
            pre[b] = -1
            s = 0
        elif not base_stop[b] and base_dec[b] > 0:        # decoding
            if s >= 1 and pre[b, s] >= 0:
                ids[b] = pre[b, s]
            dec[b] = base_dec[b]
            slt[b] = 1
        step[b], num[b], mdl[b] = s, 0, base_max_dec_len[b]
    return dict(input_ids=ids, seq_lens_decoder=dec, step_idx=step, pre_ids=pre, mtp_draft_num=num,
                max_dec_len=mdl, base_model_seq_lens_this_time=slt)


def greedy_ids(logits_f32: np.ndarray) -> np.ndarray:
    """argmax per row, ties to the lowest id, NaN counted as -inf."""
    x = np.where(np.isnan(logits_f32), -np.inf, logits_f32)
    return np.argmax(x, axis=1).astype(np.int64)


def update_ref(logits_f32, input_ids, seq_lens_decoder, step_idx, pre_ids, mtp_draft_num, drafts, slt,
               substep):
    """``logits_f32``: the logits as exact float32 values (whatever their storage dtype)."""
    ids, dec, step, pre = input_ids.copy(), seq_lens_decoder.copy(), step_idx.copy(), pre_ids.copy()
    num, drafts, slt = mtp_draft_num.copy(), drafts.copy(), slt.copy()
    D = pre.shape[1]
    choice = greedy_ids(logits_f32) if len(logits_f32) else np.zeros(0, np.int64)
    for b in range(slt.shape[0]):
        s = min(max(int(step[b]), 0), D - 1)
        if not (dec[b] > 0 and num[b] == substep and s + 1 < D):
            continue
        token = choice[b]
        step[b] = s + 1
        pre[b, s + 1] = token
        drafts[b, substep + 1] = token
        num[b] = substep + 1
        slt[b] = substep + 2
        dec[b] = dec[b] + 1 if dec[b] < np.iinfo(np.int32).max else dec[b]
        ids[b] = token
    return dict(input_ids=ids, seq_lens_decoder=dec, step_idx=step, pre_ids=pre, mtp_draft_num=num,
                base_model_draft_tokens=drafts, base_model_seq_lens_this_time=slt)


def accept_ref(accept_tokens, accept_num, step_idx, pre_ids, mtp_draft_num):
    step, pre, num = step_idx.copy(), pre_ids.copy(), mtp_draft_num.copy()
    D, width = pre.shape[1], accept_tokens.shape[1]
    for b in range(accept_num.shape[0]):
        s = _verified_step(int(step[b]), int(num[b]), D)
        n = min(max(int(accept_num[b]), 0), width, D - 1 - s)
        pre[b, s + 1:s + 1 + n] = accept_tokens[b, :n]
        step[b], num[b] = s + n, 0
    return dict(step_idx=step, pre_ids=pre, mtp_draft_num=num)
