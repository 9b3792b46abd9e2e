"""Timing helpers shared by the benchmark scripts (GPU machine: Paddle 2.6.2 or 3.x GPU).

GPU time of an op is measured on CUDA-graph replays: one graph holds ``calls`` back-to-back calls of
the op, CUDA events bracket ``reps`` replays, and the median over rounds divided by ``calls`` is the
op's own device time (kernels plus the gaps between them, without Python or launch overhead). Host
time is the wall-clock time of one eager Python call, measured separately.

Capture goes through the CUDA runtime (``cudaStreamBeginCapture`` on Paddle's current stream, via
ctypes), which is the stream the ops launch on; Paddle 2.6's ``CUDAGraph`` captured an empty graph
there. A capture with no node is refused, so an empty graph can never pass for a fast op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import paddle


def gpu_place():
    return paddle.CUDAPlace(0)


def to_gpu(a: np.ndarray) -> paddle.Tensor:
    return paddle.to_tensor(np.ascontiguousarray(a), place=gpu_place())


def sync() -> None:
    paddle.device.cuda.synchronize()


def _raw_stream() -> int:
    s = paddle.device.cuda.current_stream()
    handle = getattr(s, "cuda_stream", None)
    if handle is None:
        handle = s.stream_base.cuda_stream
    return int(handle.value if isinstance(handle, ctypes.c_void_p) else handle)


class _RuntimeGraph:
    """A CUDA graph captured with the CUDA runtime on Paddle's current stream."""

    def __init__(self) -> None:
        name = None
        for cand in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
            try:
                self.rt = ctypes.CDLL(cand)
                name = cand
                break
            except OSError:
                continue
        if name is None:
            path = ctypes.util.find_library("cudart")
            if path is None:
                raise RuntimeError("libcudart not found for CUDA-graph capture")
            self.rt = ctypes.CDLL(path)
        self.stream = ctypes.c_void_p(_raw_stream())
        self.graph = ctypes.c_void_p()
        self.exec = ctypes.c_void_p()

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed with CUDA error {status}")

    def capture(self, fn: Callable[[], None]) -> None:
        relaxed = 2  # cudaStreamCaptureModeRelaxed: Paddle may query the device meanwhile
        self._check(self.rt.cudaStreamBeginCapture(self.stream, relaxed), "cudaStreamBeginCapture")
        try:
            fn()
        finally:
            self._check(self.rt.cudaStreamEndCapture(self.stream, ctypes.byref(self.graph)),
                        "cudaStreamEndCapture")
        nodes = ctypes.c_size_t(0)
        self._check(self.rt.cudaGraphGetNodes(self.graph, None, ctypes.byref(nodes)), "cudaGraphGetNodes")
        if nodes.value == 0:
            raise RuntimeError("the captured graph is empty: the op ran on another stream")
        self._check(self.rt.cudaGraphInstantiate(ctypes.byref(self.exec), self.graph,
                                                 ctypes.c_ulonglong(0)), "cudaGraphInstantiate")

    def replay(self) -> None:
        self._check(self.rt.cudaGraphLaunch(self.exec, self.stream), "cudaGraphLaunch")

    def time_ms(self, reps: int) -> float:
        """Milliseconds for `reps` replays, between CUDA events recorded on the replay stream."""
        ev = [ctypes.c_void_p(), ctypes.c_void_p()]
        for e in ev:
            self._check(self.rt.cudaEventCreate(ctypes.byref(e)), "cudaEventCreate")
        self._check(self.rt.cudaEventRecord(ev[0], self.stream), "cudaEventRecord")
        for _ in range(reps):
            self.replay()
        self._check(self.rt.cudaEventRecord(ev[1], self.stream), "cudaEventRecord")
        self._check(self.rt.cudaEventSynchronize(ev[1]), "cudaEventSynchronize")
        ms = ctypes.c_float(0.0)
        self._check(self.rt.cudaEventElapsedTime(ctypes.byref(ms), ev[0], ev[1]), "cudaEventElapsedTime")
        for e in ev:
            self.rt.cudaEventDestroy(e)
        return ms.value


class _PaddleGraph:
    def __init__(self) -> None:
        from paddle.device.cuda.graphs import CUDAGraph
        self.g = CUDAGraph()

    def capture(self, fn: Callable[[], None]) -> None:
        self.g.capture_begin()
        try:
            fn()
        finally:
            self.g.capture_end()

    def replay(self) -> None:
        self.g.replay()


