"""Python entry point of the ``draft_model_accept_preprocess`` op (the last step's verified tokens and
the next step's start in one pass)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops import draft_model_greedy_preprocess as PRE
from fastdeploy_spec.ops._common import OpSpec

# draft_model_greedy_preprocess's tensors with the accepted tokens after max_dec_len; the same
# outputs.
SPEC = OpSpec(
    "draft_model_accept_preprocess",
    tensors=PRE.TENSORS[:6] + ("accept_tokens", "accept_num") + PRE.TENSORS[6:],
    outputs=PRE.SPEC.outputs,
)


def draft_model_accept_preprocess(
    input_ids: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    step_idx: paddle.Tensor,
    pre_ids: paddle.Tensor,
    mtp_draft_num: paddle.Tensor,
    max_dec_len: paddle.Tensor,
    accept_tokens: paddle.Tensor,
    accept_num: paddle.Tensor,
    base_model_seq_lens_this_time: paddle.Tensor,
    base_model_seq_lens_encoder: paddle.Tensor,
    base_model_seq_lens_decoder: paddle.Tensor,
    base_model_stop_flags: paddle.Tensor,
    base_model_max_dec_len: paddle.Tensor,
) -> None:
    """``draft_model_accept`` then ``draft_model_greedy_preprocess``, in one pass over the slots.

    For a proposer that keeps a step's verified tokens until the next step starts (as upstream's
    ``draft_model_greedy_preprocess`` takes ``accept_tokens`` and ``accept_num``): the result is exactly
    ``draft_model_accept(accept_tokens, accept_num, step_idx, pre_ids, mtp_draft_num)`` followed by
    ``draft_model_greedy_preprocess`` on the other tensors (see both), every output bit for bit. On the GPU
    one kernel instead of two, whose reads take one round trip to memory (two for a decoding slot
    that accepted nothing); no host synchronisation.

    Parameters
    ----------
    input_ids, seq_lens_decoder, step_idx, pre_ids, mtp_draft_num, max_dec_len
        **Mutated.** The draft side, as for ``draft_model_greedy_preprocess``.
    accept_tokens : int64 [>= B, K + 1]
    accept_num : int32 [B]
        The verified tokens, as for ``draft_model_accept``.
    base_model_seq_lens_this_time : int32 [B]
        **Mutated.** As for ``draft_model_greedy_preprocess``. B is its length.
    base_model_seq_lens_encoder, base_model_seq_lens_decoder, base_model_stop_flags, base_model_max_dec_len
        The target's slot state, as for ``draft_model_greedy_preprocess``.

    Examples
    --------
    The slot had generated 7 8 and drafted 9 6; the target accepted 9 and gave 2; it still decodes:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import draft_model_accept_preprocess
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> ids, dec, step, num = t([[6]], np.int64), t([4], np.int32), t([[4]], np.int64), t([2], np.int32)
    >>> pre, mdl, slt = t([[-1, 7, 8, 9, 6, -1]], np.int64), t([[0]], np.int64), t([3], np.int32)
    >>> draft_model_accept_preprocess(ids, dec, step, pre, num, mdl, t([[9, 2, 0]], np.int64),
    ...                               t([2], np.int32), slt, t([0], np.int32), t([5], np.int32),
    ...                               t([[False]], np.bool_), t([[50]], np.int64))
    >>> pre.numpy()[0].tolist(), step.numpy()[0, 0].item(), ids.numpy()[0, 0].item()
    ([-1, 7, 8, 9, 2, -1], 4, 2)
    >>> dec.numpy().tolist(), slt.numpy().tolist(), num.numpy().tolist()
    ([5], [1], [0])
    """
    _loader.load().draft_model_accept_preprocess(*SPEC.args(locals()))
