"""NumPy reference of the logprob transport (docs/contract/transport.md) and the bodies of the test processes.

A *step* is a dict of NumPy arrays holding the inputs of one sender-op call (picklable, so that a
spawned sender process can replay it). ``expected_rows`` says what the message of a step carries;
``apply_message`` is the receive buffers after ``speculate_get_output_topk`` read it.
"""

from __future__ import annotations

import os
import time

import numpy as np

MAX_BSZ, ROWS, COLS = 512, 6, 21
TOKENS_OFFSET = 3 + MAX_BSZ
TOKENS_LEN = TOKENS_OFFSET + MAX_BSZ * ROWS * COLS
SCORES_LEN = MAX_BSZ * ROWS * COLS
RANKS_LEN = MAX_BSZ * ROWS
PREEMPTED = -9
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# Sentinels of fresh receive buffers: distinct from every value a message writes, so an untouched cell
# and a filler cell are told apart.
SENTINEL_TOKEN, SENTINEL_SCORE, SENTINEL_RANK = 2, 7.5, 99


def make_step(
    rng: np.random.Generator,
    *,
    mode: str = "save",
    batch: int,
    columns: int,
    flag: int = 3,
    not_need_stop: bool = True,
    prefill_frac: float = 0.2,
    preempt_frac: float | None = None,
    full: bool = False,
) -> dict:
    """Random inputs of one call of the save op (mode 'save') or of the MTP first-token op ('mtp')."""
    b, m = batch, columns
    if mode == "save":
        token_num = np.full(b, ROWS) if full else rng.integers(0, ROWS + 1, b)
    else:
        token_num = np.full(b, ROWS - 1) if full else rng.integers(0, ROWS, b)
    prompt = rng.integers(1, 50, b)
    prefill = rng.random(b) < (0.0 if full else prefill_frac)
    dec = np.where(
        prefill, prompt - rng.integers(1, 5, b).clip(max=prompt), prompt + rng.integers(0, 9, b)
    )
    if mode == "save":
        cu = np.concatenate([[0], np.cumsum(token_num)])
        n = int(cu[-1]) + 2  # rows beyond the last slot's: the op must not send them
        sampled = rng.integers(0, 150000, n)
    else:
        cu = np.arange(b + 1)  # one logprob row per slot: its first token's
        n = b + 1
        sampled = rng.integers(0, 150000, (b, ROWS))
    ids = rng.integers(0, 150000, (n, m))
    scores = -rng.exponential(3.0, (n, m)).astype(np.float32)
    ranks = rng.integers(0, 1000, n)
    if n >= 3:  # the edges of what travels: int32 extremes, -inf, -0.0
        sampled.reshape(-1)[:2] = [INT32_MAX, INT32_MIN]
        ids[0, -1], ranks[0] = INT32_MIN, INT32_MAX
        scores[0, 0], scores[1, -1] = -np.inf, -0.0
    step = dict(
        mode=mode,
        flag=flag,
        sampled_token_ids=sampled.astype(np.int64),
        logprob_token_ids=ids.astype(np.int64),
        logprob_scores=scores,
        logprob_ranks=ranks.astype(np.int64),
        token_num_per_batch=token_num.astype(np.int32),
        cu_batch_token_offset=cu.astype(np.int32),
        not_need_stop=np.array([not_need_stop]),
        seq_lens_decoder=dec.astype(np.int32),
        prompt_lens=prompt.astype(np.int64).reshape(b, 1),
    )
    if mode == "mtp":
        step["preempted_idx"] = (
            rng.random(b) < (0.2 if preempt_frac is None else preempt_frac)
        ).astype(np.int32)
    elif (
        preempt_frac is not None
    ):  # FastDeploy's current form of the save op (else the one before it)
        step["preempted_idx"] = (rng.random(b) < preempt_frac).astype(np.int32)
    return step


def expected_rows(step: dict):
    """Counts, and per slot the (ids[M], scores[M], rank) rows that its message carries."""
    m = step["logprob_token_ids"].shape[1]
    sampled, ids = step["sampled_token_ids"], step["logprob_token_ids"]
    scores, ranks = step["logprob_scores"], step["logprob_ranks"]
    counts, slots = [], []
    for i, tn in enumerate(step["token_num_per_batch"].tolist()):
        prefill = step["seq_lens_decoder"][i] < step["prompt_lens"][i, 0]
        o = int(step["cu_batch_token_offset"][i])
        preempted = step.get("preempted_idx")
        if preempted is not None and preempted[i] == 1:
            count = PREEMPTED
        elif step["mode"] == "save":
            count = 0 if prefill else tn
        else:
            count = 0 if (prefill or tn == 0) else tn + 1
        rows = []
        for j in range(min(max(count, 0), ROWS)):
            if step["mode"] == "save":
                r = o + j
                rows.append(
                    ([int(sampled[r])] + ids[r, 1:].tolist(), scores[r].copy(), int(ranks[r]))
                )
            elif j == 0:
                rows.append(
                    ([int(sampled[i, 0])] + ids[o, 1:].tolist(), scores[o].copy(), int(ranks[o]))
                )
            else:
                rows.append(([int(sampled[i, j])] + [-1] * (m - 1), np.zeros(m, np.float32), 0))
        counts.append(count)
        slots.append(rows)
    return counts, slots


