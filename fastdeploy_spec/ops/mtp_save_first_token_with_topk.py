"""Python entry point of the ``mtp_save_first_token_with_topk`` op (docs/contract/transport.md)."""

from __future__ import annotations

from paddle import Tensor

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops.speculate_save_output_topk import save_spec

SPEC = save_spec("mtp_save_first_token_with_topk", "preempted_idx")


def mtp_save_first_token_with_topk(
    sampled_token_ids: Tensor,
    logprob_token_ids: Tensor,
    logprob_scores: Tensor,
    logprob_ranks: Tensor,
    token_num_per_batch: Tensor,
    cu_batch_token_offset: Tensor,
    not_need_stop: Tensor,
    seq_lens_decoder: Tensor,
    prompt_lens: Tensor,
    preempted_idx: Tensor,
    message_flag: int,
    rank_id: int,
    save_each_rank: bool = False,
    *,
    queue_id: int | None = None,
) -> None:
    """Send each slot's first token with its top-k logprobs, followed by its draft tokens.

    Same queue, message format and errors as ``speculate_save_output_topk``. Slot ``i`` reports
    ``token_num_per_batch[i] + 1`` tokens: ``sampled_token_ids[i, 0]`` with the full top-k of logprob
    row ``cu_batch_token_offset[i]``, then ``sampled_token_ids[i, 1 ..]`` as ids only (their other
    cells arrive as token -1, logprob 0, rank 0). A slot reports 0 tokens during chunked prefill
    (``seq_lens_decoder < prompt_lens``) or when ``token_num_per_batch`` is 0, and the count -9 with no
    token when ``preempted_idx[i] == 1``. Nothing is mutated.

    Parameters
    ----------
    sampled_token_ids : int64 [B, D]
        First token then draft tokens of each slot (``token_num + 1 <= min(D, 6)``).
    logprob_token_ids, logprob_scores : int64 / float32 [R, M]
        Top-k of the first tokens, ``M = k + 1 <= 21``.
    logprob_ranks : int64 [R]
    token_num_per_batch : int32 [B]
    cu_batch_token_offset : int32 [B + 1]
        Logprob row of each slot's first token.
    not_need_stop : bool [1]
    seq_lens_decoder : int32 [B]
    prompt_lens : int64 [B, 1]
    preempted_idx : int32 [B]
        1 marks a preempted slot (upstream passes its ``last_preempted_idx`` here).
    message_flag, rank_id, save_each_rank, queue_id
        As in ``speculate_save_output_topk``.

    Examples
    --------
    On a private queue, read back by the receiving side:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec import ops, transport
    >>> t, (tokens, scores, ranks) = paddle.to_tensor, transport.receive_buffers()
    >>> with transport.private_queue() as qid:
    ...     ops.mtp_save_first_token_with_topk(
    ...         t(np.array([[7, 8, 9]], np.int64)), t(np.zeros([1, 3], np.int64)),
    ...         t(np.zeros([1, 3], np.float32)), t(np.zeros([1], np.int64)), t(np.array([2], np.int32)),
    ...         t(np.array([0, 1], np.int32)), t(np.array([True])), t(np.array([4], np.int32)),
    ...         t(np.array([[4]], np.int64)), t(np.array([0], np.int32)), 4, 0, queue_id=qid)
    ...     ops.speculate_get_output_topk(tokens, scores, ranks, 2, 0, True, queue_id=qid)
    >>> tokens.numpy()[[3, 515, 536, 557], 0].tolist()   # slot 0 sends 3 tokens: 7, 8, 9
    [3, 7, 8, 9]
    """
    _loader.load().mtp_save_first_token_with_topk(*SPEC.args(locals()))
