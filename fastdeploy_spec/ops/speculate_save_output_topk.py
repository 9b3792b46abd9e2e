"""Python entry point of the ``speculate_save_output_topk`` op (SPEC §4)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import BOOL, INT32, INT64, OpSpec

SPEC = OpSpec(
    "speculate_save_output_topk",
    tensors=("sampled_token_ids", "logprob_token_ids", "logprob_scores", "logprob_ranks",
             "token_num_per_batch", "cu_batch_token_offset", "not_need_stop", "seq_lens_decoder",
             "prompt_lens"),
    attrs=(("message_flag", INT32), ("rank_id", INT64), ("save_each_rank", BOOL)),
    same_place=False,
)


def speculate_save_output_topk(
    sampled_token_ids: paddle.Tensor,
    logprob_token_ids: paddle.Tensor,
    logprob_scores: paddle.Tensor,
    logprob_ranks: paddle.Tensor,
    token_num_per_batch: paddle.Tensor,
    cu_batch_token_offset: paddle.Tensor,
    not_need_stop: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    prompt_lens: paddle.Tensor,
    message_flag: int,
    rank_id: int,
    save_each_rank: bool = False,
) -> None:
    """Send a step's accepted tokens with their top-k logprobs to the token processor.

    One message goes to the System V queue named by ``$INFERENCE_MSG_QUEUE_ID`` (default 1, created
    if absent). It carries only the ``B`` slots, their tokens and the ``M`` columns, so its size grows
    with the content; beyond the kernel's ``msgmax`` it travels as fragments that
    ``speculate_get_output_topk`` reassembles. Blocks while the queue is full; a send that cannot
    succeed raises an error naming its cause (and the sysctl when a kernel limit is the cause).
    Each input may be on the CPU or the GPU (GPU inputs are copied to the host on their stream; the
    op waits for them). Nothing is mutated.

    Parameters
    ----------
    sampled_token_ids : int64 [N]
        The accepted tokens of every slot, slot ``i`` from row ``cu_batch_token_offset[i]``.
    logprob_token_ids : int64 [N, M]
        Top-k ids per row (column 0 is ignored: the sampled token is sent). ``M = k + 1 <= 21``.
    logprob_scores : float32 [N, M]
        Logprobs: column 0 the sampled token's, then the top-k.
    logprob_ranks : int64 [N]
        Rank of each sampled token.
    token_num_per_batch : int32 [B]
        Tokens of each slot (``B <= 512``, each ``<= 6``); a slot sends 0 while
        ``seq_lens_decoder < prompt_lens`` (chunked prefill).
    cu_batch_token_offset : int32 [B + 1]
        First row of each slot.
    not_need_stop : bool [1]
        ``[0]`` of the message is ``+INFERENCE_MSG_ID`` when true, else its negative (default 1).
    seq_lens_decoder : int32 [B]
    prompt_lens : int64 [B, 1]
    message_flag : int
        0 .. 255, e.g. 3 for the target model, 4 for the draft model; sent in bits 0..7 of ``[1]``.
    rank_id : int
        A rank > 0 sends nothing unless ``save_each_rank``.
    save_each_rank : bool

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_save_output_topk
    >>> t = paddle.to_tensor
    >>> speculate_save_output_topk(
    ...     t(np.array([7, 8], np.int64)), t(np.zeros([2, 3], np.int64)), t(np.zeros([2, 3], np.float32)),
    ...     t(np.zeros([2], np.int64)), t(np.array([2], np.int32)), t(np.array([0, 2], np.int32)),
    ...     t(np.array([True])), t(np.array([4], np.int32)), t(np.array([[4]], np.int64)), 3, 0)
    """
    _loader.load().speculate_save_output_topk(*SPEC.args(locals()))
