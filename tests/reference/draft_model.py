"""NumPy references of the draft-model ops (draft_model_greedy_preprocess, draft_model_greedy_update,
draft_model_accept, draft_model_accept_preprocess), written from docs/contract/draft_model.md.

Each takes NumPy arrays (per-slot tensors flattened to [B]), leaves its inputs alone and returns the
mutated arrays in a dict.
"""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops import (
    draft_model_accept,
    draft_model_accept_preprocess,
    draft_model_greedy_preprocess,
    draft_model_greedy_update,
)
from fastdeploy_spec.ops._common import SPECS
from tests.helpers import as_f32, logits_to_place, to_place

SAFE_TOKEN = 0


def _verified_step(step: int, drafted: int, D: int) -> int:
    s0 = min(max(step, 0), D - 1)
    return s0 - min(max(drafted, 0), s0)


def preprocess_ref(
    input_ids,
    seq_lens_decoder,
    step_idx,
    pre_ids,
    mtp_draft_num,
    max_dec_len,
    base_slt,
    base_enc,
    base_dec,
    base_stop,
    base_max_dec_len,
):
    ids, dec, step, pre = input_ids.copy(), seq_lens_decoder.copy(), step_idx.copy(), pre_ids.copy()
    num, mdl, slt = mtp_draft_num.copy(), max_dec_len.copy(), base_slt.copy()
    D = pre.shape[1]
    for b in range(slt.shape[0]):
        s = _verified_step(int(step[b]), int(num[b]), D)
        ids[b], dec[b] = SAFE_TOKEN, 0
        if not base_stop[b] and base_enc[b] > 0:  # a request starts: clear the slot
            pre[b] = -1
            s = 0
        elif not base_stop[b] and base_dec[b] > 0:  # decoding
            if s >= 1 and pre[b, s] >= 0:
                ids[b] = pre[b, s]
            dec[b] = base_dec[b]
            slt[b] = 1
        step[b], num[b], mdl[b] = s, 0, base_max_dec_len[b]
    return dict(zip(PRE_MUTATED, (ids, dec, step, pre, num, mdl, slt)))


def greedy_ids(logits_f32: np.ndarray) -> np.ndarray:
    """argmax per row, ties to the lowest id, NaN counted as -inf."""
    x = np.where(np.isnan(logits_f32), -np.inf, logits_f32)
    return np.argmax(x, axis=1).astype(np.int64)


def update_ref(
    logits_f32, input_ids, seq_lens_decoder, step_idx, pre_ids, mtp_draft_num, drafts, slt, substep
):
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
    return dict(zip(UPD_ORDER, (ids, dec, step, pre, num, drafts, slt)))


def accept_ref(accept_tokens, accept_num, step_idx, pre_ids, mtp_draft_num):
    step, pre, num = step_idx.copy(), pre_ids.copy(), mtp_draft_num.copy()
    D, width = pre.shape[1], accept_tokens.shape[1]
    for b in range(accept_num.shape[0]):
        s = _verified_step(int(step[b]), int(num[b]), D)
        n = min(max(int(accept_num[b]), 0), width, D - 1 - s)
        pre[b, s + 1 : s + 1 + n] = accept_tokens[b, :n]
        step[b], num[b] = s + n, 0
    return dict(step_idx=step, pre_ids=pre, mtp_draft_num=num)


def accept_preprocess_ref(*args):
    """draft_model_accept, then draft_model_greedy_preprocess (the contract's definition); ``args``
    in the op's order (ACC_PRE_ORDER)."""
    s = dict(zip(ACC_PRE_ORDER, args))
    s.update(accept_ref(*(s[k] for k in ACC_ORDER)))
    return preprocess_ref(*(s[k] for k in PRE_ORDER))


# ---- Random states and the ops against the reference ----------------------------------------------

# The ops' tensor orders: the wrappers' own.
PRE_ORDER = SPECS["draft_model_greedy_preprocess"].tensors
PRE_MUTATED = PRE_ORDER[:7]
UPD_ORDER = SPECS["draft_model_greedy_update"].tensors[1:]  # after logits
ACC_ORDER = SPECS["draft_model_accept"].tensors
ACC_MUTATED = ACC_ORDER[2:]
ACC_PRE_ORDER = SPECS["draft_model_accept_preprocess"].tensors
TWO_D = ("input_ids", "step_idx", "max_dec_len", "base_model_stop_flags", "base_model_max_dec_len")


