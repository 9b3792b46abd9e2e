"""Python entry points of FastDeploy's MTP bookkeeping ops, under their upstream names and contracts
(docs/contract/mtp_state.md): ``draft_model_preprocess``, ``draft_model_update``,
``draft_model_postprocess``, ``draft_model_set_value_by_flags``, ``eagle_get_hidden_states`` and
``eagle_get_self_hidden_states``. Each takes upstream's positional arguments, runs on the place of its
tensors and never copies ``not_need_stop`` to the host: a caller reads it where it needs it (e.g.
``bool(not_need_stop.numpy()[0])`` outside a captured graph, or an async copy to pinned memory).
"""

from __future__ import annotations

from typing import Tuple

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import BOOL, INT32, OpSpec

_PREPROCESS_TENSORS = (
    "draft_tokens",
    "input_ids",
    "stop_flags",
    "seq_lens_this_time",
    "seq_lens_encoder",
    "seq_lens_decoder",
    "step_idx",
    "not_need_stop",
    "pre_ids",
    "accept_tokens",
    "accept_num",
    "target_model_seq_lens_encoder",
    "target_model_seq_lens_decoder",
    "target_model_step_idx",
    "target_model_stop_flags",
    "max_dec_len",
    "target_model_draft_tokens",
)
PREPROCESS = OpSpec(
    "draft_model_preprocess",
    tensors=_PREPROCESS_TENSORS,
    outputs=frozenset(_PREPROCESS_TENSORS[:9]),  # draft_tokens .. pre_ids
    attrs=(("num_model_step", INT32), ("is_splitwise_prefill", BOOL)),
)

_UPDATE_TENSORS = (
    "inter_next_tokens",
    "draft_tokens",
    "pre_ids",
    "seq_lens_this_time",
    "seq_lens_encoder",
    "seq_lens_decoder",
    "step_idx",
    "cu_seqlens_q_output",
    "stop_flags",
    "not_need_stop",
    "max_dec_len",
    "end_ids",
    "base_model_draft_tokens",
)
UPDATE = OpSpec(
    "draft_model_update",
    tensors=_UPDATE_TENSORS,
    # all but the four it only reads
    outputs=frozenset(_UPDATE_TENSORS)
    - {"inter_next_tokens", "cu_seqlens_q_output", "max_dec_len", "end_ids"},
    attrs=(("max_seq_len", INT32), ("substep", INT32)),
)

POSTPROCESS = OpSpec(
    "draft_model_postprocess",
    tensors=(
        "base_model_draft_tokens",
        "base_model_seq_lens_this_time",
        "base_model_seq_lens_encoder",
        "base_model_stop_flags",
    ),
    outputs=frozenset(
        {"base_model_draft_tokens", "base_model_seq_lens_this_time", "base_model_stop_flags"}
    ),
)

SET_VALUE_BY_FLAGS = OpSpec(
    "draft_model_set_value_by_flags",
    tensors=(
        "draft_tokens",
        "pre_ids_all",
        "stop_flags",
        "seq_lens_this_time",
        "seq_lens_encoder",
        "seq_lens_decoder",
        "step_idx",
    ),
    outputs=frozenset({"pre_ids_all"}),
)

HIDDEN = OpSpec(
    "eagle_get_hidden_states",
    tensors=(
        "input",
        "seq_lens_this_time",
        "seq_lens_encoder",
        "seq_lens_decoder",
        "stop_flags",
        "accept_nums",
        "base_model_seq_lens_this_time",
        "base_model_seq_lens_encoder",
    ),
    attrs=(("actual_draft_token_num", INT32),),
)

SELF_HIDDEN = OpSpec(
    "eagle_get_self_hidden_states",
    tensors=("input", "last_seq_lens_this_time", "seq_lens_this_time", "seq_lens_encoder"),
)


