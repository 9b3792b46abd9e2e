"""Python entry point of the ``speculate_step_update`` op (the state update that closes a decode step)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import OpSpec

SPEC = OpSpec(
    "speculate_step_update",
    tensors=("accept_tokens", "accept_num", "token_ids_all", "prompt_lens", "step_idx", "max_dec_len",
             "end_tokens", "stop_flags", "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder",
             "draft_tokens"),
    outputs=frozenset({"token_ids_all", "step_idx", "stop_flags", "seq_lens_this_time",
                       "seq_lens_encoder", "seq_lens_decoder", "draft_tokens"}),
)


def speculate_step_update(
    accept_tokens: paddle.Tensor,
    accept_num: paddle.Tensor,
    token_ids_all: paddle.Tensor,
    prompt_lens: paddle.Tensor,
    step_idx: paddle.Tensor,
    max_dec_len: paddle.Tensor,
    end_tokens: paddle.Tensor,
    stop_flags: paddle.Tensor,
    seq_lens_this_time: paddle.Tensor,
    seq_lens_encoder: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    draft_tokens: paddle.Tensor,
) -> None:
    """Append each slot's accepted tokens to its history and advance its state.

    For every running slot (prefill or decoding): ``accept_tokens[b, :n]`` (``n = accept_num[b]``)
    are written to ``token_ids_all[b, P + s : P + s + n]`` (``P`` the prompt length, ``s`` the
    generated count), ``step_idx`` grows by ``n``, the last accepted token becomes
    ``draft_tokens[b, 0]``, a prefill slot moves its prompt into ``seq_lens_decoder`` and a decoding
    slot adds ``n``. The slot then either finishes (an end token was accepted, ``max_dec_len`` or
    the row width is reached: ``stop_flags`` set, ``seq_lens_this_time`` 0, the other lengths those
    of this step until the next step frees it, the output kept in ``token_ids_all`` and
    ``step_idx``) or goes on decoding (``seq_lens_this_time`` = 1). Empty slots get
    ``seq_lens_this_time`` 0; a stopped slot (finished earlier, or from outside) is freed; a running slot with
    ``seq_lens_this_time <= 0`` (not scheduled this step) is left as is. Lengths are clamped in
    the op. Runs on the place of ``accept_tokens``; on the GPU one warp per slot, without host
    synchronisation.

    Parameters
    ----------
    accept_tokens : int64 [>= B, K + 1]
        The step's accepted tokens (from ``speculate_verify_greedy``).
    accept_num : int32 [B]
        Accepted count per slot.
    token_ids_all : int64 [>= B, W]
        **Mutated.** Prompt then generated tokens of each slot (docs/contract/ngram.md#ngram_match layout).
    prompt_lens, max_dec_len : int64 [B, 1] or [B]
        Prompt length and generation limit.
    step_idx : int64 [B, 1] or [B]
        **Mutated.** Generated-token count.
    end_tokens : int64 [E]
        Tokens that end a sequence (E may be 0).
    stop_flags : bool [B, 1] or [B]
        **Mutated.** Set when a slot finishes.
    seq_lens_this_time, seq_lens_encoder, seq_lens_decoder : int32 [B]
        **Mutated.** As described above; B is the length of ``seq_lens_this_time``.
    draft_tokens : int64 [>= B, K + 1]
        **Mutated.** Column 0 only: the last accepted token.

    Examples
    --------
    A decoding slot (prompt 1 2 3, generated 9) accepts 4 6, then accepts the end token 2 and
    finishes: stopped, with the lengths of that step until the next step frees it.

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_step_update
    >>> i64 = lambda v: paddle.to_tensor(np.array(v, np.int64))
    >>> i32 = lambda v: paddle.to_tensor(np.array(v, np.int32))
    >>> ids, prompt_lens, max_dec_len, ends = i64([[1, 2, 3, 9, -1, -1, -1, -1]]), i64([[3]]), i64([[100]]), i64([2])
    >>> step_idx, stop = i64([[1]]), paddle.to_tensor(np.array([[False]]))
    >>> slt, enc, dec, drafts = i32([3]), i32([0]), i32([3]), i64([[9, 4, 5]])
    >>> def step(accepted, n):
    ...     speculate_step_update(i64([accepted]), i32([n]), ids, prompt_lens, step_idx, max_dec_len,
    ...                           ends, stop, slt, enc, dec, drafts)
    ...     return ids.numpy()[0].tolist(), step_idx.numpy().item(), stop.numpy().item(), dec.numpy().item()
    >>> step([4, 6, 0], 2)
    ([1, 2, 3, 9, 4, 6, -1, -1], 3, False, 5)
    >>> step([2, 0, 0], 1)
    ([1, 2, 3, 9, 4, 6, 2, -1], 4, True, 6)
    """
    _loader.load().speculate_step_update(*SPEC.args(locals()))
