"""The logprob message checker: what the token processor received against what the device computed."""

from __future__ import annotations

from typing import Dict

import numpy as np

from fastdeploy_spec.runner import SpecRunner, StepObserver, StepRecord
from fastdeploy_spec.transport import LogprobMessage


class LogprobChecker(StepObserver):
    """Checks every logprob message of a runner, bit for bit, against the rows of its step.

    Attach it with ``runner.observers.append(LogprobChecker())``. After each step it copies the step's
    logprob rows back to the host (a test-and-demo cost: a server's worker would not), and when the
    step's message arrives it requires the header, every slot's token count and every row (ids, the
    float32 scores as bits, ranks) to equal them; it raises ``RuntimeError`` naming the first
    difference. ``messages_checked`` and ``tokens_verified`` count what passed.
    """

    def __init__(self) -> None:
        self.expected: Dict[int, Dict[str, np.ndarray]] = {}
        self.messages_checked = 0
        self.tokens_verified = 0

    def on_step(self, runner: SpecRunner, record: StepRecord) -> None:
        lb = runner.logprob_buffers
        if lb is None:
            return
        self.expected[record.index] = dict(
            cu=lb.cu_batch_token_offset.numpy(),
            ids=lb.logprob_token_ids.numpy(),
            scores=lb.logprob_scores.numpy(),
            ranks=lb.logprob_ranks.numpy(),
        )

    def on_logprob_message(
        self, runner: SpecRunner, message: LogprobMessage, record: StepRecord
    ) -> None:
        want = self.expected.pop(record.index)
        k1 = want["ids"].shape[1]
        where = f"logprob message {self.messages_checked + 1}"
        header = (message.kind, message.batch, message.topk_columns, message.not_need_stop)
        if header != ("target", len(record.request_ids), k1, record.not_need_stop):
            raise RuntimeError(
                f"{where}: header (kind, batch, columns, not_need_stop) = {header}, "
                f"not what was sent"
            )
        for b, rid in enumerate(record.request_ids):
            got, n, r0 = message.slots[b], int(record.accept_num[b]), int(want["cu"][b])
            if got.count != n or (rid is None and n):
                raise RuntimeError(
                    f"{where}, slot {b}: {got.count} tokens arrived, {n} were accepted"
                )
            rows = slice(r0, r0 + n)
            # Bit equality: the transport must deliver every float32 exactly.
            scores = np.asarray(got.topk_logprobs, np.float32).reshape(n, k1)
            if not (
                got.topk_token_ids == want["ids"][rows].tolist()
                and np.array_equal(scores.view(np.int32), want["scores"][rows].view(np.int32))
                and got.ranks == want["ranks"][rows].tolist()
            ):
                raise RuntimeError(
                    f"{where}, slot {b} (request {rid!r}): the rows received differ "
                    f"from the rows computed"
                )
            self.tokens_verified += n
        self.messages_checked += 1
