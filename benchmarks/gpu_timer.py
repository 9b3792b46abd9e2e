"""CUDA graphs and the GPU timer shared by the benchmark scripts and the graph-replay test.

Everything goes through the CUDA runtime (ctypes) and Paddle's streams, never through Paddle's GPU
kernels (which do nothing on a GPU the installed Paddle was not built for):

- :func:`cudart` is the CUDA runtime Paddle loaded, :func:`stream_handle` the ``cudaStream_t`` of a
  Paddle stream;
- :class:`Graph` captures a callable into a CUDA graph, through the runtime
  (``cudaStreamBeginCapture`` on the current stream or on a side stream) or through Paddle's
  ``CUDAGraph``; an empty capture is refused, so a graph can never time as zero;
- :func:`time_graph_us` is the timer: replays of a graph of back-to-back calls between CUDA events,
  after warm-up, median over rounds; optionally with a cold L2 (:class:`L2Flush`) and a per-call
  setup, each timed alone and subtracted;
- :class:`StreamTimer` times eager iterations on a stream held busy (for baselines that cannot be
  captured, such as PyTorch's).
"""

from __future__ import annotations

import ctypes
import glob
import os
import statistics
import time
from contextlib import nullcontext
from functools import lru_cache
from typing import Callable, List, Optional

CAPTURE_MODE_RELAXED = 2  # cudaStreamCaptureModeRelaxed: Paddle may query the device meanwhile
MEMCPY_DEVICE_TO_DEVICE = 3  # cudaMemcpyDeviceToDevice
DEV_ATTR_L2_CACHE_SIZE = 89  # cudaDevAttrL2CacheSize
COLD_L2_MIN_BYTES = 128 << 20


@lru_cache(maxsize=1)
def cudart() -> ctypes.CDLL:
    """The CUDA runtime Paddle loaded (the same instance), else one found on the system."""
    with open("/proc/self/maps") as f:
        loaded = sorted({line.split()[-1] for line in f if "libcudart.so" in line})
    candidates = loaded + ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    candidates += glob.glob(
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libcudart.so*")
    )
    for name in candidates:
        try:
            rt = ctypes.CDLL(name)
        except OSError:
            continue
        rt.cudaGetErrorString.restype = ctypes.c_char_p
        rt.cudaMemcpyAsync.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_void_p,
        ]
        return rt
    raise RuntimeError(f"no CUDA runtime found (tried {candidates})")


def check(status: int, what: str) -> None:
    """Raises on a CUDA runtime error status, naming the call and the error."""
    if status != 0:
        raise RuntimeError(
            f"{what} failed: CUDA error {status} ({cudart().cudaGetErrorString(status).decode()})"
        )


def stream_handle(stream=None) -> int:
    """The ``cudaStream_t`` of a Paddle stream (default: Paddle's current stream)."""
    import paddle

    stream = paddle.device.cuda.current_stream() if stream is None else stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        handle = stream.stream_base.cuda_stream
    return int(handle.value if isinstance(handle, ctypes.c_void_p) else handle)


def synchronize() -> None:
    import paddle

    paddle.device.cuda.synchronize()


