"""Python entry point of the ``speculate_compute_cu_batch_offset`` op (docs/contract/logprobs.md)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import INT32, IntAttr, OpSpec

SPEC = OpSpec(
    "speculate_compute_cu_batch_offset",
    tensors=("cu_batch_token_offset", "accept_num"),
    outputs=frozenset({"cu_batch_token_offset"}),
    # max_accept_num: None means no upper clamp (-1 for the binding).
    attrs=(("real_bsz", INT32), ("max_accept_num", IntAttr("int32", 0, 2**31 - 1, none=-1))),
)


def speculate_compute_cu_batch_offset(
    cu_batch_token_offset: paddle.Tensor,
    accept_num: paddle.Tensor,
    real_bsz: int,
    *,
    max_accept_num: int | None = None,
) -> None:
    """Compute the packed offsets of the accepted tokens: the offset step of the gather alone.

    ``cu[0] = 0`` and ``cu[b + 1] = cu[b] + clamp(accept_num[b], 0, max_accept_num)`` for
    ``b < real_bsz``, computed where the data lives (one small kernel on the GPU, no host
    synchronisation). Entries past ``real_bsz`` are untouched.

    Parameters
    ----------
    cu_batch_token_offset : int32 [>= real_bsz + 1]
        **Mutated.**
    accept_num : int32 [>= real_bsz]
    real_bsz : int
        Slots to count, ``>= 0``; with 0 only ``cu[0] = 0`` is written (an empty batch has no
        valid row, and readers take ``cu[real_bsz]`` as the count of valid rows).
    max_accept_num : int, optional
        Upper clamp of each count; pass K + 1 to get the offsets that
        ``speculate_get_accept_tokens_and_logits`` computes. Default: no upper clamp.

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_compute_cu_batch_offset
    >>> cu = paddle.to_tensor(np.zeros(4, np.int32))
    >>> speculate_compute_cu_batch_offset(cu, paddle.to_tensor(np.array([2, 9, -1], np.int32)), 3,
    ...                                   max_accept_num=3)
    >>> cu.numpy().tolist()
    [0, 2, 5, 5]
    """
    _loader.load().speculate_compute_cu_batch_offset(*SPEC.args(locals()))