def capture_graph(fn: Callable[[], None], prefer: str = "runtime"):
    """Captures ``fn`` (already warmed up) into a replayable graph; returns (graph, method name).
    No silent fallback from one method to the other: an empty graph would time as zero."""
    order = [_PaddleGraph] if prefer == "paddle" else [_RuntimeGraph]
    errors = []
    for cls in order:
        try:
            g = cls()
            sync()
            g.capture(fn)
            sync()
            return g, ("paddle.CUDAGraph" if cls is _PaddleGraph else "cudaStreamBeginCapture")
        except Exception as exc:  # try the other capture method
            errors.append(f"{cls.__name__}: {exc}")
            sync()
    raise RuntimeError("CUDA-graph capture failed: " + "; ".join(errors))


def timing_event():
    """A CUDA event with timing (paddle.device.Event has elapsed_time on Paddle 2.6 and 3.x)."""
    return paddle.device.Event(enable_timing=True)


def graph_time_us(fn: Callable[[], None], calls: int = 20, reps: int = 10, rounds: int = 15,
                  prefer: str = "runtime") -> Dict[str, float]:
    """Device time of one call of ``fn``: median over ``rounds`` of (reps replays of a graph of
    ``calls`` calls) / (reps * calls), in microseconds."""
    for _ in range(3):
        fn()
    sync()
    g, method = capture_graph(lambda: [fn() for _ in range(calls)], prefer)
    start, end = timing_event(), timing_event()
    for _ in range(2):
        g.replay()
    sync()
    samples: List[float] = []
    for _ in range(rounds):
        if isinstance(g, _RuntimeGraph):
            ms = g.time_ms(reps)
        else:
            start.record()
            for _ in range(reps):
                g.replay()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        samples.append(ms * 1e3 / (reps * calls))
    return {"median_us": statistics.median(samples), "min_us": min(samples), "method": method}


def host_time_us(fn: Callable[[], None], iters: int = 200, rounds: int = 5) -> float:
    """Median wall-clock time of one eager call, the device drained before and after each round."""
    for _ in range(5):
        fn()
    sync()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) * 1e6 / iters)
    return statistics.median(samples)


def wall_time_us(fn: Callable[[], None], iters: int, rounds: int = 3) -> float:
    """Median wall-clock time of one synchronous call (for host paths that end in a sync)."""
    fn()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        samples.append((time.perf_counter() - t0) * 1e6 / iters)
    return statistics.median(samples)


def device_name() -> str:
    try:
        return paddle.device.cuda.get_device_name()
    except Exception:
        return "unknown"


def write_results(out_dir: str, name: str, meta: dict, rows: List[dict]) -> Path:
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    target = path / f"{name}.json"
    target.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    return target


def print_table(rows: List[dict], columns: List[tuple]) -> str:
    """columns: (key, header, format). Returns the table as Markdown and prints it."""
    head = "| " + " | ".join(h for _, h, _ in columns) + " |"
    sep = "|" + "|".join("---:" for _ in columns) + "|"
    lines = [head, sep]
    for r in rows:
        lines.append("| " + " | ".join(fmt.format(r[k]) if r.get(k) is not None else "-"
                                       for k, _, fmt in columns) + " |")
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def require_gpu(script: str) -> None:
    import zlib  # noqa: F401
    from fastdeploy_spec import ops
    if not (paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0):
        raise SystemExit(f"{script}: needs a CUDA GPU and GPU Paddle (this machine has none)")
    if not ops.with_cuda():
        raise SystemExit(f"{script}: the op library has no CUDA kernels; build it with CUDA_HOME set")
    os.environ.setdefault("FLAGS_cudnn_deterministic", "0")


# The n-gram benchmarks' grid: batch sizes x row widths (and a smaller one for --quick).
GRID = ((1, 8, 64, 256), (1 << 10, 1 << 13, 1 << 15, 1 << 17))
QUICK_GRID = ((1, 64, 256), (1 << 13, 1 << 15, 1 << 17))


def plot_latency_vs_width(rows: List[dict], out: Path, title: str, xlabel: str) -> None:
    """Log-log plot of GPU and CPU-path latency against W, one colour per batch size (late hits)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for B in sorted({r["B"] for r in rows}):
        sel = sorted((r for r in rows if r["B"] == B and r["hit"] == "late"), key=lambda r: r["W"])
        if not sel:
            continue
        ws = [r["W"] for r in sel]
        line, = ax.plot(ws, [r["gpu_us"] for r in sel], "o-", label=f"GPU B={B}")
        ax.plot(ws, [r["cpu_path_us"] for r in sel], "x--", color=line.get_color(),
                label=f"CPU path B={B}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("latency per call (us)")
    ax.set_title(f"{title} ({device_name()})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out)