def draft_model_preprocess(
    draft_tokens,
    input_ids,
    stop_flags,
    seq_lens_this_time,
    seq_lens_encoder,
    seq_lens_decoder,
    step_idx,
    not_need_stop,
    pre_ids,
    accept_tokens,
    accept_num,
    target_model_seq_lens_encoder,
    target_model_seq_lens_decoder,
    target_model_step_idx,
    target_model_stop_flags,
    max_dec_len,
    target_model_draft_tokens,
    num_model_step: int,
    is_splitwise_prefill: bool,
) -> None:
    """Initialise the draft side's state ("shadow state") of every slot from the target's.

    For slot b: columns 1.. of ``target_model_draft_tokens[b]`` become -1. The slot is skipped when
    the target stopped, or (unless ``is_splitwise_prefill``) when ``target_model_step_idx +
    num_model_step >= max_dec_len``: then ``stop_flags = True`` and ``seq_lens_this_time``,
    ``seq_lens_decoder``, ``seq_lens_encoder``, ``step_idx`` become 0. Otherwise ``stop_flags =
    False`` and, with ``enc = seq_lens_encoder[b]`` (draft side):

    * ``enc > 0`` (prefill): ``pre_ids[b, 0]`` and ``input_ids[b, enc - 1]`` get the target's first
      token ``accept_tokens[b, 0]``, ``seq_lens_this_time = enc``, ``step_idx =
      target_model_step_idx - 1``;
    * else (decode), with ``n = accept_num[b]``: ``draft_tokens[b, :n] = accept_tokens[b, :n]``, the
      same tokens at ``pre_ids[b, target_step - n .. target_step - 1]``, ``seq_lens_decoder =
      target_model_seq_lens_decoder - n``, ``step_idx = target_step - n``, ``seq_lens_this_time = n``.

    ``not_need_stop[0]`` becomes True when any slot runs. Indices are clamped (a write outside a
    tensor is skipped). On the GPU one kernel, no host synchronisation.

    Parameters
    ----------
    draft_tokens : int64 [>= B, K + 1]
        **Mutated.** Draft side: the draft model's input tokens of a decoding slot.
    input_ids : int64 [>= B, L]
        **Mutated.** Draft side: the prompt rows (prefill).
    stop_flags, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, step_idx
        **Mutated.** Draft side, [B] (bool, int32, int32, int32, int64). B is the length of
        ``seq_lens_this_time``.
    not_need_stop : bool [1]
        **Mutated.** On the tensors' place.
    pre_ids : int64 [>= B, D]
        **Mutated.**
    accept_tokens : int64 [>= B, K + 1]; accept_num : int32 [B]
        The target's accepted tokens of the last step.
    target_model_seq_lens_encoder, target_model_seq_lens_decoder, target_model_step_idx, target_model_stop_flags : [B]
        The target's state (int32, int32, int64, bool).
    max_dec_len : int64 [B]
    target_model_draft_tokens : int64 [>= B, K + 1]
        **Mutated.** Columns 1.. -> -1.
    num_model_step : int
    is_splitwise_prefill : bool

    Examples
    --------
    A decoding slot whose target accepted 5 6 at target step 4:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import draft_model_preprocess
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> draft, pre, nns = t([[0, 0, 0]], np.int64), t([[-1, 1, 2, 0, 0, 0]], np.int64), t([False], bool)
    >>> slt, enc, dec, step = t([0], np.int32), t([0], np.int32), t([0], np.int32), t([0], np.int64)
    >>> tdraft = t([[5, 9, 9]], np.int64)
    >>> draft_model_preprocess(draft, t([[0, 0]], np.int64), t([False], bool), slt, enc, dec, step, nns,
    ...                        pre, t([[5, 6, -1]], np.int64), t([2], np.int32), t([0], np.int32),
    ...                        t([7], np.int32), t([4], np.int64), t([False], bool),
    ...                        t([100], np.int64), tdraft, 1, False)
    >>> pre.numpy()[0].tolist(), slt.numpy().tolist(), step.numpy().tolist(), dec.numpy().tolist()
    ([-1, 1, 5, 6, 0, 0], [2], [2], [5])
    >>> draft.numpy()[0, :2].tolist(), tdraft.numpy()[0].tolist(), bool(nns.numpy()[0])
    ([5, 6], [5, -1, -1], True)
    """
    _loader.load().draft_model_preprocess(*PREPROCESS.args(locals()))


