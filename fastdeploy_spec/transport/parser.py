"""Parser of the logprob receive buffers: the token processor's side of docs/contract/transport.md.

Mirrors the speculative-logprob branch of FastDeploy's token processor: unpack the flag word
``[1]``, view tokens and scores as ``[batch, 6, 21]``, keep the ``topk_columns`` columns the message
carried and the first ``count`` rows of each slot. The arrays are converted to Python lists once
per message, then sliced per slot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastdeploy_spec.transport.layout import layout


@dataclass(frozen=True)
class SlotLogprobs:
    """What one slot of a message carries."""

    slot: int
    count: int  # as sent: tokens (>= 0), -9 for a preempted slot, other negatives are signals
    token_ids: list[int]  # the accepted tokens
    logprobs: list[float]  # logprob of each accepted token
    topk_token_ids: list[list[int]]  # per token: topk_columns ids, column 0 = the token itself
    topk_logprobs: list[list[float]]  # per token: their logprobs
    ranks: list[int]  # rank of each accepted token

    @property
    def preempted(self) -> bool:
        return self.count == layout().preempted_count


@dataclass(frozen=True)
class LogprobMessage:
    """One received message."""

    stop_flag: int  # +-INFERENCE_MSG_ID: negative when the worker said "stop"
    message_flag: int  # 0 .. 255
    topk_columns: int  # M = top-k + 1
    slots: list[SlotLogprobs]  # one per slot of the batch

    @property
    def batch(self) -> int:
        return len(self.slots)

    @property
    def kind(self) -> str:
        """'target' (flag 3), 'draft' (flag 4) or 'other'."""
        lay = layout()
        return {lay.flag_target: "target", lay.flag_draft: "draft"}.get(self.message_flag, "other")

    @property
    def not_need_stop(self) -> bool:
        return self.stop_flag > 0


def _flat(buffer) -> np.ndarray:
    array = buffer.numpy() if hasattr(buffer, "numpy") else np.asarray(buffer)
    return array.reshape(-1)


def parse_logprob_output(output_tokens, output_scores, output_ranks) -> LogprobMessage | None:
    """Turns the buffers filled by ``speculate_get_output_topk`` into a ``LogprobMessage``.

    Parameters
    ----------
    output_tokens, output_scores, output_ranks : paddle.Tensor or numpy.ndarray
        The receive buffers (int64 [3 + 512 + 512 * 126, 1], float32 [512 * 126, 1], int64 [512 * 6]).

    Returns
    -------
    LogprobMessage, or None when ``output_tokens[0]`` says that no message was read.

    Examples
    --------
    One message of the target model (slot 0: tokens 7 and 8 with their top-1), on a private queue:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_get_output_topk, speculate_save_output_topk
    >>> from fastdeploy_spec.transport import parse_logprob_output
    >>> from fastdeploy_spec.transport import private_queue, receive_buffers
    >>> t = paddle.to_tensor
    >>> tokens, scores, ranks = receive_buffers()
    >>> with private_queue() as qid:
    ...     speculate_save_output_topk(
    ...         t(np.array([7, 8], np.int64)), t(np.array([[0, 5], [0, 9]], np.int64)),
    ...         t(np.array([[-0.5, -1.0], [-0.25, -2.0]], np.float32)), t(np.array([1, 0], np.int64)),
    ...         t(np.array([2], np.int32)), t(np.array([0, 2], np.int32)), t(np.array([True])),
    ...         t(np.array([4], np.int32)), t(np.array([[4]], np.int64)), 3, 0, queue_id=qid)
    ...     speculate_get_output_topk(tokens, scores, ranks, 1, 0, True, queue_id=qid)
    >>> msg = parse_logprob_output(tokens, scores, ranks)
    >>> for s in msg.slots:
    ...     print(s.slot, s.token_ids, s.logprobs, s.topk_token_ids, s.ranks)
    0 [7, 8] [-0.5, -0.25] [[7, 5], [8, 9]] [1, 0]
    """
    lay = layout()
    tokens = _flat(output_tokens)
    if int(tokens[0]) == lay.no_message:
        return None
    word = int(tokens[1])
    message_flag = word & lay.flag_mask
    columns = (word >> lay.flag_bits) & lay.columns_mask
    batch = int(tokens[2])
    if not 1 <= columns <= lay.columns:
        raise ValueError(
            f"flag word {word} announces {columns} top-k columns; 1 .. {lay.columns} exist"
        )
    if not 0 <= batch <= lay.max_bsz:
        raise ValueError(f"batch {batch} outside [0, {lay.max_bsz}]")
    rows, cols = lay.max_draft_tokens, lay.columns
    cells = batch * rows * cols
    counts = tokens[3 : 3 + batch].tolist()
    ids = (
        tokens[lay.tokens_offset : lay.tokens_offset + cells]
        .reshape(batch, rows, cols)[:, :, :columns]
        .tolist()
    )
    lps = _flat(output_scores)[:cells].reshape(batch, rows, cols)[:, :, :columns].tolist()
    rks = _flat(output_ranks)[: batch * rows].reshape(batch, rows).tolist()
    slots = []
    for i, count in enumerate(counts):
        n = min(max(count, 0), rows)
        slot_ids, slot_lps = ids[i][:n], lps[i][:n]
        slots.append(
            SlotLogprobs(
                slot=i,
                count=count,
                token_ids=[r[0] for r in slot_ids],
                logprobs=[r[0] for r in slot_lps],
                topk_token_ids=slot_ids,
                topk_logprobs=slot_lps,
                ranks=rks[i][:n],
            )
        )
    return LogprobMessage(
        stop_flag=int(tokens[0]), message_flag=message_flag, topk_columns=columns, slots=slots
    )
