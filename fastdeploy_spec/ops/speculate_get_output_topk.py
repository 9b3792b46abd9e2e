"""Python entry point of the ``speculate_get_output_topk`` op (docs/contract/transport.md)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import BOOL, INT32, INT64, QUEUE_ID, OpSpec

SPEC = OpSpec(
    "speculate_get_output_topk",
    tensors=("output_tokens", "output_scores", "output_ranks"),
    outputs=frozenset({"output_tokens", "output_scores", "output_ranks"}),
    attrs=(("real_k", INT32), ("rank_id", INT64), ("wait_flag", BOOL), ("queue_id", QUEUE_ID)),
    same_place=False,
)


def speculate_get_output_topk(
    output_tokens: paddle.Tensor,
    output_scores: paddle.Tensor,
    output_ranks: paddle.Tensor,
    real_k: int,
    rank_id: int,
    wait_flag: bool,
    *,
    queue_id: int | None = None,
) -> None:
    """Receive one logprob message and write it, in place, into upstream's receive layout.

    Reads the queue ``queue_id``, by default the one named by ``$INFERENCE_MSG_QUEUE_ID`` (default
    1), reassembling fragmented
    messages. ``fastdeploy_spec.transport.parse_logprob_output`` turns the buffers into Python values.
    A message that cannot be reassembled (its sender stopped mid-message, foreign data in the queue)
    is dropped with an error; the next call goes on with the next message.

    Parameters
    ----------
    output_tokens : int64 [3 + 512 + 512 * 6 * 21, 1], CPU
        **Mutated.** ``[0]`` stop flag (``-2``: no message), ``[1]`` flag word
        ``message_flag | (M << 8)``, ``[2]`` batch ``b``, ``[3 + i]`` count of slot ``i``, and token
        ``k`` of row ``j`` of slot ``i`` at ``3 + 512 + i * 126 + j * 21 + k``.
    output_scores : float32 [512 * 6 * 21, 1], CPU
        **Mutated.** Logprob of that cell at ``i * 126 + j * 21 + k``.
    output_ranks : int64 [512 * 6], CPU
        **Mutated.** Rank of row ``j`` of slot ``i`` at ``i * 6 + j``.
    real_k : int
        Kept for upstream compatibility (0 .. 20): the message's own ``M`` columns are written.
    rank_id : int
        Kept for upstream compatibility.
    wait_flag : bool
        Block until a message arrives; otherwise return at once, with ``output_tokens[0] = -2`` if
        the queue is empty.
    queue_id : int, optional
        Keyword only: the queue to read (0 .. 255), instead of ``$INFERENCE_MSG_QUEUE_ID``.

    Notes
    -----
    For every slot ``i < b`` the whole 6 x 21 block and the 6 ranks are rewritten: the message's
    values in its rows and columns, token -1 / logprob 0 / rank 0 elsewhere, so nothing of an earlier
    message shows there. Slots ``>= b`` keep their contents (they are outside the message). With no
    message (or on error) only ``[0] = -2``, ``[1] = [2] = 0`` are written.

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_get_output_topk
    >>> from fastdeploy_spec.transport import private_queue, receive_buffers
    >>> tokens, scores, ranks = receive_buffers()     # int64 [3 + 512 + 512 * 126, 1], ...
    >>> with private_queue() as qid:
    ...     speculate_get_output_topk(tokens, scores, ranks, 20, 0, False, queue_id=qid)
    >>> int(tokens[0, 0])   # with an empty queue
    -2
    """
    _loader.load().speculate_get_output_topk(*SPEC.args(locals()))
