"""Python entry point of the ``unified_update_model_status`` op (docs/contract/decode_step.md)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import OpSpec

_TENSORS = (
    "seq_lens_encoder",
    "seq_lens_decoder",
    "has_running_seqs",
    "step_input_ids",
    "step_output_ids",
    "step_output_len",
    "stop_flags",
    "seq_lens_this_time",
    "is_paused",
    "token_ids_all",
    "prompt_lens",
    "step_idx",
    "end_tokens",
    "max_dec_len",
)
SPEC = OpSpec(
    "unified_update_model_status",
    tensors=_TENSORS,
    # every tensor but the four read-only ones
    outputs=frozenset(_TENSORS) - {"is_paused", "prompt_lens", "end_tokens", "max_dec_len"},
)


def unified_update_model_status(
    seq_lens_encoder: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    has_running_seqs: paddle.Tensor,
    step_input_ids: paddle.Tensor,
    step_output_ids: paddle.Tensor,
    step_output_len: paddle.Tensor,
    stop_flags: paddle.Tensor,
    seq_lens_this_time: paddle.Tensor,
    is_paused: paddle.Tensor,
    token_ids_all: paddle.Tensor,
    prompt_lens: paddle.Tensor,
    step_idx: paddle.Tensor,
    end_tokens: paddle.Tensor,
    max_dec_len: paddle.Tensor,
) -> None:
    """Close a decode step: cut each slot's tokens at an end token or ``max_dec_len``, advance its
    state, append the tokens to its history and say whether any slot still runs.

    FastDeploy's op of this name (its 14 tensors, in its order), after ``verify_draft_tokens`` or
    ``naive_update_model_status``. For a running slot (not stopped, not paused) with
    ``n = step_output_len`` tokens and ``s = step_idx``: the first token that is an end token or
    brings the count to ``max_dec_len`` ends the slot there (a non-end token becomes
    ``end_tokens[0]``); a prefill slot's encoder length moves to its decoder length, a decoding slot's
    decoder length grows by ``n``; ``step_idx = s + n``; token k is written to
    ``token_ids_all[b, prompt_lens[b] + s + k]`` when that column exists (columns past the row's end
    are dropped); ``step_input_ids[b, 0]`` becomes the last token. Stopped or paused slots among the
    first B are cleared. Runs on the place of ``seq_lens_encoder``, without host synchronisation.

    Parameters
    ----------
    seq_lens_encoder, seq_lens_decoder : int32 [R]
        **Mutated.**
    has_running_seqs : bool [1]
        **Mutated.** True when some slot runs on after this step. On the GPU it stays in device
        memory: read it when the step's results are read anyway (the runner copies it with them).
    step_input_ids, step_output_ids : int64 [>= R, W]
        **Mutated.** Column 0 of the first; end-token replacement in the second.
    step_output_len : int32 [R]
        **Mutated.** Tokens of the step, cut at the end.
    stop_flags : bool [R]
        **Mutated.** Set for slots that end or were stopped / paused.
    seq_lens_this_time : int32 [B], B <= R
        **Mutated.** 0 for stopped / paused slots among the first B.
    is_paused : bool [R]
    token_ids_all : int64 [>= R, L]
        **Mutated.** Prompt then generated tokens (generated token k at ``prompt_len + k``).
    prompt_lens, step_idx, max_dec_len : int64 [R]
        ``step_idx`` **mutated**.
    end_tokens : int64 [E] or [E, 1]

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import unified_update_model_status
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> enc, dec, running = t([0], np.int32), t([5], np.int32), t([False], np.bool_)
    >>> inp, out, n = t([[4, 0, 0]], np.int64), t([[7, 2, 9]], np.int64), t([3], np.int32)
    >>> stop, ids, step_idx = t([False], np.bool_), t([[1, 1, 4, 0, 0, 0]], np.int64), t([1], np.int64)
    >>> unified_update_model_status(enc, dec, running, inp, out, n, stop, t([3], np.int32),
    ...     t([False], np.bool_), ids, t([2], np.int64), step_idx, t([2], np.int64), t([50], np.int64))
    >>> n.numpy().tolist(), ids.numpy().tolist(), stop.numpy().tolist(), running.numpy().tolist()
    ([2], [[1, 1, 4, 7, 2, 0]], [True], [False])
    """
    _loader.load().unified_update_model_status(*SPEC.args(locals()))
