"""Argument helpers shared by the op wrappers."""

from __future__ import annotations

from typing import Mapping

import paddle

# Negative threshold attribute: "not given", the binding reads the environment variable on every call.
THRESHOLD_FROM_ENV = -1


def threshold_attr(threshold: int | None) -> int:
    """Maps the keyword ``threshold`` to the op attribute (None: the environment, then the default)."""
    if threshold is None:
        return THRESHOLD_FROM_ENV
    threshold = int(threshold)
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    return threshold


def _place_name(t) -> str:
    return "GPU" if t.place.is_gpu_place() else ("CPU" if t.place.is_cpu_place() else str(t.place))


def _is_contiguous(t) -> bool:
    # Paddle 2.6 has no strided views (and no is_contiguous): every tensor is contiguous there.
    is_contiguous = getattr(t, "is_contiguous", None)
    return is_contiguous is None or bool(is_contiguous())


def precheck(op: str, args: Mapping[str, object], batch=None) -> bool:
    """Checks what must be checked before Paddle runs the op; True when the call is a no-op.

    ``args`` maps the wrapper's parameter names to their values (its ``locals()``); every tensor among
    them must share the place of the first one. Paddle 2.6 crashes on mixed places before the op's
    own (identical) check runs, so it is repeated here. Every tensor must be contiguous: Paddle 3
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
        elif value.place.is_gpu_place() != first_gpu:
            raise ValueError(f"{op}: {name} is on {_place_name(value)} but {first_name} is on "
                             f"{_place_name(first)}; all tensors of one call must share a place")
    return batch is not None and batch.shape[0] == 0
