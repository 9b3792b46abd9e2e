"""The validation layer every op wrapper goes through, and the argument helpers they share.

Each wrapper declares its op once (an :class:`OpSpec`: tensor arguments, in-place outputs, attribute
kinds) and calls the binding with ``SPEC.args(locals())``: types, ranks, places, attribute ranges are
checked here, with errors that name the op and the argument; dtypes and shapes in the binding.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import FrozenSet, Mapping, Tuple

import numpy as np
import paddle

# Negative threshold attribute: "not given", the binding reads the environment variable on every call.
THRESHOLD_FROM_ENV = -1

# Negative queue_id attribute: "not given", the binding reads INFERENCE_MSG_QUEUE_ID (msg_queue.h).
QUEUE_ID_FROM_ENV = -1

# Paddle 2.x refuses an in-place output with no elements after the op ran ("Custom operator's 0-th
# output is not initialized": such a tensor has no allocation); Paddle 3 accepts it.
_EMPTY_OUTPUTS_REFUSED = paddle.__version__.split(".")[0] == "2"


def _place_name(t) -> str:
    return "GPU" if t.place.is_gpu_place() else ("CPU" if t.place.is_cpu_place() else str(t.place))


def _is_contiguous(t) -> bool:
    # Paddle 2.6 has no strided views (and no is_contiguous): every tensor is contiguous there.
    is_contiguous = getattr(t, "is_contiguous", None)
    return is_contiguous is None or bool(is_contiguous())


def _type_name(value) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


class ArgumentError(ValueError):
    """A bad argument of an op call, named (``<op>: <argument> ...: expected ...``)."""


@dataclass(frozen=True)
class IntAttr:
    """An integer attribute: a Python (or NumPy) integer in ``[lo, hi]``, the range of the binding's
    C++ type (int: int32, int64_t: int64) or a narrower one the contract sets. ``none``, when not
    None, is the value that stands for "not given" (the keyword's None)."""

    ctype: str
    lo: int
    hi: int
    none: int | None = None

    def convert(self, op: str, name: str, value) -> int:
        if value is None and self.none is not None:
            return self.none
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise ArgumentError(
                f"{op}: {name} must be an integer in [{self.lo}, {self.hi}] "
                f"({self.ctype}){' or None' if self.none is not None else ''}, "
                f"got {_type_name(value)} {value!r}"
            )
        v = int(value)
        if v < self.lo or v > self.hi:
            bound = f">= {self.lo}" if v < self.lo else f"<= {self.hi}"
            raise ArgumentError(
                f"{op}: {name} must be {bound} (an integer in [{self.lo}, {self.hi}], "
                f"{self.ctype}), got {v}"
            )
        return v


@dataclass(frozen=True)
class BoolAttr:
    """A bool attribute: True/False (NumPy's too) or the integers 0 and 1."""

    def convert(self, op: str, name: str, value) -> bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, numbers.Integral) and int(value) in (0, 1):
            return bool(value)
        raise ArgumentError(
            f"{op}: {name} must be a bool (True or False), got {_type_name(value)} {value!r}"
        )


class FloatAttr:
    """A float attribute: a finite real number (a NaN or an infinity would pass every comparison the
    op makes with it the wrong way). Ranges the contract sets are the binding's checks."""

    def convert(self, op: str, name: str, value) -> float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ArgumentError(
                f"{op}: {name} must be a finite float, got {_type_name(value)} {value!r}"
            )
        v = float(value)
        if not math.isfinite(v):
            raise ArgumentError(f"{op}: {name} must be finite, got {v!r}")
        return v


INT32 = IntAttr("int32", -(2**31), 2**31 - 1)
INT64 = IntAttr("int64", -(2**63), 2**63 - 1)
BOOL = BoolAttr()
FLOAT = FloatAttr()
# The keyword ``threshold``: None reads the environment variable in the binding (on every call).
THRESHOLD = IntAttr("int64, >= 0", 0, 2**63 - 1, none=THRESHOLD_FROM_ENV)
# The message-queue ops' keyword queue_id (None: INFERENCE_MSG_QUEUE_ID); the binding checks its range.
QUEUE_ID = IntAttr("int64, >= 0", 0, 2**63 - 1, none=QUEUE_ID_FROM_ENV)


# The tensors every op of the n-gram/suffix family takes first, in this order (binding/draft_inputs.h).
DRAFT_INPUTS = (
    "token_ids_all",
    "prompt_lens",
    "step_idx",
    "draft_token_num",
    "draft_tokens",
    "seq_lens_this_time",
    "seq_lens_encoder",
    "seq_lens_decoder",
    "max_dec_len",
)

# Every op's OpSpec by op name, filled as the wrappers are imported (``fastdeploy_spec.ops``).
SPECS: dict = {}


