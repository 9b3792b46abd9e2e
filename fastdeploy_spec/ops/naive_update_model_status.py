"""Python entry point of the ``naive_update_model_status`` op (docs/contract/decode_step.md)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import OpSpec

SPEC = OpSpec(
    "naive_update_model_status",
    tensors=(
        "accept_tokens",
        "accept_num",
        "seq_lens_this_time",
        "next_tokens",
        "cu_seqlens_q_output",
    ),
    outputs=frozenset({"accept_tokens", "accept_num", "seq_lens_this_time"}),
)


def naive_update_model_status(
    accept_tokens: paddle.Tensor,
    accept_num: paddle.Tensor,
    seq_lens_this_time: paddle.Tensor,
    next_tokens: paddle.Tensor,
    cu_seqlens_q_output: paddle.Tensor,
) -> None:
    """Scatter plain decoding's sampled tokens into the step's output rows.

    FastDeploy's op of this name (its five tensors, in its order), between the sampler and
    ``unified_update_model_status`` when nothing is speculated. Slot b < B with
    ``seq_lens_this_time > 0`` takes its last packed token ``next_tokens[cu_seqlens_q_output[b + 1]
    - 1]`` into ``accept_tokens[b, 0]``, ``accept_num = 1``, ``seq_lens_this_time = 1``; other slots
    (and one whose index falls outside ``next_tokens``) get ``accept_num = seq_lens_this_time = 0``.
    Any batch; on the GPU one thread per slot, without host synchronisation.

    Parameters
    ----------
    accept_tokens : int64 [>= B, W]
        **Mutated.** Column 0.
    accept_num : int32 [>= B]
        **Mutated.**
    seq_lens_this_time : int32 [B]
        **Mutated.** B is its length.
    next_tokens : int64 [N] or [N, 1]
        The sampler's tokens, packed by ``cu_seqlens_q_output``.
    cu_seqlens_q_output : int32 [>= B + 1]

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import naive_update_model_status
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> acc, num, slt = t([[0, 0], [0, 0]], np.int64), t([9, 9], np.int32), t([3, 0], np.int32)
    >>> naive_update_model_status(acc, num, slt, t([11, 12, 13], np.int64), t([0, 3, 3], np.int32))
    >>> acc.numpy().tolist(), num.numpy().tolist(), slt.numpy().tolist()
    ([[13, 0], [0, 0]], [1, 0], [1, 0])
    """
    _loader.load().naive_update_model_status(*SPEC.args(locals()))
