"""Python entry point of the ``draft_model_greedy_update`` op (greedy choice of an MTP draft and its writes)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import INT32, OpSpec

# Every tensor after logits is written in place.
_WRITTEN = (
    "input_ids",
    "seq_lens_decoder",
    "step_idx",
    "pre_ids",
    "mtp_draft_num",
    "base_model_draft_tokens",
    "base_model_seq_lens_this_time",
)
SPEC = OpSpec(
    "draft_model_greedy_update",
    tensors=("logits", *_WRITTEN),
    outputs=frozenset(_WRITTEN),
    attrs=(("substep", INT32),),
)


def draft_model_greedy_update(
    logits: paddle.Tensor,
    input_ids: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    step_idx: paddle.Tensor,
    pre_ids: paddle.Tensor,
    mtp_draft_num: paddle.Tensor,
    base_model_draft_tokens: paddle.Tensor,
    base_model_seq_lens_this_time: paddle.Tensor,
    substep: int,
) -> None:
    """Choose draft ``substep`` of every drafting slot from the draft model's logits and record it.

    A slot drafts when the draft-side ``seq_lens_decoder[b] > 0`` (set by
    ``draft_model_greedy_preprocess`` for decoding slots), ``mtp_draft_num[b] == substep`` (it drafted at
    every earlier substep) and its ``pre_ids`` row has room (``step_idx + 1 < D``). Its token is
    the greedy choice ``argmax(logits[b])`` (ties to the lowest id; NaN counts as -inf), read in the
    same pass as the writes: ``step_idx += 1``, ``pre_ids[b, step_idx] = token``,
    ``base_model_draft_tokens[b, substep + 1] = token``, ``mtp_draft_num = substep + 1``,
    ``base_model_seq_lens_this_time = substep + 2``, ``seq_lens_decoder += 1`` and
    ``input_ids[b] = token`` (the draft model's next input). Other slots are untouched and their
    logits rows are not used. Runs on the place of ``logits``; on the GPU one kernel (a block or a
    cluster of blocks per slot), no host synchronisation.

    Parameters
    ----------
    logits : float32, float16 or bfloat16 [>= B, V]
        The draft model's logits, row b for slot b.
    input_ids : int64 [B, 1] or [B]
        **Mutated.** The chosen token (the next draft-model input).
    seq_lens_decoder : int32 [B]
        **Mutated.** Draft side; +1 per draft.
    step_idx : int64 [B, 1] or [B]
        **Mutated.** Draft side; +1 per draft.
    pre_ids : int64 [>= B, D]
        **Mutated.** The draft at the new ``step_idx``.
    mtp_draft_num : int32 [B]
        **Mutated.** ``substep + 1`` for a slot that drafted.
    base_model_draft_tokens : int64 [>= B, K + 1]
        **Mutated.** Column ``substep + 1``.
    base_model_seq_lens_this_time : int32 [B]
        **Mutated.** ``substep + 2`` (the last accepted token and the drafts). B is its length.
    substep : int
        0-based draft-model step, ``0 <= substep <= K - 1``.

    Examples
    --------
    Row 0's logits peak at 3 (tied at ids 3 and 5: the lower wins); slot 1 does not decode:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import draft_model_greedy_update
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> logits = t([[0.1, 0.2, 0.0, 0.9, 0.3, 0.9], [1, 0, 0, 0, 0, 0]], np.float32)
    >>> ids, dec, step = t([[8], [0]], np.int64), t([9, 0], np.int32), t([[2], [0]], np.int64)
    >>> pre, num = t([[-1, 7, 8, -1], [-1, -1, -1, -1]], np.int64), t([0, 0], np.int32)
    >>> drafts, slt = t([[8, -1, -1], [4, -1, -1]], np.int64), t([1, 0], np.int32)
    >>> draft_model_greedy_update(logits, ids, dec, step, pre, num, drafts, slt, 0)
    >>> drafts.numpy().tolist(), pre.numpy()[0].tolist(), slt.numpy().tolist()
    ([[8, 3, -1], [4, -1, -1]], [-1, 7, 8, 3], [2, 0])
    >>> ids.numpy()[:, 0].tolist(), step.numpy()[:, 0].tolist(), dec.numpy().tolist()
    ([3, 0], [3, 0], [10, 0])
    """
    _loader.load().draft_model_greedy_update(*SPEC.args(locals()))
