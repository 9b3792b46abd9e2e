"""NumPy reference of ``speculate_verify_greedy`` (docs/contract/step_ops.md), written from its header,
and its random cases. The slot states (``slot_kind``) are shared with the step update's reference.

A reference takes and returns NumPy arrays (per-slot tensors flattened to [B]); inputs are not modified.
"""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops import speculate_verify_greedy
from tests.helpers import to_place


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


# ---- Random cases and the op against the reference ------------------------------------------------


ORDER = ("target_tokens", "accept_tokens", "accept_num", "step_idx", "stop_flags", "seq_lens_encoder",
         "seq_lens_decoder", "draft_tokens", "seq_lens_this_time", "max_dec_len", "end_tokens")


PER_SLOT_2D = ("step_idx", "stop_flags", "max_dec_len")  # [B, 1], as the runner's buffers


def random_case(rng: np.random.Generator, B: int, K: int, vocab: int) -> dict:
    """A batch mixing prefill, decoding, empty, stopped and unscheduled slots, with drafts that agree
    with the target for a random prefix (a tiny vocabulary adds chance agreements and end tokens)."""
    width = K + 1
    target = rng.integers(0, vocab, (B, width), dtype=np.int64)
    drafts = rng.integers(0, vocab, (B, width), dtype=np.int64)
    for b in range(B):
        agree = int(rng.integers(0, width))
        drafts[b, 1:1 + agree] = target[b, :agree]
    step_idx = rng.integers(0, 40, (B, 1), dtype=np.int64)
    n_end = int(rng.integers(0, 3))
    return dict(
        target_tokens=target,
        accept_tokens=np.full((B, width), -7, np.int64),
        accept_num=np.full(B, -3, np.int32),
        step_idx=step_idx,
        stop_flags=(rng.random((B, 1)) < 0.15),
        seq_lens_encoder=np.where(rng.random(B) < 0.2, rng.integers(-2, 30, B), 0).astype(np.int32),
        seq_lens_decoder=rng.choice(np.array([0, 0, 5, 17, -1], np.int32), B),
        draft_tokens=drafts,
        seq_lens_this_time=rng.integers(-1, width + 3, B).astype(np.int32),
        max_dec_len=step_idx + rng.integers(-2, width + 3, (B, 1)),
        end_tokens=rng.choice(vocab + 2, n_end, replace=False).astype(np.int64),
    )


def run(case: dict, place: str):
    t = {k: to_place(v, place) for k, v in case.items()}
    speculate_verify_greedy(*(t[k] for k in ORDER))
    return t["accept_tokens"].numpy(), t["accept_num"].numpy()


def expected(case: dict):
    """The reference on a case (per-slot [B, 1] tensors flattened): (accept_tokens, accept_num)."""
    flat = {k: v.ravel() if k in PER_SLOT_2D else v for k, v in case.items()}
    return verify_greedy_ref(*(flat[k] for k in ORDER))


def check(case: dict, place: str) -> None:
    want_tokens, want_num = expected(case)
    got_tokens, got_num = run(case, place)
    np.testing.assert_array_equal(got_num, want_num)
    np.testing.assert_array_equal(got_tokens, want_tokens)
