"""NumPy reference of ``verify_draft_tokens`` (docs/contract/decode_step.md), written from the contract,
and its random cases. Per-slot arrays are flat [R]; inputs are not modified."""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops import verify_draft_tokens
from fastdeploy_spec.ops._common import SPECS
from tests.helpers import to_place
from tests.reference.philox import STREAM_VERIFY_TOPP, philox_uniform

TOPP, GREEDY, TARGET_MATCH = 0, 1, 2


def topp_draw(seed: int, position: int, top_p: np.float32, ids, scores, length: int) -> int:
    u = np.float32(
        philox_uniform(np.uint64(seed % 2**64), np.uint64(position % 2**64), STREAM_VERIFY_TOPP)
    )
    u = np.float32(u * np.float32(top_p))
    total = np.float32(0.0)
    for k in range(length):
        total = np.float32(total + np.float32(scores[k]))
        if u <= total:
            return int(ids[k])
    return int(ids[0])


def verify_draft_tokens_ref(c: dict):
    """Returns (step_output_ids, step_output_len) after the op on case ``c``."""
    out = np.full_like(c["step_output_ids"], -1)
    n_out = np.zeros_like(c["step_output_len"])
    R, W = n_out.shape[0], c["step_input_ids"].shape[1]
    B = c["seq_lens_this_time"].shape[0]
    ends = [int(e) for e in c["end_tokens"].ravel()]
    strategy = c["verify_strategy"]
    if strategy == TOPP:
        T, C = c["candidate_ids"].shape
    else:
        T, C = c["target_tokens"].size, 1
    max_dec_len, step_idx, seeds = c.get("max_dec_len"), c.get("step_idx"), c.get("seeds")
    for b in range(min(B, R)):
        if c["is_block_step"][b] or c["stop_flags"][b]:
            continue
        slt, r0 = int(c["seq_lens_this_time"][b]), int(c["cu_seqlens_q_output"][b])
        if slt <= 0 or r0 < 0 or r0 >= T:
            continue
        positions = min(slt, T - r0, W)
        checked = (
            not c["reject_all"] and c["seq_lens_encoder"][b] == 0 and c["reasoning_status"][b] != 1
        )
        D = positions - 1 if checked else 0
        s = int(step_idx[b]) if step_idx is not None else 0
        cur, n = s, 0

        def emit(token, b=b):
            nonlocal cur, n
            cur = min(cur + 1, 2**63 - 1)
            eos = token in ends
            at_max = max_dec_len is not None and cur >= int(max_dec_len[b])
            if at_max and not eos and ends:
                token = ends[0]
            out[b, n] = token
            n += 1
            return eos or at_max

        def accepts(r, draft, b=b):
            if strategy != TOPP:
                return int(c["target_tokens"].ravel()[r]) == draft
            length = min(max(int(c["candidate_lens"][r]), 0), C)
            return draft in [int(x) for x in c["candidate_ids"][r, :length]]

        stopped = False
        i = 0
        while i < D:
            draft = int(c["step_input_ids"][b, i + 1])
            if not c["accept_all"] and not accepts(r0 + i, draft):
                break
            if emit(draft):
                stopped = True
                break
            i += 1
        if not stopped:
            r = r0 + i
            if strategy == TOPP:
                length = min(max(int(c["candidate_lens"][r]), 0), C)
                seed = int(seeds[b]) if seeds is not None else b
                token = topp_draw(
                    seed,
                    s + i,
                    c["topp"][b],
                    c["candidate_ids"][r],
                    c["candidate_scores"][r],
                    length,
                )
            else:
                token = int(c["target_tokens"].ravel()[r])
            emit(token)
        n_out[b] = n
    return out, n_out


# ---- Random cases and the op against the reference ------------------------------------------------

# The op's tensor and attribute orders: the wrapper's own.
TENSORS = SPECS["verify_draft_tokens"].tensors
ATTRS = tuple(name for name, _ in SPECS["verify_draft_tokens"].attrs)


