"""The logprob message transport, Python side (docs/contract/transport.md).

- ``layout``: the limits and receive layout, read from the op library (``layout()``);
- ``parser``: the receive buffers of ``speculate_get_output_topk`` -> ``LogprobMessage``;
- ``receiver``: ``LogprobReceiver``, the token processor's end in a second process;
- ``queue``: queue ids, their reservation, occupancy and removal.

The ops themselves (``speculate_save_output_topk``, ``mtp_save_first_token_with_topk``,
``speculate_get_output_topk``) are in ``fastdeploy_spec.ops``.
"""

from fastdeploy_spec.transport.layout import Layout, layout
from fastdeploy_spec.transport.parser import LogprobMessage, SlotLogprobs, parse_logprob_output
from fastdeploy_spec.transport.queue import (
    QUEUE_ID_ENV,
    QueueStats,
    free_queue_id,
    last_send_stats,
    lock_path,
    private_queue,
    queue_env,
    queue_stats,
    release_queue_id,
    remove_queue,
)
from fastdeploy_spec.transport.receiver import LogprobReceiver, child_env, receive_buffers

__all__ = [
    "QUEUE_ID_ENV",
    "Layout",
    "LogprobMessage",
    "LogprobReceiver",
    "QueueStats",
    "SlotLogprobs",
    "child_env",
    "free_queue_id",
    "last_send_stats",
    "layout",
    "lock_path",
    "receive_buffers",
    "parse_logprob_output",
    "private_queue",
    "queue_env",
    "queue_stats",
    "release_queue_id",
    "remove_queue",
]
