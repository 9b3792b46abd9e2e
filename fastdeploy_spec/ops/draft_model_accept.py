"""Python entry point of the ``draft_model_accept`` op (the verified tokens join the draft side)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import OpSpec

SPEC = OpSpec(
    "draft_model_accept",
    tensors=("accept_tokens", "accept_num", "step_idx", "pre_ids", "mtp_draft_num"),
    outputs=frozenset({"step_idx", "pre_ids", "mtp_draft_num"}),
)


def draft_model_accept(
    accept_tokens: paddle.Tensor,
    accept_num: paddle.Tensor,
    step_idx: paddle.Tensor,
    pre_ids: paddle.Tensor,
    mtp_draft_num: paddle.Tensor,
) -> None:
    """Replace each slot's unverified MTP drafts in ``pre_ids`` by the tokens the target accepted.

    For every slot b: ``s = step_idx - mtp_draft_num`` (clamped: the drafts are dropped),
    ``n = accept_num[b]`` clamped to ``[0, min(K + 1, D - 1 - s)]``;
    ``pre_ids[b, s + 1 : s + 1 + n] = accept_tokens[b, :n]``, ``step_idx = s + n``,
    ``mtp_draft_num = 0``. ``accept_num == 0`` only drops the drafts. Runs on the place of
    ``accept_tokens``; on the GPU one kernel, no host synchronisation.

    Parameters
    ----------
    accept_tokens : int64 [>= B, K + 1]
        The step's verified tokens (``verify_draft_tokens``).
    accept_num : int32 [B]
        Verified tokens per slot. B is its length.
    step_idx : int64 [B, 1] or [B]
        **Mutated.** Draft side: index of the newest token in ``pre_ids``.
    pre_ids : int64 [>= B, D]
        **Mutated.** Draft side: -1, then the slot's generated tokens.
    mtp_draft_num : int32 [B]
        **Mutated.** Unverified MTP drafts at the end of ``pre_ids``; 0 after the call.

    Examples
    --------
    The slot had generated 7 8 and drafted 9 6; the target accepted 9, then gave 2:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import draft_model_accept
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> pre, step, num = t([[-1, 7, 8, 9, 6, -1]], np.int64), t([[4]], np.int64), t([2], np.int32)
    >>> draft_model_accept(t([[9, 2, 0]], np.int64), t([2], np.int32), step, pre, num)
    >>> pre.numpy()[0].tolist(), step.numpy()[0, 0].item(), num.numpy().tolist()
    ([-1, 7, 8, 9, 2, -1], 4, [0])
    """
    _loader.load().draft_model_accept(*SPEC.args(locals()))