def draft_model_update(
    inter_next_tokens,
    draft_tokens,
    pre_ids,
    seq_lens_this_time,
    seq_lens_encoder,
    seq_lens_decoder,
    step_idx,
    cu_seqlens_q_output,
    stop_flags,
    not_need_stop,
    max_dec_len,
    end_ids,
    base_model_draft_tokens,
    max_seq_len: int,
    substep: int,
) -> None:
    """Record one draft-model step's sampled tokens (``inter_next_tokens``, one per active slot).

    The slots with ``seq_lens_this_time > 0`` are active; the i-th of them (in slot order) takes
    ``inter_next_tokens[i]`` (-1 past its end). An active stopped slot gets -1 in
    ``draft_tokens[b, 0]`` and ``base_model_draft_tokens[b, substep + 1]``, ``seq_lens_this_time =
    seq_lens_encoder = 0``. A running one with ``seq_lens_encoder > 0`` (prefill) takes the token at
    ``pre_ids[b, 1]`` and ``draft_tokens[b, 0]``, ``step_idx += 1``, ``seq_lens_decoder += enc``,
    ``seq_lens_encoder = 0``, and at ``base_model_draft_tokens[b, substep + 1]`` if ``step_idx <
    max_dec_len``; one with ``seq_lens_decoder > 0`` at ``step_idx >= max_dec_len - 1`` writes -1 to
    ``base_model_draft_tokens[b, substep + 1]`` only, else ``seq_lens_decoder`` and ``step_idx``
    grow by ``seq_lens_this_time`` and the token goes to ``draft_tokens[b, 0]``,
    ``base_model_draft_tokens[b, substep + 1]`` and ``pre_ids[b, step_idx]``. Running slots end
    with ``seq_lens_this_time = 1``. ``not_need_stop[0]`` = (active stopped slots < B).
    ``cu_seqlens_q_output``, ``end_ids`` and ``max_seq_len`` are upstream's and unused (as there).
    On the GPU one kernel, no host synchronisation.

    Parameters
    ----------
    inter_next_tokens : int64 [N] or [N, 1]
    draft_tokens, pre_ids : int64 [>= B, K + 1], [>= B, D]
        **Mutated.**
    seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, step_idx : [B]
        **Mutated.** int32, int32, int32, int64.
    cu_seqlens_q_output : int32 vector
    stop_flags : bool [B]
        Declared in place (as upstream), not written.
    not_need_stop : bool [1]
        **Mutated.**
    max_dec_len : int64 [B]; end_ids : int64 vector
    base_model_draft_tokens : int64 [>= B, K + 1]
        **Mutated.** Column ``substep + 1``.
    max_seq_len, substep : int
        ``0 <= substep <= K - 1``.

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import draft_model_update
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> pre, base = t([[-1, 5, 6, 0, 0]], np.int64), t([[6, -1, -1]], np.int64)
    >>> slt, step, nns = t([2], np.int32), t([2], np.int64), t([False], bool)
    >>> draft_model_update(t([8], np.int64), t([[5, 6, 0]], np.int64), pre, slt, t([0], np.int32),
    ...                    t([5], np.int32), step, t([0, 1], np.int32), t([False], bool), nns,
    ...                    t([100], np.int64), t([2], np.int64), base, 64, 0)
    >>> pre.numpy()[0].tolist(), base.numpy()[0].tolist(), slt.numpy().tolist(), step.numpy().tolist()
    ([-1, 5, 6, 0, 8], [6, 8, -1], [1], [4])
    """
    _loader.load().draft_model_update(*UPDATE.args(locals()))


def draft_model_postprocess(
    base_model_draft_tokens,
    base_model_seq_lens_this_time,
    base_model_seq_lens_encoder,
    base_model_stop_flags,
) -> None:
    """The target's ``seq_lens_this_time`` for its next step: for a running decoding slot
    (``seq_lens_encoder == 0``) the count of its draft tokens that are not -1, for a stopped one 0;
    prefill slots keep theirs. Only ``base_model_seq_lens_this_time`` is written (the other two are
    declared in place, as upstream declares them).

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import draft_model_postprocess
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> slt = t([9, 9, 9], np.int32)
    >>> draft_model_postprocess(t([[4, 5, -1], [4, 5, 6], [1, 2, 3]], np.int64), slt,
    ...                         t([0, 3, 0], np.int32), t([False, False, True], bool))
    >>> slt.numpy().tolist()
    [2, 9, 0]
    """
    _loader.load().draft_model_postprocess(*POSTPROCESS.args(locals()))


