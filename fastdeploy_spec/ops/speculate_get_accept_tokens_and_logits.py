"""Python entry point of the ``speculate_get_accept_tokens_and_logits`` op (docs/contract/logprobs.md)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import OpSpec

SPEC = OpSpec(
    "speculate_get_accept_tokens_and_logits",
    tensors=(
        "token_ids",
        "target_logits",
        "logits",
        "cu_batch_token_offset",
        "cu_seqlens_q_output",
        "seq_lens_this_time",
        "seq_lens_encoder",
        "accept_num",
        "accept_tokens",
    ),
    outputs=frozenset({"token_ids", "target_logits", "cu_batch_token_offset"}),
)


def speculate_get_accept_tokens_and_logits(
    token_ids: paddle.Tensor,
    target_logits: paddle.Tensor,
    logits: paddle.Tensor,
    cu_batch_token_offset: paddle.Tensor,
    cu_seqlens_q_output: paddle.Tensor,
    seq_lens_this_time: paddle.Tensor,
    seq_lens_encoder: paddle.Tensor,
    accept_num: paddle.Tensor,
    accept_tokens: paddle.Tensor,
) -> None:
    """Gather the accepted tokens and their target-model logits rows, packed slot after slot.

    Slot ``b`` owns output rows ``cu[b] .. cu[b+1]-1`` with ``cu[b+1] = cu[b] + accept_num[b]``
    (computed where the data lives: no host synchronisation on the GPU). Row ``cu[b] + i`` receives
    token ``accept_tokens[b, i]`` and logits row ``cu_seqlens_q_output[b] + i`` (a prefill slot has
    one output row: only ``i = 0`` gets a logits row). ``accept_num`` is clamped to ``[0, K + 1]``
    everywhere, the offsets included; rows at or past N, and source rows outside ``logits``, are not
    written. Rows ``cu[B] .. N-1`` are left untouched (padding). With N = 0 only the offsets are
    written (Paddle 2.6 included).

    Parameters
    ----------
    token_ids : int64 [N]
        **Mutated.** The accepted tokens, packed.
    target_logits : float32, float16 or bfloat16 [N, V]
        **Mutated.** Their logits rows (a byte copy: the dtype of ``logits``).
    logits : [R, V]
        Target model output rows.
    cu_batch_token_offset : int32 [>= B + 1]
        **Mutated.** The packed offsets, recomputed.
    cu_seqlens_q_output : int32 [>= B]
        First row of each slot in ``logits``.
    seq_lens_this_time, seq_lens_encoder, accept_num : int32 [B] or [B, 1]
        B is ``seq_lens_this_time``'s size; ``seq_lens_encoder > 0`` marks a prefill slot.
    accept_tokens : int64 [>= B, K + 1]

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_get_accept_tokens_and_logits
    >>> t = lambda a, d: paddle.to_tensor(np.array(a, d))
    >>> logits = t(np.arange(12).reshape(6, 2), np.float32)   # 3 decoding slots, 2 rows each
    >>> ids, rows, cu = t([0] * 4, np.int64), t(np.zeros((4, 2)), np.float32), t([0] * 4, np.int32)
    >>> speculate_get_accept_tokens_and_logits(
    ...     ids, rows, logits, cu, t([0, 2, 4, 6], np.int32), t([2, 2, 2], np.int32),
    ...     t([0, 0, 0], np.int32), t([1, 2, 1], np.int32), t([[10, -1], [20, 21], [30, -1]], np.int64))
    >>> ids.numpy().tolist(), cu.numpy().tolist(), rows.numpy()[:, 0].tolist()
    ([10, 20, 21, 30], [0, 1, 3, 4], [0.0, 4.0, 6.0, 8.0])
    """
    _loader.load().speculate_get_accept_tokens_and_logits(*SPEC.args(locals()))