@dataclass(frozen=True)
class OpSpec:
    """What an op takes, declared once per wrapper and checked before Paddle sees the call.

    ``tensors`` are the binding's tensor inputs in order (``optional`` ones may be None),
    ``outputs`` those among them the op writes in place, ``attrs`` its attributes in order with their
    kinds. :meth:`args` checks a call and returns the binding's positional arguments. Dtypes, shapes
    and the agreement of batch dimensions are the binding's checks (``custom_ops/binding``): written
    once, in C++, where the CPU and GPU paths meet.
    """

    op: str
    tensors: Tuple[str, ...]
    outputs: FrozenSet[str] = frozenset()
    attrs: Tuple[Tuple[str, object], ...] = ()
    optional: FrozenSet[str] = frozenset()
    # The host ops of the logprob transport read each input wherever it is (their bindings check
    # what must be on the host); every other op runs on the place of its tensors.
    same_place: bool = True
    # The name a user called, where it is not the binding's (the seeded form of verify_draft_tokens).
    caller: str = ""

    def __post_init__(self):
        SPECS[self.op] = self

    @property
    def written(self) -> Tuple[str, ...]:
        """The in-place outputs in argument order."""
        return tuple(name for name in self.tensors if name in self.outputs)

    def args(self, values: Mapping[str, object]) -> tuple:
        """Checks a call (``values``: the wrapper's ``locals()``) and returns the binding's arguments.

        Each tensor argument must be a ``paddle.Tensor`` (None only where optional: Paddle would
        hand the binding an undefined tensor; a NumPy array or a Python scalar would be copied, and
        what the op writes into the copy lost), of rank >= 1 (every tensor of these ops has a batch
        or a length dimension), contiguous (Paddle 3 hands a custom op a contiguous copy of a
        strided view, so what the op writes into a mutated view would be lost silently) and, with
        ``same_place``, on the place of the first one (Paddle 2.6 crashes on mixed places before the
        op's own, identical, check runs). In-place outputs must not require grad (the ops are not
        differentiable, and Paddle refuses in-place writes to a leaf that requires grad with a
        message naming no argument). Integer attributes must fit the binding's C++ type (Paddle
        reports an int32 overflow without the name, and wraps an int64 one silently). The batch
        itself, empty or not, is the binding's: the op runs its shape checks for every call.
        """
        op = self.caller or self.op
        out = []
        first_name, first = None, None
        for name in self.tensors:
            t = values[name]
            if t is None and name in self.optional:
                out.append(None)
                continue
            if not isinstance(t, paddle.Tensor):
                hint = (
                    " (convert it with paddle.to_tensor; an in-place output must be the tensor "
                    "you keep)"
                    if isinstance(t, np.ndarray)
                    else ""
                )
                got = "None" if t is None else f"a {_type_name(t)}"
                raise ArgumentError(f"{op}: {name} must be a paddle.Tensor, got {got}{hint}")
            if t.ndim == 0:
                raise ArgumentError(
                    f"{op}: {name} is a 0-d tensor (a scalar); expected a tensor of rank "
                    f">= 1, e.g. shape [1] for one slot"
                )
            if not _is_contiguous(t):
                raise ArgumentError(
                    f"{op}: {name} is a non-contiguous view (from slicing or transpose) of "
                    f"shape {list(t.shape)}; pass a contiguous tensor (.contiguous())"
                )
            if first is None:
                first_name, first = name, t
            elif self.same_place and t.place.is_gpu_place() != first.place.is_gpu_place():
                raise ArgumentError(
                    f"{op}: {name} is on {_place_name(t)} but {first_name} is on "
                    f"{_place_name(first)}; all tensors of one call must share a place"
                )
            if name in self.outputs:
                if not t.stop_gradient:
                    raise ArgumentError(
                        f"{op}: {name} is written in place but requires grad "
                        f"(stop_gradient=False); set {name}.stop_gradient = True "
                        f"(the op is not differentiable)"
                    )
                t = allocated(t)
            out.append(t)
        for name, kind in self.attrs:
            out.append(kind.convert(op, name, values[name]))
        return tuple(out)


def allocated(t: paddle.Tensor) -> paddle.Tensor:
    """``t``, or, on Paddle 2.x for a tensor with no elements, a stand-in with its shape, dtype and place
    that has an allocation (of one element, never read or written: the op touches no element).

    For in-place outputs that may legitimately be empty while the batch is not (no output row, rows
    of width 0): the op runs as on Paddle 3, and the caller's empty tensor has nothing to receive.
    """
    if not _EMPTY_OUTPUTS_REFUSED or int(np.prod(t.shape)) != 0:
        return t
    one = paddle.to_tensor(np.zeros(1, np.float32), place=paddle.CPUPlace()).astype(
        t.dtype
    )  # host cast
    if t.place.is_gpu_place():
        one = one.cuda(t.place.gpu_device_id())  # a copy
    one.get_tensor()._set_dims(list(t.shape))  # the shape only: the allocation stays
    return one
