"""Python entry point of the ``speculate_sample_tokens`` op (docs/contract/sampling.md)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import OpSpec

SPEC = OpSpec(
    "speculate_sample_tokens",
    tensors=(
        "logits",
        "cu_seqlens_q_output",
        "step_idx",
        "seed",
        "temperature",
        "top_p",
        "top_k",
        "sampled_tokens",
        "min_p",
    ),
    outputs=frozenset({"sampled_tokens"}),
    optional=frozenset({"min_p"}),
)


def speculate_sample_tokens(
    logits: paddle.Tensor,
    cu_seqlens_q_output: paddle.Tensor,
    step_idx: paddle.Tensor,
    seed: paddle.Tensor,
    temperature: paddle.Tensor,
    top_p: paddle.Tensor,
    top_k: paddle.Tensor,
    sampled_tokens: paddle.Tensor,
    *,
    min_p: paddle.Tensor | None = None,
) -> None:
    """The target's token of every verification row: temperature, top-k, top-p, min-p, seeded.

    Row ``r`` of slot ``b`` (rows ``cu[b] .. cu[b+1]-1``) is the request's output token
    ``j = step_idx[b] + r - cu[b]``; its token is drawn from the slot's distribution with the Philox
    draw keyed by ``seed[b]`` and counted by ``j``, so a seeded request gets the same token for the
    same logits whatever the step, slot, batch or proposer. Temperature below ``1e-5`` (or +inf, NaN)
    is greedy: the largest logit, the lowest id among equals. CPU and GPU give the same tokens, bit
    for bit. Rows past ``cu[B]`` get -1.

    Parameters
    ----------
    logits : float32, float16 or bfloat16 [N, V]
    cu_seqlens_q_output : int32 [B + 1]
        Row offsets of the slots (B is its size minus one).
    step_idx : int64 [B]
        Output tokens each slot's request has before this step.
    seed : int64 [B]
        The request's seed (the Philox key).
    temperature, top_p : float32 [B]
        ``top_p >= 1`` (or NaN): no top-p; ``<= 0``: only the top entry.
    top_k : int64 [B]
        ``<= 0`` or ``>= V``: no top-k.
    sampled_tokens : int64 [N]
        **Mutated.** The token of each row.
    min_p : float32 [B], optional
        Entries weighing less than ``min_p`` times the largest are out (``<= 0``: none).

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_sample_tokens
    >>> t = lambda a, d: paddle.to_tensor(np.array(a, d))
    >>> logits = t([[0.0, 3.0, 1.0], [5.0, 0.0, 5.0], [0.0, 0.0, 0.0]], np.float32)
    >>> out = t([0, 0, 0], np.int64)
    >>> speculate_sample_tokens(logits, t([0, 1, 2], np.int32), t([4, 9], np.int64),
    ...                         t([7, 7], np.int64), t([0.0, 1.0], np.float32), t([1.0, 1.0], np.float32),
    ...                         t([0, 1], np.int64), out)
    >>> out.numpy().tolist()   # slot 0 greedy; slot 1 top-1 (5.0 twice: the lower id); row 2 padding
    [1, 0, -1]
    """
    _loader.load().speculate_sample_tokens(*SPEC.args(locals()))
