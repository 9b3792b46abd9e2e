"""A whole sampled decode step captured in a CUDA graph: speculate_sample_tokens (the target's token at
every row, from its logits), verify_draft_tokens (TARGET_MATCH) and unified_update_model_status.
Replays equal eager runs (GPU and CPU), and a replay after the update draws new tokens: the draw's
position is read from step_idx, which the captured update advanced on the device."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from benchmarks.gpu_timer import Graph
from fastdeploy_spec.ops import (
    VerifyStrategy,
    speculate_sample_tokens,
    verify_draft_tokens,
)
from tests.helpers import RUNNER_NAMES, call_named, to_place, unified_update

pytestmark = pytest.mark.gpu

S, K, V, P, W = 8, 3, 300, 5, 64
K1 = K + 1
SAMPLED = (
    "target_tokens",
    "accept_tokens",
    "accept_num",
    "step_idx",
    "token_ids_all",
    "seq_lens_decoder",
    "seq_lens_this_time",
    "stop_flags",
    "draft_tokens",
)


def state(rng: np.random.Generator, logits_dtype=np.float32) -> dict:
    """S decoding slots with K drafts each (drafts often equal to the likely token), their logits
    rows, sampling parameters and seeds."""
    step = rng.integers(1, 10, (S, 1)).astype(np.int64)
    ids = np.full((S, W), -1, np.int64)
    ids[:, :P] = rng.integers(1, V, (S, P))
    for b in range(S):
        ids[b, P : P + step[b, 0]] = rng.integers(1, V, step[b, 0])
    logits = rng.normal(0, 1, (S * K1, V)).astype(np.float32)
    logits[:, 0] = -30.0  # the end token is never drawn: every slot keeps decoding
    likely = rng.integers(1, V, S * K1)
    logits[np.arange(S * K1), likely] += 4.0
    drafts = np.concatenate(
        [ids[np.arange(S), P + step[:, 0] - 1][:, None], likely.reshape(S, K1)[:, :K]], 1
    )
    return dict(
        logits=logits.astype(logits_dtype),
        cu_seqlens_q_output=np.arange(0, S * K1 + 1, K1, dtype=np.int32),
        step_idx=step,
        infer_seed=rng.integers(0, 2**62, S).astype(np.int64),
        temperature=rng.choice([0.0, 0.7, 1.0], S).astype(np.float32),
        top_p=np.full(S, 0.95, np.float32),
        top_k=rng.choice([0, 20], S).astype(np.int64),
        target_tokens=np.full(S * K1, -1, np.int64),
        accept_tokens=np.full((S, K1), -1, np.int64),
        accept_num=np.zeros(S, np.int32),
        draft_tokens=drafts.astype(np.int64),
        stop_flags=np.zeros((S, 1), bool),
        seq_lens_encoder=np.zeros(S, np.int32),
        seq_lens_decoder=(P + step[:, 0] - 1).astype(np.int32),
        seq_lens_this_time=np.full(S, K1, np.int32),
        is_block_step=np.zeros(S, bool),
        reasoning_status=np.zeros(S, np.int32),
        end_tokens=np.array([0], np.int64),
        max_dec_len=np.full((S, 1), 1000, np.int64),
        prompt_lens=np.full((S, 1), P, np.int64),
        token_ids_all=ids,
        has_running_seqs=np.zeros(1, bool),
    )


def sampled_step(t: dict) -> None:
    speculate_sample_tokens(
        t["logits"],
        t["cu_seqlens_q_output"],
        t["step_idx"],
        t["infer_seed"],
        t["temperature"],
        t["top_p"],
        t["top_k"],
        t["target_tokens"],
    )
    names = dict(RUNNER_NAMES, topp="top_p")
    call_named(verify_draft_tokens, t, W, 0, VerifyStrategy.TARGET_MATCH, False, False, names=names)
    unified_update(t)


def eager(st: dict, place: str) -> dict:
    t = {k: to_place(v, place) for k, v in st.items()}
    sampled_step(t)
    return {k: t[k].numpy() for k in SAMPLED}


def copy_into(buffers: dict, st: dict, skip=()) -> None:
    for k, v in st.items():
        if k not in skip:
            buffers[k].copy_(
                paddle.to_tensor(np.ascontiguousarray(v), place=paddle.CPUPlace()), True
            )


@pytest.mark.parametrize("backend", ["cudart", "paddle"])
def test_sampled_step_replays_like_eager_and_draws_anew(backend):
    rng = np.random.default_rng(51)
    states = [state(rng) for _ in range(3)]
    buffers = {k: to_place(v, "gpu") for k, v in states[0].items()}
    sampled_step(buffers)  # warm-up
    graph = Graph(lambda: sampled_step(buffers), backend=backend, side_stream=backend == "cudart")

    for st in states:
        copy_into(buffers, st)
        graph.replay()
        want, want_cpu = eager(st, "gpu"), eager(st, "cpu")
        for k in SAMPLED:
            np.testing.assert_array_equal(
                buffers[k].numpy(), want[k], err_msg=f"replay vs eager: {k}"
            )
            np.testing.assert_array_equal(want[k], want_cpu[k], err_msg=f"GPU vs CPU: {k}")

    # The same inputs again, but step_idx as the captured update left it: new positions, new draws.
    st = states[0]
    copy_into(buffers, st)
    graph.replay()
    first = buffers["target_tokens"].numpy().copy()
    advanced = buffers["step_idx"].numpy().copy()
    assert (advanced > st["step_idx"]).all()
    copy_into(buffers, st, skip=("step_idx",))
    graph.replay()
    second = buffers["target_tokens"].numpy()
    sampled_rows = np.repeat(st["temperature"] > 0, K1)
    assert (second[sampled_rows] != first[sampled_rows]).mean() > 0.3  # fresh randomness
    np.testing.assert_array_equal(second[~sampled_rows], first[~sampled_rows])  # greedy rows agree
    want = eager(dict(st, step_idx=advanced), "cpu")
    np.testing.assert_array_equal(second, want["target_tokens"])