def fresh_buffers() -> dict:
    return dict(
        tokens=np.full(TOKENS_LEN, SENTINEL_TOKEN, np.int64),
        scores=np.full(SCORES_LEN, SENTINEL_SCORE, np.float32),
        ranks=np.full(RANKS_LEN, SENTINEL_RANK, np.int64),
    )


def receive_tensors() -> list:
    """``fresh_buffers()`` as the receive op's three CPU tensors: [TOKENS_LEN, 1], [SCORES_LEN, 1],
    [RANKS_LEN]. The place is explicit: under a GPU Paddle the default place is the GPU, and a spawned
    child does not inherit the tests' ``paddle.set_device("cpu")``."""
    import paddle

    b, cpu = fresh_buffers(), paddle.CPUPlace()
    return [
        paddle.to_tensor(b["tokens"].reshape(-1, 1), place=cpu),
        paddle.to_tensor(b["scores"].reshape(-1, 1), place=cpu),
        paddle.to_tensor(b["ranks"], place=cpu),
    ]


def apply_message(state: dict, step: dict, msg_id: int = 1) -> dict:
    """The receive buffers after reading the message of `step` into `state` (a new dict)."""
    out = {k: v.copy() for k, v in state.items()}
    b, m = len(step["token_num_per_batch"]), step["logprob_token_ids"].shape[1]
    counts, slots = expected_rows(step)
    tok = np.full((b, ROWS, COLS), -1, np.int64)
    sco = np.zeros((b, ROWS, COLS), np.float32)
    rk = np.zeros((b, ROWS), np.int64)
    for i, rows in enumerate(slots):
        for j, (ids, scores, rank) in enumerate(rows):
            tok[i, j, :m], sco[i, j, :m], rk[i, j] = ids, scores, rank
    t = out["tokens"]
    t[0] = msg_id if step["not_need_stop"][0] else -msg_id
    t[1] = (step["flag"] & 0xFF) | (m << 8)
    t[2] = b
    t[3 : 3 + b] = counts
    t[TOKENS_OFFSET : TOKENS_OFFSET + b * ROWS * COLS] = tok.ravel()
    out["scores"][: b * ROWS * COLS] = sco.ravel()
    out["ranks"][: b * ROWS] = rk.ravel()
    return out


def wire_bytes(step: dict) -> int:
    """Bytes of the message of `step` (payload: header, counts, rows), per the format in logprob_msg.h."""
    counts, _ = expected_rows(step)
    rows = sum(min(max(c, 0), ROWS) for c in counts)
    m = step["logprob_token_ids"].shape[1]
    return 16 + 4 * len(counts) + rows * (8 * m + 4)


# ---- Process bodies (multiprocessing spawn) -----------------------------------------------------------


def input_names(step: dict) -> tuple:
    """The op's positional tensor inputs, in order (the wrapper's own): preempted_idx last when the
    step uses FastDeploy's current form, which passes its last_preempted_idx buffer there."""
    from fastdeploy_spec.ops.speculate_save_output_topk import SPEC

    return SPEC.tensors if "preempted_idx" in step else SPEC.tensors[:-1]


def _tensors(step: dict) -> list:
    import paddle

    return [paddle.to_tensor(step[k], place=paddle.CPUPlace()) for k in input_names(step)]


def send_step(step: dict, rank_id: int = 0, save_each_rank: bool = False) -> None:
    from fastdeploy_spec import ops

    op = (
        ops.speculate_save_output_topk
        if step["mode"] == "save"
        else ops.mtp_save_first_token_with_topk
    )
    op(*_tensors(step), step["flag"], rank_id, save_each_rank)


def sender_main(steps: list, env: dict, results) -> None:
    """Sends every step in order, then reports ('sent', n) or ('error', text)."""
    os.environ.update(env)
    try:
        for step in steps:
            send_step(step)
        results.put(("sent", len(steps)))
    except Exception as e:  # reported to the parent, which fails the test with it
        results.put(("error", repr(e)))


def receiver_main(n: int, env: dict, results, wait_flag: bool, deadline_s: float) -> None:
    """Receives n messages into one set of buffers, reporting a copy of the buffers after each."""
    os.environ.update(env)

    from fastdeploy_spec import ops

    try:
        tokens, scores, ranks = receive_tensors()
        end = time.monotonic() + deadline_s
        got = 0
        while got < n:
            if time.monotonic() > end:
                results.put(("error", f"received {got} of {n} messages before the deadline"))
                return
            ops.speculate_get_output_topk(tokens, scores, ranks, 20, 0, wait_flag)
            t = tokens.numpy().reshape(-1)
            if t[0] == -2:
                time.sleep(0.001)
                continue
            results.put(
                (
                    "msg",
                    dict(
                        tokens=t.copy(),
                        scores=scores.numpy().reshape(-1).copy(),
                        ranks=ranks.numpy().copy(),
                    ),
                )
            )
            got += 1
        results.put(("done", got))
    except Exception as e:
        results.put(("error", repr(e)))