class Graph:
    """A CUDA graph of ``fn``, captured once and replayed on the stream it was captured on.

    ``backend="cudart"`` captures with the CUDA runtime: on Paddle's current stream, or with
    ``side_stream`` on a new Paddle stream made current for the capture (the ops launch on the current
    stream either way). ``backend="paddle"`` uses ``paddle.device.cuda.graphs.CUDAGraph``.
    ``fn`` should have run once before (warm-up), so that nothing is allocated during the capture.
    """

    def __init__(
        self, fn: Callable[[], None], backend: str = "cudart", side_stream: bool = False
    ) -> None:
        import paddle

        if backend not in ("cudart", "paddle"):
            raise ValueError(f"backend must be 'cudart' or 'paddle', got {backend!r}")
        self.backend, self.exec, self.graph, self._paddle_graph, self._rt = (
            backend,
            None,
            None,
            None,
            None,
        )
        synchronize()
        if backend == "paddle":
            from paddle.device.cuda.graphs import CUDAGraph

            self.stream = ctypes.c_void_p(stream_handle())
            self._paddle_graph = CUDAGraph()
            self._paddle_graph.capture_begin()
            try:
                fn()
            finally:
                self._paddle_graph.capture_end()
            synchronize()
            return
        rt = self._rt = cudart()
        self._side = (
            paddle.device.cuda.Stream() if side_stream else None
        )  # kept alive with the graph
        self.stream = ctypes.c_void_p(stream_handle(self._side))
        graph = ctypes.c_void_p()
        with paddle.device.cuda.stream_guard(self._side) if side_stream else nullcontext():
            check(
                rt.cudaStreamBeginCapture(self.stream, CAPTURE_MODE_RELAXED),
                "cudaStreamBeginCapture",
            )
            try:
                fn()
            finally:
                status = rt.cudaStreamEndCapture(self.stream, ctypes.byref(graph))
        check(status, "cudaStreamEndCapture")
        self.graph = graph
        nodes = ctypes.c_size_t(0)
        check(rt.cudaGraphGetNodes(graph, None, ctypes.byref(nodes)), "cudaGraphGetNodes")
        if nodes.value == 0:
            raise RuntimeError("the captured graph is empty: the work ran on another stream")
        self.exec = ctypes.c_void_p()
        check(
            rt.cudaGraphInstantiateWithFlags(ctypes.byref(self.exec), graph, ctypes.c_ulonglong(0)),
            "cudaGraphInstantiateWithFlags",
        )
        synchronize()

    def launch(self) -> None:
        """Enqueues one replay on the graph's stream (no synchronisation)."""
        if self._paddle_graph is not None:
            self._paddle_graph.replay()
        else:
            check(cudart().cudaGraphLaunch(self.exec, self.stream), "cudaGraphLaunch")

    def replay(self) -> None:
        """One replay after the work already queued on Paddle's stream (input copies), waited for."""
        if self._paddle_graph is not None:
            self._paddle_graph.replay()
            synchronize()
            return
        synchronize()
        self.launch()
        check(self._rt.cudaStreamSynchronize(self.stream), "cudaStreamSynchronize")

    def time_ms(self, reps: int) -> float:
        """Milliseconds for ``reps`` replays, between CUDA events recorded where the replays run."""
        if self._paddle_graph is not None:
            import paddle

            start, end = (
                paddle.device.Event(enable_timing=True),
                paddle.device.Event(enable_timing=True),
            )
            start.record()
            for _ in range(reps):
                self._paddle_graph.replay()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        rt = self._rt
        events = [ctypes.c_void_p(), ctypes.c_void_p()]
        for e in events:
            check(rt.cudaEventCreate(ctypes.byref(e)), "cudaEventCreate")
        try:
            check(rt.cudaEventRecord(events[0], self.stream), "cudaEventRecord")
            for _ in range(reps):
                self.launch()
            check(rt.cudaEventRecord(events[1], self.stream), "cudaEventRecord")
            check(rt.cudaEventSynchronize(events[1]), "cudaEventSynchronize")
            ms = ctypes.c_float(0.0)
            check(
                rt.cudaEventElapsedTime(ctypes.byref(ms), events[0], events[1]),
                "cudaEventElapsedTime",
            )
        finally:
            for e in events:
                rt.cudaEventDestroy(e)
        return ms.value

    def __del__(self) -> None:
        rt = getattr(self, "_rt", None)
        if rt is not None and self.exec:
            rt.cudaGraphExecDestroy(self.exec)
        if rt is not None and self.graph:
            rt.cudaGraphDestroy(self.graph)


