"""NumPy reference of ``speculate_step_update`` (docs/contract/step_ops.md), and its random cases."""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops import speculate_step_update
from tests.helpers import to_place
from tests.reference.verify_greedy import slot_kind


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
        # A finishing slot keeps the lengths of its last step (freed at the next step); its decoder
        # length saturates at INT32_MAX.
        dec[b] = min(grown, np.iinfo(np.int32).max)
        enc[b] = 0
        slt[b] = 0 if finished else 1
        if finished:
            stop[b] = True
    return dict(token_ids_all=ids, step_idx=step, stop_flags=stop, seq_lens_this_time=slt,
                seq_lens_encoder=enc, seq_lens_decoder=dec, draft_tokens=drafts)


# ---- Random cases and the op against the reference ------------------------------------------------


ORDER = ("accept_tokens", "accept_num", "token_ids_all", "prompt_lens", "step_idx", "max_dec_len",
         "end_tokens", "stop_flags", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder",
         "draft_tokens")


MUTATED = ("token_ids_all", "step_idx", "stop_flags", "seq_lens_this_time", "seq_lens_encoder",
           "seq_lens_decoder", "draft_tokens")


PER_SLOT_2D = ("prompt_lens", "step_idx", "max_dec_len", "stop_flags")  # [B, 1], as the runner's


def random_case(rng: np.random.Generator, B: int, K: int, W: int) -> dict:
    """Mixed prefill, decoding, empty, stopped and unscheduled slots; lengths sometimes out of range
    (negative, past the row) to exercise the clamps; a vocabulary of 4 with end tokens inside it."""
    width = K + 1
    prompt_lens = rng.integers(-1, W + 2, (B, 1), dtype=np.int64)
    step_idx = rng.integers(-1, W // 2 + 2, (B, 1), dtype=np.int64)
    return dict(
        accept_tokens=rng.integers(0, 4, (B, width), dtype=np.int64),
        accept_num=rng.integers(-1, width + 3, B).astype(np.int32),
        token_ids_all=rng.integers(10, 20, (B, W), dtype=np.int64),
        prompt_lens=prompt_lens,
        step_idx=step_idx,
        max_dec_len=step_idx + rng.integers(-1, width + 4, (B, 1)),
        end_tokens=rng.choice(5, int(rng.integers(0, 3)), replace=False).astype(np.int64),
        stop_flags=rng.random((B, 1)) < 0.15,
        seq_lens_this_time=rng.integers(-1, width + 2, B).astype(np.int32),
        seq_lens_encoder=np.where(rng.random(B) < 0.25, rng.integers(-2, 30, B), 0).astype(np.int32),
        seq_lens_decoder=rng.choice(np.array([0, 0, 5, 17, -1], np.int32), B),
        draft_tokens=rng.integers(30, 40, (B, width), dtype=np.int64),
    )


def run(case: dict, place: str) -> dict:
    t = {k: to_place(v, place) for k, v in case.items()}
    speculate_step_update(*(t[k] for k in ORDER))
    return {k: t[k].numpy() for k in MUTATED}


def expected(case: dict) -> dict:
    """The reference on a case (per-slot [B, 1] tensors flattened): the mutated tensors by name."""
    flat = {k: v.ravel() if k in PER_SLOT_2D else v for k, v in case.items()}
    return step_update_ref(*(flat[k] for k in ORDER))


def check(case: dict, place: str) -> dict:
    want = expected(case)
    got = run(case, place)
    for k in MUTATED:
        np.testing.assert_array_equal(got[k].reshape(want[k].shape), want[k], err_msg=k)
    return got
