"""Python entry point of the ``draft_model_greedy_preprocess`` op (the MTP proposer's step start)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import OpSpec

# The op's tensors (draft_model_accept_preprocess takes accept_tokens and accept_num after
# max_dec_len); the first seven are written in place.
TENSORS = (
    "input_ids",
    "seq_lens_decoder",
    "step_idx",
    "pre_ids",
    "mtp_draft_num",
    "max_dec_len",
    "base_model_seq_lens_this_time",
    "base_model_seq_lens_encoder",
    "base_model_seq_lens_decoder",
    "base_model_stop_flags",
    "base_model_max_dec_len",
)
SPEC = OpSpec("draft_model_greedy_preprocess", tensors=TENSORS, outputs=frozenset(TENSORS[:7]))


def draft_model_greedy_preprocess(
    input_ids: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    step_idx: paddle.Tensor,
    pre_ids: paddle.Tensor,
    mtp_draft_num: paddle.Tensor,
    max_dec_len: paddle.Tensor,
    base_model_seq_lens_this_time: paddle.Tensor,
    base_model_seq_lens_encoder: paddle.Tensor,
    base_model_seq_lens_decoder: paddle.Tensor,
    base_model_stop_flags: paddle.Tensor,
    base_model_max_dec_len: paddle.Tensor,
) -> None:
    """Start a decode step of the MTP draft model: per slot, its draft-model input and state.

    The first six tensors are the draft side's (the proposer's), the ``base_model_*`` ones the target
    runner's share-inputs. For every slot b: the MTP drafts the last step appended to ``pre_ids`` and
    never verified are dropped (``step_idx -= mtp_draft_num``, clamped; ``mtp_draft_num = 0``) and
    ``max_dec_len`` copies the target's. Then, by the target's slot state:

    - decoding (not stopped, ``seq_lens_encoder <= 0``, ``seq_lens_decoder > 0``): ``input_ids`` is
      the newest token ``pre_ids[b, step_idx]`` (0 while ``step_idx == 0`` or if it is negative),
      the draft-side ``seq_lens_decoder`` is the target's, ``base_model_seq_lens_this_time = 1``;
    - prefill (not stopped, ``seq_lens_encoder > 0``, a request starts): the slot is cleared,
      ``pre_ids[b, :] = -1``, ``step_idx = 0``, ``input_ids = 0``, ``seq_lens_decoder = 0``;
    - otherwise (idle): ``input_ids = 0``, ``seq_lens_decoder = 0``.

    Runs on the place of ``input_ids``; on the GPU one kernel, no host synchronisation.

    Parameters
    ----------
    input_ids : int64 [B, 1] or [B]
        **Mutated.** The draft model's input for its first step.
    seq_lens_decoder : int32 [B]
        **Mutated.** Draft side: > 0 exactly for decoding slots (``draft_model_greedy_update`` drafts those).
    step_idx : int64 [B, 1] or [B]
        **Mutated.** Draft side: index of the newest token in ``pre_ids``.
    pre_ids : int64 [>= B, D]
        **Mutated.** Draft side: -1, then the slot's generated tokens.
    mtp_draft_num : int32 [B]
        **Mutated.** Unverified MTP drafts at the end of ``pre_ids``; 0 after the call.
    max_dec_len : int64 [B, 1] or [B]
        **Mutated.** Draft side: a copy of ``base_model_max_dec_len``.
    base_model_seq_lens_this_time : int32 [B]
        **Mutated.** 1 for decoding slots, others untouched. B is its length.
    base_model_seq_lens_encoder, base_model_seq_lens_decoder : int32 [B]
    base_model_stop_flags : bool [B, 1] or [B]
    base_model_max_dec_len : int64 [B, 1] or [B]
        The target's slot state.

    Examples
    --------
    Slot 0 decodes (generated 7 8, then an unverified draft 9); slot 1 starts a request:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import draft_model_greedy_preprocess
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> ids, dec, step = t([[5], [5]], np.int64), t([0, 0], np.int32), t([[3], [2]], np.int64)
    >>> pre = t([[-1, 7, 8, 9], [-1, 4, 4, -1]], np.int64)
    >>> num, mdl, slt = t([1, 0], np.int32), t([[0], [0]], np.int64), t([1, 6], np.int32)
    >>> draft_model_greedy_preprocess(ids, dec, step, pre, num, mdl, slt, t([0, 6], np.int32),
    ...                        t([9, 0], np.int32), t([[False], [False]], np.bool_),
    ...                        t([[50], [60]], np.int64))
    >>> ids.numpy()[:, 0].tolist(), step.numpy()[:, 0].tolist(), pre.numpy()[1].tolist()
    ([8, 0], [2, 0], [-1, -1, -1, -1])
    >>> dec.numpy().tolist(), slt.numpy().tolist(), num.numpy().tolist()
    ([9, 0], [1, 6], [0, 0])
    """
    _loader.load().draft_model_greedy_preprocess(*SPEC.args(locals()))