class L2Flush:
    """A device-to-device copy between two buffers each larger than the L2 cache.

    Called inside a captured graph before each timed call, it leaves the L2 full of its own lines, so
    the call finds none of its inputs there: what a decode step sees after the model's forward. Each
    buffer holds ``max(128 MiB, 2 x L2)`` bytes, allocated once with ``cudaMalloc``.
    """

    def __init__(self) -> None:
        rt = cudart()
        device, l2 = ctypes.c_int(0), ctypes.c_int(0)
        check(rt.cudaGetDevice(ctypes.byref(device)), "cudaGetDevice")
        check(
            rt.cudaDeviceGetAttribute(ctypes.byref(l2), DEV_ATTR_L2_CACHE_SIZE, device),
            "cudaDeviceGetAttribute",
        )
        self.l2_bytes = int(l2.value)
        self.bytes = max(COLD_L2_MIN_BYTES, 2 * self.l2_bytes)
        self.src, self.dst = ctypes.c_void_p(), ctypes.c_void_p()
        for buf in (self.src, self.dst):
            check(rt.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(self.bytes)), "cudaMalloc")
        check(rt.cudaMemset(self.src, 1, ctypes.c_size_t(self.bytes)), "cudaMemset")
        check(rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

    def __call__(self) -> None:
        """Enqueues the copy on Paddle's current stream (the capture stream inside a capture)."""
        check(
            cudart().cudaMemcpyAsync(
                self.dst,
                self.src,
                self.bytes,
                MEMCPY_DEVICE_TO_DEVICE,
                ctypes.c_void_p(stream_handle()),
            ),
            "cudaMemcpyAsync",
        )

    def close(self) -> None:
        rt = cudart()
        for buf in (self.src, self.dst):
            if buf:
                rt.cudaFree(buf)
        self.src, self.dst = ctypes.c_void_p(), ctypes.c_void_p()


def _median_graph_us(
    body: Callable[[], None], calls: int, reps: int, rounds: int, backend: str
) -> tuple[float, float]:
    """(median, min) over ``rounds`` of the time per call of a graph of ``calls`` calls of ``body``."""
    graph = Graph(lambda: [body() for _ in range(calls)], backend)
    for _ in range(2):
        graph.launch()
    synchronize()
    samples = [graph.time_ms(reps) * 1e3 / (reps * calls) for _ in range(rounds)]
    return statistics.median(samples), min(samples)


def time_graph_us(
    fn: Callable[[], None],
    *,
    calls: int = 20,
    reps: int = 10,
    rounds: int = 15,
    warmup: int = 3,
    setup: Optional[Callable[[], None]] = None,
    cold_l2: Optional[L2Flush] = None,
    backend: str = "cudart",
) -> dict:
    """Device time of one call of ``fn``, in microseconds.

    A graph holds ``calls`` back-to-back calls; CUDA events bracket ``reps`` replays of it; the time
    per call is the median over ``rounds`` (``median_us``, with ``min_us``). Before each call inside
    the graph run, in order, ``cold_l2()`` (an :class:`L2Flush`: the call starts with a cold L2) and
    ``setup()`` (e.g. restoring an in-place input the op reads); the same graph without ``fn`` is
    timed too (``overhead_us``) and subtracted. Nothing is allocated in the timed loop.
    """
    prologue = [f for f in (cold_l2, setup) if f is not None]

    def before() -> None:
        for f in prologue:
            f()

    def body() -> None:
        before()
        fn()

    for _ in range(warmup):
        body()
    synchronize()
    median, low = _median_graph_us(body, calls, reps, rounds, backend)
    overhead = _median_graph_us(before, calls, reps, rounds, backend)[0] if prologue else 0.0
    return {
        "median_us": median - overhead,
        "min_us": low - overhead,
        "overhead_us": overhead,
        "method": "paddle.CUDAGraph" if backend == "paddle" else "cudaStreamBeginCapture",
    }


class StreamTimer:
    """Per-iteration GPU time of eager calls that enqueue work on one stream.

    For work that cannot be captured in a graph (PyTorch baselines): the stream is first held busy by
    ``torch.cuda._sleep`` long enough for the host to enqueue every iteration, then a CUDA event is
    recorded after each one, so the interval between consecutive events is the GPU time of one
    iteration (no host gap, no launch latency). Returns the median over ``iters`` iterations, after
    ``warmup`` iterations, in microseconds. PyTorch joins Paddle's stream through
    ``torch.cuda.ExternalStream``.
    """

    GPU_CLOCK_HZ = 2.0e9  # upper bound for H100/H200 SM clocks: sizes the stream-holding sleep

    def __init__(self, torch, iters: int, warmup: int, stream=None) -> None:
        self.torch = torch
        self.stream = torch.cuda.ExternalStream(stream_handle(stream))
        self.iters, self.warmup = iters, warmup
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]

    def sync(self) -> None:
        synchronize()
        self.torch.cuda.synchronize()

    def __call__(self, fn: Callable[[], object]) -> float:
        torch = self.torch
        with torch.cuda.stream(self.stream):
            self.sync()
            t0 = time.perf_counter()
            for _ in range(self.warmup):
                fn()
            host_per_iter = (time.perf_counter() - t0) / max(self.warmup, 1)
            self.sync()
            torch.cuda._sleep(int(2 * host_per_iter * self.iters * self.GPU_CLOCK_HZ) + 100_000)
            self.events[0].record(self.stream)
            for i in range(self.iters):
                fn()
                self.events[i + 1].record(self.stream)
            self.sync()
        times: List[float] = [
            self.events[i].elapsed_time(self.events[i + 1]) * 1e3 for i in range(self.iters)
        ]
        return statistics.median(times)
