"""Python entry point of the ``top_p_candidates`` op (docs/contract/decode_step.md)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import INT32, OpSpec

SPEC = OpSpec(
    "top_p_candidates",
    tensors=("probs", "top_p", "batch_id_per_token_output"),
    attrs=(("candidates_len", INT32), ("max_seq_len", INT32)),
)


def top_p_candidates(
    probs: paddle.Tensor,
    top_p: paddle.Tensor,
    batch_id_per_token_output: paddle.Tensor,
    candidates_len: int,
    max_seq_len: int,
) -> tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor]:
    """The top-p candidate set of each packed row: what ``verify_draft_tokens``' TOPP checks against.

    FastDeploy's op of this name, newest signature (rows map to slots through batch ids). Row t's
    probabilities are ranked (larger first, equal values by smaller id, NaN last); the best are taken
    until their float running sum reaches ``top_p[batch_id]`` (``sum >= top_p``), at most
    ``candidates_len``; when the sum never reaches it (``top_p >= 1`` with rounding, a NaN) the set is
    all ``min(candidates_len, V)`` picks. Columns past the length hold id 0 and score 0; a row whose
    batch id is outside ``[0, len(top_p))`` is all zeros with length 0.

    Parameters
    ----------
    probs : float32, float16 or bfloat16 [T, V]
    top_p : float32 or probs' dtype, [B] or [B, 1]
    batch_id_per_token_output : int32 [T]
        Slot of each row; < 0 (or >= B) for padding rows.
    candidates_len : int
        C >= 1 (any value; upstream accepts 1..10 and 20..100 in steps of 10).
    max_seq_len : int
        Accepted and unused (upstream's mapping before batch ids).

    Returns
    -------
    verify_scores : [T, C], probs' dtype
    verify_tokens : int64 [T, C]
    actual_candidate_lens : int32 [T]

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import top_p_candidates
    >>> probs = paddle.to_tensor(np.array([[0.1, 0.5, 0.1, 0.3]], np.float32))
    >>> scores, ids, lens = top_p_candidates(probs, paddle.to_tensor(np.array([0.7], np.float32)),
    ...                                      paddle.to_tensor(np.array([0], np.int32)), 3, 0)
    >>> ids.numpy().tolist(), lens.numpy().tolist()  # 0.5 + 0.3 >= 0.7
    ([[1, 3, 0]], [2])
    """
    return tuple(_loader.load().top_p_candidates(*SPEC.args(locals())))