def random_case(
    rng: np.random.Generator,
    B: int,
    K: int,
    vocab: int,
    strategy: int,
    C: int = 3,
    rows: int | None = None,
    accept_all: bool = False,
    reject_all: bool = False,
    seeds: bool = False,
) -> dict:
    """A batch mixing decoding, prefill, blocked, stopped, reasoning and unscheduled slots; drafts that
    agree with the target (or its candidate sets) for a random prefix; end tokens and max_dec_len that
    land mid-draft (a tiny vocabulary makes both frequent)."""
    R = B + (rows if rows is not None else int(rng.integers(0, 3)))
    W = K + 1
    slt = np.zeros(B, np.int32)
    for b in range(B):
        slt[b] = int(rng.integers(1, W + 1)) if rng.random() > 0.1 else int(rng.integers(-1, 1))
    cu = np.concatenate([[0], np.cumsum(np.maximum(slt, 0))]).astype(np.int32)
    T = int(cu[-1])
    inp = rng.integers(0, vocab, (R, W), dtype=np.int64)
    target = rng.integers(0, vocab, T, dtype=np.int64)
    cand_ids = rng.integers(0, vocab, (T, C), dtype=np.int64)
    scores = rng.random((T, C)).astype(np.float32)
    scores /= scores.sum(axis=1, keepdims=True)
    cand_lens = rng.integers(0, C + 2, T).astype(np.int32)
    for b in range(B):
        agree = int(rng.integers(0, W))
        for i in range(min(agree, max(int(slt[b]) - 1, 0))):
            r = cu[b] + i
            target[r] = inp[b, i + 1]
            cand_ids[r, int(rng.integers(0, C))] = inp[b, i + 1]
    step_idx = rng.integers(0, 30, R).astype(np.int64)
    case = dict(
        step_output_ids=np.full((R, W), -7, np.int64),
        step_output_len=np.full(R, -3, np.int32),
        step_input_ids=inp,
        target_tokens=target if strategy != TOPP else None,
        candidate_ids=cand_ids if strategy == TOPP else None,
        candidate_scores=scores if strategy == TOPP else None,
        candidate_lens=cand_lens if strategy == TOPP else None,
        topp=rng.uniform(0.3, 1.0, R).astype(np.float32),
        stop_flags=rng.random(R) < 0.1,
        seq_lens_encoder=np.where(rng.random(R) < 0.15, rng.integers(1, 20, R), 0).astype(np.int32),
        seq_lens_this_time=slt,
        end_tokens=rng.choice(vocab + 2, int(rng.integers(0, 3)), replace=False).astype(np.int64),
        is_block_step=rng.random(R) < 0.1,
        cu_seqlens_q_output=cu[: B + int(rng.integers(0, 2))].copy(),
        reasoning_status=np.where(rng.random(R) < 0.1, 1, rng.integers(0, 3, R)).astype(np.int32),
        max_dec_len=step_idx + rng.integers(-1, W + 2, R),
        step_idx=step_idx,
        max_seq_len=1024,
        verify_window=2,
        verify_strategy=strategy,
        reject_all=reject_all,
        accept_all=accept_all,
    )
    if seeds:
        case["seeds"] = rng.integers(-(2**63), 2**63 - 1, R, dtype=np.int64)
    return case


def run(case: dict, place: str):
    t = {k: (to_place(v, place) if isinstance(v, np.ndarray) else v) for k, v in case.items()}
    seeds = t.get("seeds")
    verify_draft_tokens(*(t[k] for k in TENSORS), *(case[k] for k in ATTRS), seeds=seeds)
    return t["step_output_ids"].numpy(), t["step_output_len"].numpy()


def check(case: dict, place: str) -> None:
    want_ids, want_len = verify_draft_tokens_ref(case)
    got_ids, got_len = run(case, place)
    np.testing.assert_array_equal(got_len, want_len)
    np.testing.assert_array_equal(got_ids, want_ids)