def draft_model_set_value_by_flags(
    draft_tokens,
    pre_ids_all,
    stop_flags,
    seq_lens_this_time,
    seq_lens_encoder,
    seq_lens_decoder,
    step_idx,
) -> None:
    """Write a running slot's drafts into ``pre_ids_all``: with ``n = seq_lens_this_time[b]`` (not
    0) and ``s = step_idx[b]``, ``pre_ids_all[b, s - n + 1 .. s] = draft_tokens[b, :n]`` when
    ``s > 1``, ``pre_ids_all[b, 1] = draft_tokens[b, 0]`` when ``s == 1``; then
    ``seq_lens_this_time[b] = 1``. seq_lens_this_time is written although only ``pre_ids_all`` is
    declared in place: upstream's kernel does the same.

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import draft_model_set_value_by_flags
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> pre, slt = t([[-1, 3, 0, 0, 0]], np.int64), t([2], np.int32)
    >>> draft_model_set_value_by_flags(t([[7, 8, 0]], np.int64), pre, t([False], bool), slt,
    ...                                t([0], np.int32), t([4], np.int32), t([3], np.int64))
    >>> pre.numpy()[0].tolist(), slt.numpy().tolist()
    ([-1, 3, 7, 8, 0], [1])
    """
    _loader.load().draft_model_set_value_by_flags(*SET_VALUE_BY_FLAGS.args(locals()))


def eagle_get_hidden_states(
    input,
    seq_lens_this_time,
    seq_lens_encoder,
    seq_lens_decoder,
    stop_flags,
    accept_nums,
    base_model_seq_lens_this_time,
    base_model_seq_lens_encoder,
    actual_draft_token_num: int,
) -> Tuple[paddle.Tensor, paddle.Tensor]:
    """The target's hidden states of the tokens the draft model reads, bit for bit.

    ``input`` [N, H] holds the target's tokens slot after slot. Slot b contributes
    ``seq_lens_encoder`` rows in and out when it is in prefill (draft side), none out when its draft
    side stopped (``seq_lens_this_time == 0``; its ``base_model_seq_lens_this_time`` rows are
    skipped), else its first ``accept_nums[b]`` rows of ``base_model_seq_lens_this_time``. Returns
    ``out`` [N, H] (``input``'s dtype: float16, bfloat16 or float32; the rows past the kept ones are
    zero) and ``output_token_num`` int32 [1] (the rows kept), both on ``input``'s place.

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import eagle_get_hidden_states
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> x = t(np.arange(10).reshape(5, 2), np.float32)   # slot 0: 3 target tokens, slot 1: 2
    >>> out, n = eagle_get_hidden_states(x, t([2, 1], np.int32), t([0, 0], np.int32), t([5, 5], np.int32),
    ...                                  t([False, False], bool), t([2, 1], np.int32), t([3, 2], np.int32),
    ...                                  t([0, 0], np.int32), 2)
    >>> out.numpy()[:, 0].tolist(), n.numpy().tolist()
    ([0.0, 2.0, 6.0, 0.0, 0.0], [3])
    """
    out, count = _loader.load().eagle_get_hidden_states(*HIDDEN.args(locals()))
    return out, count


def eagle_get_self_hidden_states(
    input, last_seq_lens_this_time, seq_lens_this_time, seq_lens_encoder
) -> Tuple[paddle.Tensor, paddle.Tensor]:
    """The draft model's own hidden state of each running slot (one row: its first in prefill, its
    last, of ``last_seq_lens_this_time``, in decode), bit for bit; returns ``out`` [N, H] (zero past
    the kept rows) and ``output_token_num`` int32 [1].

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import eagle_get_self_hidden_states
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> x = t(np.arange(4).reshape(4, 1), np.float32)   # slot 0: 3 rows last step, slot 1: 1
    >>> out, n = eagle_get_self_hidden_states(x, t([3, 1], np.int32), t([1, 1], np.int32), t([0, 0], np.int32))
    >>> out.numpy()[:, 0].tolist(), n.numpy().tolist()
    ([2.0, 3.0, 0.0, 0.0], [2])
    """
    out, count = _loader.load().eagle_get_self_hidden_states(*SELF_HIDDEN.args(locals()))
    return out, count
