"""Python entry point of the ``speculate_save_output_topk`` op (docs/contract/transport.md)."""

from __future__ import annotations

import numpy as np
import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import BOOL, INT32, INT64, QUEUE_ID, OpSpec


def save_spec(op: str, preempted: str) -> OpSpec:
    """The OpSpec of a save op: the two take the same tensors and attributes (one binding,
    ``custom_ops/logprob_msg/save_ops.cc``) and differ in the name of their last tensor."""
    return OpSpec(
        op,
        tensors=(
            "sampled_token_ids",
            "logprob_token_ids",
            "logprob_scores",
            "logprob_ranks",
            "token_num_per_batch",
            "cu_batch_token_offset",
            "not_need_stop",
            "seq_lens_decoder",
            "prompt_lens",
            preempted,
        ),
        attrs=(
            ("message_flag", INT32),
            ("rank_id", INT64),
            ("save_each_rank", BOOL),
            ("queue_id", QUEUE_ID),
        ),
        same_place=False,
    )


SPEC = save_spec("speculate_save_output_topk", "preempted_idx")

_ATTRS = ("message_flag", "rank_id", "save_each_rank")


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
    *args: object,
    preempted_idx: paddle.Tensor | None = None,
    last_preempted_idx: paddle.Tensor | None = None,
    message_flag: int | None = None,
    rank_id: int | None = None,
    save_each_rank: bool = False,
    queue_id: int | None = None,
) -> None:
    """Send a step's accepted tokens with their top-k logprobs to the token processor.

    Both of upstream's forms are accepted: ``(..., prompt_lens, preempted_idx, message_flag,
    rank_id, save_each_rank)`` (FastDeploy's current call, which passes its share-input
    ``last_preempted_idx`` there) and ``(..., prompt_lens, message_flag, rank_id, save_each_rank)``
    (before that tensor; no slot is then preempted).

    One message goes to the System V queue ``queue_id``, by default the one named by
    ``$INFERENCE_MSG_QUEUE_ID`` (default 1: the queue a FastDeploy server on this host reads),
    created if absent. It carries only the ``B`` slots, their tokens and the ``M`` columns, so its size grows
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
    preempted_idx : int32 [B] or [B, 1], optional
        1 marks a slot preempted since the last step: it reports the count -9 (upstream's
        ``PREEMPTED_TOKEN_ID``) and no token. Positional (10th) or keyword (upstream's input name;
        ``last_preempted_idx=``, the name of FastDeploy's buffer, is accepted as well).
    message_flag : int
        0 .. 255, e.g. 3 for the target model, 4 for the draft model; sent in bits 0..7 of ``[1]``.
    rank_id : int
        A rank > 0 sends nothing unless ``save_each_rank``.
    save_each_rank : bool
    queue_id : int, optional
        Keyword only: the queue to send to (0 .. 255), instead of ``$INFERENCE_MSG_QUEUE_ID``.

    Examples
    --------
    On a private queue (``private_queue`` reserves an unused id and removes the queue afterwards);
    the receiving side reads the message back:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_get_output_topk, speculate_save_output_topk
    >>> from fastdeploy_spec.transport import private_queue, receive_buffers
    >>> t = paddle.to_tensor
    >>> tokens, scores, ranks = receive_buffers()
    >>> with private_queue() as qid:
    ...     speculate_save_output_topk(
    ...         t(np.array([7, 8], np.int64)), t(np.zeros([2, 3], np.int64)),
    ...         t(np.zeros([2, 3], np.float32)), t(np.zeros([2], np.int64)), t(np.array([2], np.int32)),
    ...         t(np.array([0, 2], np.int32)), t(np.array([True])), t(np.array([4], np.int32)),
    ...         t(np.array([[4]], np.int64)), t(np.array([0], np.int32)), 3, 0, False, queue_id=qid)
    ...     speculate_get_output_topk(tokens, scores, ranks, 2, 0, True, queue_id=qid)
    >>> tokens.numpy()[[2, 3, 515, 536], 0].tolist()   # batch 1; slot 0: 2 tokens, 7 then 8
    [1, 2, 7, 8]
    """
    if last_preempted_idx is not None:
        if preempted_idx is not None:
            raise TypeError(
                "speculate_save_output_topk: preempted_idx given twice (also as last_preempted_idx)"
            )
        preempted_idx = last_preempted_idx
    rest = list(args)
    # A tensor in 10th place, or one argument more than the attributes: the 10-tensor form, whose
    # 10th argument is then checked as a tensor (named) rather than taken for message_flag.
    explicit = bool(rest) and (isinstance(rest[0], paddle.Tensor) or len(rest) > len(_ATTRS))
    if explicit:
        if preempted_idx is not None:
            raise TypeError("speculate_save_output_topk: preempted_idx given twice")
        preempted_idx = rest.pop(0)
    if len(rest) > len(_ATTRS):
        raise TypeError(
            f"speculate_save_output_topk: at most {9 + 1 + len(_ATTRS)} positional "
            f"arguments, got {9 + len(args)}"
        )
    named = {"message_flag": message_flag, "rank_id": rank_id, "save_each_rank": save_each_rank}
    for name, value in zip(_ATTRS, rest):
        if name != "save_each_rank" and named[name] is not None:
            raise TypeError(f"speculate_save_output_topk: {name} given twice")
        named[name] = value
    missing = [n for n in ("message_flag", "rank_id") if named[n] is None]
    if missing:
        raise TypeError(f"speculate_save_output_topk: missing {', '.join(missing)}")
    if (
        preempted_idx is None
        and not explicit
        and isinstance(token_num_per_batch, paddle.Tensor)
        and token_num_per_batch.ndim >= 1
    ):  # upstream's earlier form: no slot is preempted
        preempted_idx = paddle.to_tensor(
            np.zeros(token_num_per_batch.shape[0], np.int32), place=paddle.CPUPlace()
        )
    values = dict(locals(), preempted_idx=preempted_idx, **named)
    _loader.load().speculate_save_output_topk(*SPEC.args(values))