def random_state(rng: np.random.Generator, B: int, K: int, D: int, V: int) -> dict:
    """Draft side and target side of B slots: decoding, prefill, idle, stopped, negative lengths;
    pre_ids rows partly or fully written, unverified drafts left over, tiny vocabularies."""
    step = rng.integers(-1, D + 2, (B, 1)).astype(np.int64)
    pre = np.where(rng.random((B, D)) < 0.9, rng.integers(0, V, (B, D)), -1).astype(np.int64)
    pre[:, 0] = -1
    enc = np.where(rng.random(B) < 0.25, rng.integers(-1, 6, B), 0).astype(np.int32)
    return dict(
        input_ids=rng.integers(-5, V, (B, 1)).astype(np.int64),
        seq_lens_decoder=rng.choice(np.array([0, 0, 3, 9, -1], np.int32), B),
        step_idx=step,
        pre_ids=pre,
        mtp_draft_num=rng.integers(-1, K + 2, B).astype(np.int32),
        max_dec_len=rng.integers(-1, 40, (B, 1)).astype(np.int64),
        base_model_seq_lens_this_time=rng.integers(-1, K + 3, B).astype(np.int32),
        base_model_seq_lens_encoder=enc,
        base_model_seq_lens_decoder=rng.choice(np.array([0, 1, 7, 20, -2], np.int32), B),
        base_model_stop_flags=rng.random((B, 1)) < 0.15,
        base_model_max_dec_len=rng.integers(0, 64, (B, 1)).astype(np.int64),
        base_model_draft_tokens=rng.integers(-1, V, (B, K + 1)).astype(np.int64),
        accept_tokens=rng.integers(0, V, (B, K + 1)).astype(np.int64),
        accept_num=rng.integers(-1, K + 3, B).astype(np.int32),
    )


def tie_logits(rng: np.random.Generator, B: int, V: int) -> np.ndarray:
    """float32 values with many ties (small integers), some -inf, -0.0 and NaN."""
    x = rng.integers(-3, 3, (B, V)).astype(np.float32)
    x[rng.random((B, V)) < 0.05] = -np.inf
    x[rng.random((B, V)) < 0.05] = -0.0
    x[rng.random((B, V)) < 0.05] = np.nan
    return x


def flat(state: dict) -> dict:
    return {k: v.reshape(-1) if k in TWO_D else v for k, v in state.items()}


class Device:
    """The state's tensors on one place; each op call mutates them."""

    def __init__(self, state: dict, place: str) -> None:
        self.place = place
        self.t = {k: to_place(v, place) for k, v in state.items()}

    def preprocess(self) -> None:
        draft_model_greedy_preprocess(*(self.t[k] for k in PRE_ORDER))

    def update(self, storage: np.ndarray, dtype: str, substep: int) -> None:
        logits = logits_to_place(storage, dtype, self.place)
        draft_model_greedy_update(logits, *(self.t[k] for k in UPD_ORDER), substep)

    def accept(self) -> None:
        draft_model_accept(*(self.t[k] for k in ACC_ORDER))

    def accept_preprocess(self) -> None:
        draft_model_accept_preprocess(*(self.t[k] for k in ACC_PRE_ORDER))

    def host(self) -> dict:
        return {k: v.numpy().reshape(-1) if k in TWO_D else v.numpy() for k, v in self.t.items()}


class Reference:
    def __init__(self, state: dict) -> None:
        self.s = {k: v.copy() for k, v in flat(state).items()}

    def preprocess(self) -> None:
        self.s.update(preprocess_ref(*(self.s[k] for k in PRE_ORDER)))

    def update(self, storage: np.ndarray, dtype: str, substep: int) -> None:
        self.s.update(update_ref(as_f32(storage, dtype), *(self.s[k] for k in UPD_ORDER), substep))

    def accept(self) -> None:
        self.s.update(accept_ref(*(self.s[k] for k in ACC_ORDER)))

    def accept_preprocess(self) -> None:
        self.s.update(accept_preprocess_ref(*(self.s[k] for k in ACC_PRE_ORDER)))


def assert_same(got: dict, want: dict, where: str) -> None:
    for k, w in want.items():
        np.testing.assert_array_equal(got[k], w, err_msg=f"{where}: {k}")
