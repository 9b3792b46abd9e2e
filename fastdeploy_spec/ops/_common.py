"""Argument helpers shared by the op wrappers."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import paddle

# Negative threshold attribute: "not given", the binding reads the environment variable on every call.
THRESHOLD_FROM_ENV = -1

# Negative queue_id attribute: "not given", the binding reads INFERENCE_MSG_QUEUE_ID (msg_queue.h).
QUEUE_ID_FROM_ENV = -1

# Paddle 2.x refuses an in-place output with no elements after the op ran ("Custom operator's 0-th
# output is not initialized": such a tensor has no allocation); Paddle 3 accepts it.
_EMPTY_OUTPUTS_REFUSED = paddle.__version__.split(".")[0] == "2"


def threshold_attr(threshold: int | None) -> int:
    """Maps the keyword ``threshold`` to the op attribute (None: the environment, then the default)."""
    if threshold is None:
        return THRESHOLD_FROM_ENV
    threshold = int(threshold)
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    return threshold


def queue_attr(queue_id: int | None) -> int:
    """Maps the keyword ``queue_id`` of the message-queue ops to their attribute (None: the binding
    reads ``INFERENCE_MSG_QUEUE_ID`` on every call, default 1)."""
    if queue_id is None:
        return QUEUE_ID_FROM_ENV
    queue_id = int(queue_id)
    if queue_id < 0:
        raise ValueError(f"queue_id must be >= 0, got {queue_id}")
    return queue_id


def _place_name(t) -> str:
    return "GPU" if t.place.is_gpu_place() else ("CPU" if t.place.is_cpu_place() else str(t.place))


def _is_contiguous(t) -> bool:
    # Paddle 2.6 has no strided views (and no is_contiguous): every tensor is contiguous there.
    is_contiguous = getattr(t, "is_contiguous", None)
    return is_contiguous is None or bool(is_contiguous())


def precheck(op: str, args: Mapping[str, object], batch=None, same_place: bool = True) -> bool:
    """Checks what must be checked before Paddle runs the op; True when the call is a no-op.

    ``args`` maps the wrapper's parameter names to their values (its ``locals()``); with
    ``same_place`` every tensor among them must share the place of the first one (Paddle 2.6 crashes
    on mixed places before the op's own, identical, check runs, so it is repeated here). The host ops
    of the logprob transport read each input wherever it is and pass ``same_place=False``; their
    bindings check what must be on the host. Every tensor must be contiguous: Paddle 3
    hands a custom op a contiguous copy of a strided view (from slicing or transpose), so what the op
    writes into a mutated view would be lost silently. ``batch``, a tensor whose first dimension is
    the batch, makes an empty batch a no-op without calling into Paddle, which (2.6, GPU) refuses
    in-place outputs with no elements.
    """
    first_name, first = None, None
    for name, value in args.items():
        if not isinstance(value, paddle.Tensor):
            continue
        if not _is_contiguous(value):
            raise ValueError(f"{op}: {name} is a non-contiguous view (from slicing or transpose) of shape "
                             f"{list(value.shape)}; pass a contiguous tensor (.contiguous())")
        if first is None:
            first_name, first = name, value
            first_gpu = value.place.is_gpu_place()
        elif same_place and value.place.is_gpu_place() != first_gpu:
            raise ValueError(f"{op}: {name} is on {_place_name(value)} but {first_name} is on "
                             f"{_place_name(first)}; all tensors of one call must share a place")
    return batch is not None and batch.shape[0] == 0


def allocated(t: paddle.Tensor) -> paddle.Tensor:
    """``t``, or, on Paddle 2.x for a tensor with no elements, a stand-in with its shape, dtype and place
    that has an allocation (of one element, never read or written: the op touches no element).

    For in-place outputs that may legitimately be empty while the batch is not (no output row, rows
    of width 0): the op runs as on Paddle 3, and the caller's empty tensor has nothing to receive.
    """
    if not _EMPTY_OUTPUTS_REFUSED or int(np.prod(t.shape)) != 0:
        return t
    one = paddle.to_tensor(np.zeros(1, np.float32), place=paddle.CPUPlace()).astype(t.dtype)  # host cast
    if t.place.is_gpu_place():
        one = one.cuda(t.place.gpu_device_id())  # a copy
    one.get_tensor()._set_dims(list(t.shape))  # the shape only: the allocation stays
    return one
