"""What the tests share: the places they run on, host <-> device conversions (logits dtypes included),
and common checks. Fixtures and the GPU skip rule are in conftest.py.

bfloat16 has no NumPy dtype: the tests hold bfloat16 logits as their raw uint16 bits. To make a
Paddle tensor of them, the bf16-representable float32 values are cast on the host
(``astype('bfloat16')`` on a CPU tensor: exact, works on Paddle 2.6 and 3.x) and then copied to the
device with ``.cuda()`` (a copy: on the GPU machine Paddle's own GPU cast kernel cannot be used).
``Tensor.numpy()`` of a bfloat16 tensor returns the uint16 bits on both versions.
"""

from __future__ import annotations

import ctypes
import os
import struct
from contextlib import contextmanager

import numpy as np
import paddle
import pytest

from fastdeploy_spec import ops, transport
from tests.reference.logprob_msg import send_step
from tests.sysv import IPC_NOWAIT, libc, raw_queue


def gpu_available() -> bool:
    return (
        paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0 and ops.with_cuda()
    )


def to_place(array: np.ndarray, place: str) -> paddle.Tensor:
    """Copies a NumPy array to 'cpu' or 'gpu' (a copy only: no Paddle kernel runs on the data)."""
    target = paddle.CUDAPlace(0) if place == "gpu" else paddle.CPUPlace()
    return paddle.to_tensor(np.ascontiguousarray(array), place=target)


PLACES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


LOGITS_DTYPES = ["float32", "float16", "bfloat16"]


FLOAT32_MIN = float(np.finfo(np.float32).min)


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounding to nearest even (finite inputs)."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def make_logits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Host storage of ``values`` in ``dtype``: float32, float16, or uint16 bits for bfloat16."""
    if dtype == "float32":
        return values.astype(np.float32)
    if dtype == "float16":
        return values.astype(np.float16)
    return bf16_bits(values)


def as_f32(storage: np.ndarray, dtype: str) -> np.ndarray:
    """The exact float32 values of host storage made by make_logits."""
    return bf16_to_f32(storage) if dtype == "bfloat16" else storage.astype(np.float32)


def logits_to_place(storage: np.ndarray, dtype: str, place: str) -> paddle.Tensor:
    if dtype != "bfloat16":
        return to_place(storage, place)
    tensor = paddle.to_tensor(bf16_to_f32(storage), place=paddle.CPUPlace()).astype("bfloat16")
    return tensor.cuda() if place == "gpu" else tensor


def raw_bits(tensor: paddle.Tensor) -> np.ndarray:
    """Bit pattern of a logits tensor (for exact comparison of copies; also NaN-safe)."""
    a = tensor.numpy()
    return a.view(np.uint32) if a.dtype == np.float32 else a.view(np.uint16)


# ---- The logprob transport: reserved queues, raw fragments, receive buffers ------------------------


MSG_ID = 5  # INFERENCE_MSG_ID of the round trips: the stop flag is +-5


FRAGMENT_HEADER = struct.Struct(
    "<IIIIQ"
)  # magic, message id, index, count, total bytes (msg_queue.h)


FRAGMENT_MAGIC = 0x31474652


@contextmanager
def reserved_queue_id():
    """A queue id that no other process of the test run uses (parallel workers included: a reservation,
    not just a queue that does not exist yet); the queue is removed and the id released afterwards."""
    qid = transport.free_queue_id()
    try:
        yield qid
        transport.remove_queue(qid)
        assert transport.queue_stats(qid) is None
    finally:
        transport.release_queue_id(qid)


def assert_buffers_equal(got: dict, want: dict, what: str) -> None:
    np.testing.assert_array_equal(got["tokens"], want["tokens"], err_msg=f"{what}: output_tokens")
    # bit equality: -inf, -0.0 and every float travel unchanged
    np.testing.assert_array_equal(
        got["scores"].view(np.int32),
        want["scores"].view(np.int32),
        err_msg=f"{what}: output_scores",
    )
    np.testing.assert_array_equal(got["ranks"], want["ranks"], err_msg=f"{what}: output_ranks")


