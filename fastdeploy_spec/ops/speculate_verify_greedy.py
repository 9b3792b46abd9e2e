"""Python entry point of the ``speculate_verify_greedy`` op (greedy verification of one decode step)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import OpSpec

SPEC = OpSpec(
    "speculate_verify_greedy",
    tensors=("target_tokens", "accept_tokens", "accept_num", "step_idx", "stop_flags",
             "seq_lens_encoder", "seq_lens_decoder", "draft_tokens", "seq_lens_this_time",
             "max_dec_len", "end_tokens"),
    outputs=frozenset({"accept_tokens", "accept_num"}),
)


def speculate_verify_greedy(
    target_tokens: paddle.Tensor,
    accept_tokens: paddle.Tensor,
    accept_num: paddle.Tensor,
    step_idx: paddle.Tensor,
    stop_flags: paddle.Tensor,
    seq_lens_encoder: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    draft_tokens: paddle.Tensor,
    seq_lens_this_time: paddle.Tensor,
    max_dec_len: paddle.Tensor,
    end_tokens: paddle.Tensor,
) -> None:
    """Accept, per slot, the longest prefix of drafts the target model agrees with, plus its next token.

    Upstream FastDeploy's ``speculate_verify`` in its greedy (top-1) form, with the target's tokens
    given as a padded [B, K + 1] tensor. With ``D = seq_lens_this_time - 1`` drafts (0 for a prefill
    slot) and ``t_j = target_tokens[b, j]``, a slot accepts ``t_0 .. t_{n-1}`` where ``n - 1`` is the
    first ``j`` at which draft ``j + 1`` differs from ``t_j``, ``t_j`` is an end token, or ``j = D``;
    ``n`` is then capped by ``max_dec_len - step_idx``. Empty and stopped slots, and slots with
    ``seq_lens_this_time <= 0`` (not scheduled this step), accept nothing. The op
    only decides; ``speculate_step_update`` applies the result to the slot's state. Runs on the place of
    ``target_tokens``; on the GPU one warp per slot, without host synchronisation.

    Parameters
    ----------
    target_tokens : int64 [>= B, K + 1]
        Row b, column j: the target model's greedy token after input position j of slot b (column 0
        follows the last accepted token, or the prompt for a prefill slot).
    accept_tokens : int64 [>= B, K + 1]
        **Mutated.** Columns ``0 .. n-1`` receive the accepted tokens; later columns keep theirs.
    accept_num : int32 [B]
        **Mutated.** ``n`` per slot (0 for empty and stopped slots).
    step_idx, max_dec_len : int64 [B, 1] or [B]
        Tokens generated so far, and the most a slot may generate.
    stop_flags : bool [B, 1] or [B]
        Set slots accept nothing.
    seq_lens_encoder, seq_lens_decoder : int32 [B]
        ``encoder > 0`` marks a prefill slot (accepts the target's first token), ``decoder == 0``
        (with ``encoder <= 0``) an empty one.
    draft_tokens : int64 [>= B, K + 1]
        Column 0 the last accepted token, columns ``1 .. D`` the drafts.
    seq_lens_this_time : int32 [B]
        ``1 + D`` for decoding slots, <= 0 for a slot not scheduled this step; B is its length.
    end_tokens : int64 [E]
        Tokens that end a sequence (E may be 0); acceptance stops after the first one.

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_verify_greedy
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> accept_tokens, accept_num = t([[0, 0, 0, 0]], np.int64), t([0], np.int32)
    >>> speculate_verify_greedy(
    ...     t([[7, 8, 5, 6]], np.int64),             # the target's tokens
    ...     accept_tokens, accept_num, t([[3]], np.int64), t([[False]], np.bool_),
    ...     t([0], np.int32), t([10], np.int32),
    ...     t([[4, 7, 8, 9]], np.int64),             # last token 4, drafts 7 8 9
    ...     t([4], np.int32), t([[100]], np.int64), t([2], np.int64))
    >>> accept_tokens.numpy().tolist(), accept_num.numpy().tolist()  # 7 8 agree, 9 != 5: take 5
    ([[7, 8, 5, 0]], [3])
    """
    _loader.load().speculate_verify_greedy(*SPEC.args(locals()))
