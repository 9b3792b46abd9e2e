"""NumPy references of ``unified_update_model_status`` and ``naive_update_model_status``
(docs/contract/decode_step.md), written from the contract, and their random cases. Inputs are not
modified; a reference returns every in-place tensor after the op."""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops import naive_update_model_status, unified_update_model_status
from fastdeploy_spec.ops._common import SPECS
from tests.helpers import assert_arrays_equal, run_in_place

# The ops' tensor orders and in-place outputs: the wrappers' own.
UPDATE_ORDER = SPECS["unified_update_model_status"].tensors
UPDATE_OUTPUTS = SPECS["unified_update_model_status"].written
I32_MAX, I64_MAX = 2**31 - 1, 2**63 - 1


def unified_update_ref(c: dict) -> dict:
    o = {k: c[k].copy() for k in UPDATE_OUTPUTS}
    R, W = o["stop_flags"].shape[0], o["step_input_ids"].shape[1]
    B, L = o["seq_lens_this_time"].shape[0], o["token_ids_all"].shape[1]
    ends = [int(e) for e in c["end_tokens"].ravel()]
    any_running = False
    for b in range(R):
        if o["stop_flags"][b] or c["is_paused"][b]:
            if b < B:
                o["stop_flags"][b] = True
                for k in (
                    "seq_lens_encoder",
                    "seq_lens_decoder",
                    "seq_lens_this_time",
                    "step_output_len",
                ):
                    o[k][b] = 0
            continue
        n = min(max(int(o["step_output_len"][b]), 0), W)
        s = int(o["step_idx"][b])
        ended = False
        for k in range(n):
            tok = int(o["step_output_ids"][b, k])
            eos, at_max = tok in ends, min(s + k + 1, I64_MAX) >= int(c["max_dec_len"][b])
            if eos or at_max:
                if not eos and ends:
                    o["step_output_ids"][b, k] = ends[0]
                n, ended = k + 1, True
                break
        enc, dec = int(o["seq_lens_encoder"][b]), int(o["seq_lens_decoder"][b])
        if enc > 0:
            o["seq_lens_decoder"][b], o["seq_lens_encoder"][b] = min(dec + enc, I32_MAX), 0
        elif dec > 0:
            o["seq_lens_decoder"][b] = min(dec + n, I32_MAX)
        if ended:
            o["stop_flags"][b] = True
        o["step_output_len"][b] = n
        o["step_idx"][b] = min(s + n, I64_MAX)
        plen = int(c["prompt_lens"][b])
        if 0 <= plen < L:
            for k in range(n):
                if 0 <= s + k < L - plen:
                    o["token_ids_all"][b, plen + s + k] = o["step_output_ids"][b, k]
        if n > 0:
            o["step_input_ids"][b, 0] = o["step_output_ids"][b, n - 1]
        any_running = any_running or not ended
    o["has_running_seqs"][...] = any_running
    return o


def random_update_case(
    rng: np.random.Generator, B: int, K: int, vocab: int, L: int = 24, rows: int | None = None
) -> dict:
    """Running, prefill, stopped, paused and padding slots; end tokens and max_dec_len mid-row; rows
    that end past token_ids_all's width."""
    R = B + (rows if rows is not None else int(rng.integers(0, 3)))
    W = K + 1
    step_idx = rng.integers(0, max(L, 1), R).astype(np.int64)
    return dict(
        seq_lens_encoder=np.where(rng.random(R) < 0.2, rng.integers(1, 30, R), 0).astype(np.int32),
        seq_lens_decoder=rng.choice(np.array([0, 3, 17, I32_MAX - 1], np.int32), R),
        has_running_seqs=np.array([rng.random() < 0.5]),
        step_input_ids=rng.integers(0, vocab, (R, W), dtype=np.int64),
        step_output_ids=rng.integers(0, vocab, (R, W), dtype=np.int64),
        step_output_len=rng.integers(-1, W + 2, R).astype(np.int32),
        stop_flags=rng.random(R) < 0.15,
        seq_lens_this_time=rng.integers(0, W + 1, B).astype(np.int32),
        is_paused=rng.random(R) < 0.1,
        token_ids_all=rng.integers(0, vocab, (R, L), dtype=np.int64),
        prompt_lens=rng.integers(-1, L + 1, R).astype(np.int64),
        step_idx=step_idx,
        end_tokens=rng.choice(vocab + 2, int(rng.integers(0, 3)), replace=False).astype(np.int64),
        max_dec_len=step_idx + rng.integers(-1, W + 2, R),
    )


def run_update(case: dict, place: str) -> dict:
    return run_in_place(unified_update_model_status, case, place)


def check_update(case: dict, place: str) -> None:
    assert_arrays_equal(run_update(case, place), unified_update_ref(case), UPDATE_OUTPUTS)


# ---- naive_update_model_status ----------------------------------------------------------------------

NAIVE_ORDER = SPECS["naive_update_model_status"].tensors
NAIVE_OUTPUTS = SPECS["naive_update_model_status"].written


def naive_update_ref(c: dict) -> dict:
    o = {k: c[k].copy() for k in NAIVE_OUTPUTS}
    N = c["next_tokens"].size
    for b in range(o["seq_lens_this_time"].shape[0]):
        x = int(c["cu_seqlens_q_output"][b + 1]) - 1
        if o["seq_lens_this_time"][b] > 0 and 0 <= x < N:
            o["accept_tokens"][b, 0] = c["next_tokens"].ravel()[x]
            o["accept_num"][b], o["seq_lens_this_time"][b] = 1, 1
        else:
            o["accept_num"][b], o["seq_lens_this_time"][b] = 0, 0
    return o


def random_naive_case(rng: np.random.Generator, B: int, W: int = 3, vocab: int = 5) -> dict:
    slt = np.where(rng.random(B) < 0.2, 0, rng.integers(1, 4, B)).astype(np.int32)
    cu = np.concatenate([[0], np.cumsum(slt)]).astype(np.int32)
    return dict(
        accept_tokens=rng.integers(0, vocab, (B + 1, W), dtype=np.int64),
        accept_num=np.full(B + 1, 7, np.int32),
        seq_lens_this_time=slt,
        next_tokens=rng.integers(
            0, vocab, int(cu[-1]) - int(rng.integers(0, 2) if cu[-1] else 0), dtype=np.int64
        ),
        cu_seqlens_q_output=cu,
    )


def run_naive(case: dict, place: str) -> dict:
    return run_in_place(naive_update_model_status, case, place)


def check_naive(case: dict, place: str) -> None:
    assert_arrays_equal(run_naive(case, place), naive_update_ref(case), NAIVE_OUTPUTS)