def _raw_queue(qid: int) -> int:
    msqid = raw_queue(qid)
    assert msqid >= 0
    return msqid


def raw_send(qid: int, mtype: int, text: bytes) -> None:
    frame = struct.pack("l", mtype) + text
    assert libc().msgsnd(_raw_queue(qid), frame, len(text), 0) == 0


def raw_receive_all(qid: int) -> list[bytes]:
    out, buf = [], ctypes.create_string_buffer(1 << 20)
    while (n := libc().msgrcv(_raw_queue(qid), buf, len(buf) - 8, 0, IPC_NOWAIT)) >= 0:
        out.append(buf.raw[8 : 8 + n])
    return out


def payload_of(step) -> bytes:
    """The wire payload of a step's message, as the sender op wrote it (read raw off the queue)."""
    send_step(step)
    (frame,) = raw_receive_all(int(os.environ["INFERENCE_MSG_QUEUE_ID"]))
    magic, _, index, count, total = FRAGMENT_HEADER.unpack_from(frame)
    assert (magic, index, count, total) == (FRAGMENT_MAGIC, 0, 1, len(frame) - FRAGMENT_HEADER.size)
    return frame[FRAGMENT_HEADER.size :]


def fragments(payload: bytes, msg_id: int, parts: int) -> list[bytes]:
    size = -(-len(payload) // parts)
    return [
        FRAGMENT_HEADER.pack(FRAGMENT_MAGIC, msg_id, i, parts, len(payload))
        + payload[i * size : (i + 1) * size]
        for i in range(parts)
    ]


def grid(*axes):
    """``pytest.mark.parametrize`` over each ``(names, values)`` axis, listed as the stacked decorators
    would be (the first outermost): the same test ids and order, in one decorator."""

    def decorate(fn):
        for names, values in reversed(axes):
            fn = pytest.mark.parametrize(names, values)(fn)
        return fn

    return decorate


# PD_CHECK failures reach Python as OSError ("(External) ...") in the Paddle versions we support; the
# tuple keeps the tests about the message, not about Paddle's exception mapping.
OP_ERRORS = (OSError, RuntimeError, ValueError)


def assert_bad_input(
    call, inputs: dict, name: str, corrupt, message: str, errors=Exception
) -> None:
    """``call(inputs)`` with ``inputs[name]`` replaced by ``corrupt(inputs)`` raises one of ``errors``
    matching ``message``."""
    inputs[name] = corrupt(inputs)
    with pytest.raises(errors, match=message):
        call(inputs)


def assert_wrong_dtype_named(op: str, call, inputs: dict, name: str, dtype) -> None:
    """``call(inputs)`` with ``inputs[name]`` of another integer dtype (int64 for an int32 tensor,
    else int32) raises an error of ``op`` naming the tensor and the ``dtype`` it must have."""
    other = np.int64 if np.dtype(dtype) == np.int32 else np.int32
    message = rf"{op}: {name} must be {np.dtype(dtype)}"
    assert_bad_input(call, inputs, name, lambda d: d[name].astype(other), message, OP_ERRORS)


def on_gpu_only(name: str, message: str):
    """A row of a bad-input table (see ``assert_bad_input``) for GPU runs: ``inputs[name]`` moved to
    the GPU while the other inputs stay on the CPU, which must raise ``message``."""
    return pytest.param(
        name, lambda t: t[name].cuda(), message, marks=pytest.mark.gpu, id="mixed-places"
    )


def assert_mixed_places_rejected(op, order, host_case: dict, on_cpu: str) -> None:
    """``op`` with every tensor of ``host_case`` on the GPU but ``on_cpu`` raises an error naming it."""
    t = {k: to_place(v, "gpu") for k, v in host_case.items()}
    t[on_cpu] = to_place(host_case[on_cpu], "cpu")
    with pytest.raises(OP_ERRORS, match=f"{on_cpu} is on CPU"):
        op(*(t[k] for k in order))


def fewer_slots(case: dict, B: int, full_rows) -> dict:
    """``case`` with its per-slot tensors cut to B slots; the tensors named in ``full_rows`` keep every row
    (buffers of S > B slots, as a runner's)."""
    return {k: v if k in full_rows else v[:B] for k, v in case.items()}


_REGISTERED_OPS = None


def registered_ops() -> dict:
    """name -> (inputs, outputs, attributes, in-place map {input: output}) of every op the library
    registers, as Paddle registered them (the binding as built, not a reading of its source)."""
    global _REGISTERED_OPS
    if _REGISTERED_OPS is None:
        from paddle.base import core
        from paddle.utils.cpp_extension import extension_utils

        module = ops.load()
        protos = extension_utils.OpProtoHolder.instance().op_proto_map
        _REGISTERED_OPS = {}
        for name in sorted(n for n in vars(module) if n in protos):
            inputs, attrs, outputs = extension_utils.parse_op_info(name)
            inputs = [i.split("@")[0] for i in inputs]
            outputs = [o.split("@")[0] for o in outputs]
            by_index = core.eager._get_custom_operator_inplace_map(
                name
            )  # {output index: input index}
            inplace = {inputs[i]: outputs[o] for o, i in dict(by_index).items()}
            _REGISTERED_OPS[name] = (inputs, outputs, list(attrs), inplace)
    return _REGISTERED_OPS


def call_named(op, t: dict, *attrs, names: dict | None = None, **kw) -> None:
    """``op`` (a wrapper of fastdeploy_spec.ops) over the tensors of ``t`` in its spec's order, each
    under its own name or the one ``names`` maps it to (an optional one absent from ``t``: None), then
    ``attrs`` and ``kw``."""
    from fastdeploy_spec.ops._common import SPECS

    spec = SPECS[op.__name__]
    keys = [(names or {}).get(k, k) for k in spec.tensors]
    op(
        *(t.get(n) if k in spec.optional else t[n] for k, n in zip(spec.tensors, keys)),
        *attrs,
        **kw,
    )


# The MTP proposer's draft-side buffers (attributes of MTPProposer) that its step writes.
MTP_BUFFERS = (
    "pre_ids",
    "step_idx",
    "seq_lens_decoder",
    "max_dec_len",
    "input_ids",
    "mtp_draft_num",
)

# The runner's names of a decode step's buffers where the verify/update ops name them otherwise.
RUNNER_NAMES = {
    "step_output_ids": "accept_tokens",
    "step_output_len": "accept_num",
    "step_input_ids": "draft_tokens",
    "is_paused": "is_block_step",
}


def unified_update(t: dict) -> None:
    """unified_update_model_status over a step's buffers named as the runner names them (the graph
    tests' decode steps)."""
    call_named(ops.unified_update_model_status, t, names=RUNNER_NAMES)


def run_in_place(op, case: dict, place: str, *attrs, **kw) -> dict:
    """``op`` (a wrapper of fastdeploy_spec.ops) on ``case``'s arrays moved to ``place``, taken in its
    spec's tensor order, then ``attrs`` and ``kw``; returns what it writes in place as NumPy arrays."""
    from fastdeploy_spec.ops._common import SPECS

    spec = SPECS[op.__name__]
    t = {k: to_place(case[k], place) for k in spec.tensors}
    op(*(t[k] for k in spec.tensors), *attrs, **kw)
    return {k: t[k].numpy() for k in spec.written}


def assert_arrays_equal(got: dict, want: dict, names) -> None:
    """Exact equality of the arrays ``names`` of two dicts, each named on a mismatch."""
    for k in names:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
