"""build_output_logprobs end to end (gather + fused logprobs) against the two NumPy references."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from fastdeploy_spec.logprobs import LOGPROBS_MODES, LogprobsBuffers, build_output_logprobs
from tests.helpers import LOGITS_DTYPES, PLACES, as_f32, logits_to_place, make_logits, to_place
from tests.reference.get_accept_tokens import ref_get_accept_tokens_and_logits
from tests.reference.logprobs_topk import ref_logprobs_topk

MIXES = ["decode", "prefill", "mixed"]


def make_step(rng, B, V, K, mix, dtype):
    enc = {"decode": np.zeros(B), "prefill": np.full(B, 5), "mixed": rng.integers(0, 2, B) * 5}[mix]
    enc = enc.astype(np.int32)
    slt = np.where(enc > 0, enc, K + 1).astype(np.int32)
    out_rows = np.where(enc > 0, 1, slt)
    cu_q = np.concatenate([[0], np.cumsum(out_rows)]).astype(np.int32)
    accept = np.where(enc > 0, 1, rng.integers(1, K + 2, B)).astype(np.int32)
    accept_tokens = rng.integers(0, V, (B, K + 1)).astype(np.int64)
    logits = make_logits(rng.standard_normal((int(cu_q[-1]), V)).astype(np.float32) * 3, dtype)
    return dict(
        logits=logits, accept_tokens=accept_tokens, accept=accept, slt=slt, enc=enc, cu_q=cu_q
    )


def reference(step, dtype, K, k, mode, temperature):
    B, V = step["accept"].size, step["logits"].shape[1]
    N = B * (K + 1)
    tokens, rows, cu = ref_get_accept_tokens_and_logits(
        np.zeros(N, np.int64),
        np.zeros((N, V), step["logits"].dtype),
        step["logits"],
        np.zeros(B + 1, np.int32),
        step["cu_q"],
        step["enc"],
        step["accept"],
        step["accept_tokens"],
    )
    raw = mode.endswith("_logits")
    ids, scores, ranks = ref_logprobs_topk(
        as_f32(rows, dtype), tokens, cu, k, None if raw else temperature, raw
    )
    return ids, scores, ranks, cu


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("mode", LOGPROBS_MODES)
@pytest.mark.parametrize("mix", MIXES)
@pytest.mark.parametrize("B", [0, 1, 6])
def test_build_output_logprobs(place, dtype, mode, mix, B):
    K, k, V = 3, 5, 97
    rng = np.random.default_rng([B, len(mix), len(mode)])
    step = make_step(rng, B, V, K, mix, dtype)
    temperature = rng.choice(np.array([0.7, 1.0, 0.0], np.float32), B)
    buffers = LogprobsBuffers.allocate(B, K, V, k, dtype, place=_paddle_place(place))
    out = build_output_logprobs(
        logits_to_place(step["logits"], dtype, place),
        to_place(step["accept_tokens"], place),
        to_place(step["accept"], place),
        to_place(step["slt"], place),
        to_place(step["enc"], place),
        to_place(step["cu_q"], place),
        k,
        logprobs_mode=mode,
        temperature=to_place(temperature, place),
        buffers=buffers,
    )
    ids, scores, ranks, cu = reference(step, dtype, K, k, mode, temperature)
    assert out.logprob_token_ids.shape == [
        B * (K + 1),
        k + 1,
    ] and out.selected_token_ranks.shape == [B * (K + 1)]
    np.testing.assert_array_equal(out.cu_batch_token_offset.numpy(), cu)
    np.testing.assert_array_equal(out.logprob_token_ids.numpy(), ids)
    np.testing.assert_array_equal(out.selected_token_ranks.numpy(), ranks)
    np.testing.assert_allclose(out.logprobs.numpy(), scores, atol=2e-5, rtol=1e-5)  # see SCORE_TOL


def _paddle_place(place):
    return paddle.CUDAPlace(0) if place == "gpu" else paddle.CPUPlace()


def test_allocates_buffers_on_the_logits_place():
    step = make_step(np.random.default_rng(0), 2, 11, 2, "decode", "float32")
    out = build_output_logprobs(
        *(
            to_place(step[n], "cpu")
            for n in ("logits", "accept_tokens", "accept", "slt", "enc", "cu_q")
        ),
        0,
    )
    assert out.logprob_token_ids.shape == [6, 1] and out.logprobs.place.is_cpu_place()


def test_bad_arguments():
    step = make_step(np.random.default_rng(0), 2, 11, 2, "decode", "float32")
    args = [
        to_place(step[n], "cpu")
        for n in ("logits", "accept_tokens", "accept", "slt", "enc", "cu_q")
    ]
    with pytest.raises(ValueError, match="logprobs_mode must be one of"):
        build_output_logprobs(*args, 3, logprobs_mode="logprobs")
    with pytest.raises(ValueError, match="buffers were allocated for another shape"):
        build_output_logprobs(*args, 3, buffers=LogprobsBuffers.allocate(3, 2, 11, 3))
    with pytest.raises(ValueError, match=r"num_logprobs must be in \[0, 20\]"):
        build_output_logprobs(*args, 21)
