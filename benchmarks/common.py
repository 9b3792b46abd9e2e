"""What the benchmark scripts share: the timer, result files, tables, and the n-gram benchmark driver.

GPU time is measured by ``benchmarks.gpu_timer`` (the timer the graph-replay test uses
too): a CUDA graph of ``calls`` back-to-back calls of the op, CUDA events around ``reps`` replays,
the median over rounds divided by ``calls``, after warm-up. That is the op's own device time (kernels
and the gaps between them, without Python or launch overhead). Two cache conditions:

* warm: the op's inputs stay in L2 between calls, as they do when one op runs in a loop;
* cold: before each call the graph copies a buffer larger than L2 (``max(128 MiB, 2 x L2)``, see
  ``L2Flush``), so the call starts with none of its inputs in L2, as a decode step does after the
  model's forward; the same graph with the copy alone is timed too and subtracted.

Host time is the wall-clock time of one eager Python call, measured separately.

``run_ngram_bench`` drives the ngram and hybrid routines: the same grid, inputs, checks,
warm and cold rows, table, JSON file and plot for either op. ``--dry-run`` runs every part that needs
no GPU (inputs, argument order, the CPU op, table, JSON, plot) on a tiny grid, on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import paddle

from benchmarks.gpu_timer import L2Flush, time_graph_us


def gpu_place():
    return paddle.CUDAPlace(0)


def to_gpu(a: np.ndarray) -> paddle.Tensor:
    return paddle.to_tensor(np.ascontiguousarray(a), place=gpu_place())


def sync() -> None:
    paddle.device.cuda.synchronize()


def copy_into(dst: paddle.Tensor, src: paddle.Tensor) -> None:
    """Copy into an existing tensor (a memcpy into its allocation, no Paddle compute kernel)."""
    dst.copy_(src, False) if hasattr(dst, "copy_") else dst._copy_from(src, False)


def wall_time_us(
    fn: Callable[[], None],
    iters: int,
    rounds: int = 3,
    warmup: int = 1,
    drain: Callable[[], None] = lambda: None,
) -> float:
    """Median over ``rounds`` of the wall-clock time of one call, ``iters`` calls per round after
    ``warmup`` calls; ``drain()`` runs after the warm-up and at the end of each round (inside it)."""
    for _ in range(warmup):
        fn()
    drain()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        drain()
        samples.append((time.perf_counter() - t0) * 1e6 / iters)
    return statistics.median(samples)


def host_time_us(fn: Callable[[], None], iters: int = 200, rounds: int = 5) -> float:
    """Median wall-clock time of one eager call, the device drained before and after each round."""
    return wall_time_us(fn, iters, rounds, warmup=5, drain=sync)


def device_name() -> str:
    try:
        return paddle.device.cuda.get_device_name()
    except Exception:
        return "unknown"


# The command that reproduces this run, set by the entry point (python -m benchmarks).
REPRO = ""


def write_results(out_dir: str, name: str, meta: dict, rows: List[dict]) -> Path:
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    target = path / f"{name}.json"
    meta = dict(meta, repro=REPRO) if REPRO else meta
    target.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    return target


def report(
    out_dir: str,
    name: str,
    meta: dict,
    rows: List[dict],
    columns: Sequence,
    plot: Optional[Callable[[List[dict], Path], None]] = None,
) -> Path:
    """The end of a timing routine: ``<name>.json`` (meta and rows), ``<name>.png`` drawn by
    ``plot(rows, path)``, the device line and the table of ``columns`` (see ``print_table``).
    ``meta`` is prefixed here with the device and the Paddle version, which every result file and the
    device line need (a ``device`` in ``meta`` wins: the n-gram dry run names itself)."""
    meta = {"device": device_name(), "paddle": paddle.__version__, **meta}
    path = write_results(out_dir, name, meta, rows)
    if plot is not None:
        plot(rows, Path(out_dir) / f"{name}.png")
    print(f"\n{meta['device']}, Paddle {meta['paddle']}; results in {path}\n")
    print_table(rows, columns)
    return path


def pyplot():
    """matplotlib's pyplot (Agg), or None with a message when matplotlib is not installed: the plot
    is optional (the ``bench`` extra), the JSON and the table are not."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)", flush=True)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# Table columns that several routines print alike: key -> (header, format).
COLUMNS = {
    "B": ("B", "{}"),
    "W": ("W", "{}"),
    "hit": ("hit", "{}"),
    "gpu_us": ("GPU warm us", "{:.2f}"),
    "gpu_warm_us": ("GPU warm us", "{:.2f}"),
    "gpu_cold_us": ("GPU cold us", "{:.2f}"),
    "host_us": ("host us/call", "{:.1f}"),
    "speedup": ("speed-up", "{:.0f}x"),
    "identical": ("identical", "{}"),
    "bit_identical": ("identical", "{}"),
}


def print_table(rows: List[dict], columns: Sequence) -> str:
    """columns: (key, header, format) each, or the key alone of one of ``COLUMNS``. Returns the
    table as Markdown and prints it."""
    columns = [(c, *COLUMNS[c]) if isinstance(c, str) else c for c in columns]
    head = "| " + " | ".join(h for _, h, _ in columns) + " |"
    sep = "|" + "|".join("---:" for _ in columns) + "|"
    lines = [head, sep]
    for r in rows:
        lines.append(
            "| "
            + " | ".join(fmt.format(r[k]) if r.get(k) is not None else "-" for k, _, fmt in columns)
            + " |"
        )
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def require_gpu(script: str) -> None:
    from fastdeploy_spec import ops

    if not (paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0):
        raise SystemExit(
            f"{script}: needs a CUDA GPU and GPU Paddle (this machine has none; "
            f"--dry-run runs the rest on the CPU)"
        )
    if not ops.with_cuda():
        raise SystemExit(
            f"{script}: the op library has no CUDA kernels; build it with CUDA_HOME set"
        )
    os.environ.setdefault("FLAGS_cudnn_deterministic", "0")


# ---- The n-gram benchmarks (routines ngram, hybrid) --------------------------------------

# Batch sizes x row widths; a smaller grid for --quick, a tiny one for --dry-run.
GRID = ((1, 8, 64, 256), (1 << 10, 1 << 13, 1 << 15, 1 << 17))
QUICK_GRID = ((1, 64, 256), (1 << 13, 1 << 15, 1 << 17))
DRY_RUN_GRID = ((1, 4), (256,))
HITS = ("early", "late", "none")
HIT_AT = {"early": 0.01, "late": 0.90}  # where the planted n-gram sits in the prompt
VOCAB = 50_000  # tokens are drawn from it; the planted n-gram lies outside
K = 5
MAX_NGRAM = 3
THRESHOLD = 1 << 40  # passed explicitly: the budget never binds, every slot searches


def random_rows(rng: np.random.Generator, B: int, W: int) -> np.ndarray:
    """int64 [B, W] tokens from the vocabulary."""
    return rng.integers(0, VOCAB, size=(B, W), dtype=np.int64)


def planted_ngram(b: int) -> np.ndarray:
    """The newest MAX_NGRAM tokens of slot b: ids outside the vocabulary, distinct per slot."""
    return np.arange(VOCAB + MAX_NGRAM * b, VOCAB + MAX_NGRAM * (b + 1), dtype=np.int64)


def plant_in_prompt(ids: np.ndarray, P: int, hit: str) -> None:
    """Copies each slot's n-gram into its prompt where ``hit`` says (nowhere for ``none``)."""
    if hit in HIT_AT:
        at = int(HIT_AT[hit] * P)
        for b in range(ids.shape[0]):
            ids[b, at : at + MAX_NGRAM] = planted_ngram(b)


def decoding_slots(
    ids: np.ndarray, P: int, s: int, drafts: np.ndarray, seq_lens_this_time: int
) -> Dict[str, np.ndarray]:
    """The n-gram family's nine inputs for B decoding slots (``ids`` [B, W]) that each hold a prompt
    of P tokens and s generated ones: K drafts allowed, a decode limit that never binds."""
    B = ids.shape[0]
    return {
        "token_ids_all": ids,
        "prompt_lens": np.full((B, 1), P, np.int64),
        "step_idx": np.full((B, 1), s, np.int64),
        "draft_token_num": np.full((B,), K, np.int32),
        "draft_tokens": drafts,
        "seq_lens_this_time": np.full((B,), seq_lens_this_time, np.int32),
        "seq_lens_encoder": np.zeros((B,), np.int32),
        "seq_lens_decoder": np.full((B,), P + s, np.int32),
        "max_dec_len": np.full((B, 1), 1 << 40, np.int64),
    }


@dataclass
class NgramBench:
    """One n-gram op under the shared driver.

    ``make_case(B, W, hit)`` returns the host inputs by name; ``args`` names them in the op's order
    and ``attrs`` follow them. ``restore`` names an in-place input the op also reads: it is restored
    from a copy before each call (timed alone and subtracted, like the cold-L2 copy). ``extra(outputs)``
    adds columns from the CPU op's outputs.
    """

    script: str
    op: Callable[..., None]
    args: Tuple[str, ...]
    attrs: Tuple[int, ...]
    make_case: Callable[[int, int, str], Dict[str, np.ndarray]]
    meta: Dict[str, object]
    plot_title: str
    plot_xlabel: str
    restore: Optional[str] = None
    extra: Callable[[Dict[str, np.ndarray]], Dict[str, object]] = lambda outputs: {}
    outputs: Tuple[str, ...] = ("draft_tokens", "seq_lens_this_time")
    extra_columns: List[tuple] = field(default_factory=list)
    doc: str = ""  # the routine's module docstring: its --help

    @property
    def name(self) -> str:
        return Path(self.script).stem

    def main(self, argv: Optional[Sequence[str]] = None) -> List[dict]:
        """The routine's entry point (``run_ngram_bench``)."""
        return run_ngram_bench(self, argv, self.doc)

    def call(self, t: Dict[str, paddle.Tensor]) -> None:
        self.op(*(t[k] for k in self.args), *self.attrs, threshold=THRESHOLD)


def _cpu_outputs(spec: NgramBench, host: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    cpu = {k: paddle.to_tensor(v, place=paddle.CPUPlace()) for k, v in host.items()}
    spec.call(cpu)
    return {k: cpu[k].numpy() for k in spec.outputs}


def _bench_case(
    spec: NgramBench, B: int, W: int, hit: str, quick: bool, flush: Optional[L2Flush]
) -> dict:
    host = spec.make_case(B, W, hit)
    row: Dict[str, object] = {"B": B, "W": W, "hit": hit}
    want = _cpu_outputs(spec, host)
    row.update(spec.extra(want))
    bytes_read = B * ((3 * W) // 4 + W // 8) * 8  # the haystacks: prompt 3/4 of W, W/8 generated
    work = B * W
    iters = 1 if work > (1 << 23) else (3 if work > (1 << 19) else 20)
    if flush is None:  # --dry-run: the CPU op alone
        cpu = {k: paddle.to_tensor(v, place=paddle.CPUPlace()) for k, v in host.items()}
        row["cpu_op_us"] = wall_time_us(lambda: spec.call(cpu), iters=iters, rounds=1)
        return row

    gpu = {k: to_gpu(v) for k, v in host.items()}
    saved = to_gpu(host[spec.restore]) if spec.restore is not None else None
    setup = None if saved is None else (lambda: copy_into(gpu[spec.restore], saved))

    def step() -> None:
        if setup is not None:
            setup()
        spec.call(gpu)

    timing = dict(calls=10 if quick else 20, reps=5 if quick else 10, rounds=7 if quick else 15)
    warm = time_graph_us(lambda: spec.call(gpu), setup=setup, **timing)
    cold = time_graph_us(lambda: spec.call(gpu), setup=setup, cold_l2=flush, **timing)
    row["host_us"] = host_time_us(step, iters=50 if quick else 200)

    fresh = {k: to_gpu(v) for k, v in host.items()}
    spec.call(fresh)
    row["bit_identical"] = all(np.array_equal(fresh[k].numpy(), want[k]) for k in spec.outputs)

    def cpu_path() -> None:
        staged = {k: gpu[k].cpu() for k in spec.args}
        if spec.restore is not None:
            staged[spec.restore] = saved.cpu()
        spec.call(staged)
        for k in spec.outputs:
            copy_into(gpu[k], staged[k])
        sync()

    row["cpu_path_us"] = wall_time_us(cpu_path, iters=iters, rounds=1 if quick else 3)
    row.update(
        gpu_us=warm["median_us"],
        gpu_cold_us=cold["median_us"],
        gpu_min_us=warm["min_us"],
        warm_subtracted_us=warm["overhead_us"],
        cold_subtracted_us=cold["overhead_us"],
        capture=warm["method"],
        speedup=row["cpu_path_us"] / warm["median_us"],
        haystack_GBps=bytes_read / (warm["median_us"] * 1e3),
        haystack_cold_GBps=bytes_read / (cold["median_us"] * 1e3),
    )
    return row


def _plot(rows: List[dict], out: Path, title: str, xlabel: str) -> None:
    """Log-log plot of latency against W, one colour per batch size (late hits): GPU warm and cold,
    and the CPU path (the CPU op alone in a dry run)."""
    plt = pyplot()
    if plt is None:
        return

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for B in sorted({r["B"] for r in rows}):
        sel = sorted((r for r in rows if r["B"] == B and r["hit"] == "late"), key=lambda r: r["W"])
        ws = [r["W"] for r in sel]
        color = None
        for key, style, label in (
            ("gpu_us", "o-", "GPU warm"),
            ("gpu_cold_us", "s:", "GPU cold"),
            ("cpu_path_us", "x--", "CPU path"),
            ("cpu_op_us", "x--", "CPU op"),
        ):
            if sel and sel[0].get(key) is not None:
                (line,) = ax.plot(
                    ws, [r[key] for r in sel], style, color=color, label=f"{label} B={B}"
                )
                color = line.get_color()
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("latency per call (us)")
    ax.set_title(f"{title} ({device_name()})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def run_ngram_bench(
    spec: NgramBench, argv: Optional[Sequence[str]] = None, doc: str = ""
) -> List[dict]:
    """Parses the script's arguments, times every (B, W, hit) warm and cold, checks GPU == CPU, and
    writes ``<name>.json`` and ``<name>.png`` into ``--out``; prints a line per row and a table."""
    ap = argparse.ArgumentParser(prog=spec.script, description=doc.splitlines()[0] if doc else None)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: build the inputs of a tiny grid, run the CPU op, write the files",
    )
    ap.add_argument("--out", default=f"results/{spec.name}")
    args = ap.parse_args(argv)
    if args.dry_run:
        grid, flush = DRY_RUN_GRID, None
    else:
        require_gpu(spec.script)
        grid, flush = (QUICK_GRID if args.quick else GRID), L2Flush()

    rows = []
    for B in grid[0]:
        for W in grid[1]:
            for hit in HITS:
                r = _bench_case(spec, B, W, hit, args.quick, flush)
                rows.append(r)
                if flush is None:
                    print(
                        f"B={B:4d} W={W:7d} {hit:5s}: CPU op {r['cpu_op_us']:9.1f} us (dry run)",
                        flush=True,
                    )
                    continue
                print(
                    f"B={B:4d} W={W:7d} {hit:5s}: GPU warm {r['gpu_us']:8.2f} us  cold {r['gpu_cold_us']:8.2f} us"
                    f"  host {r['host_us']:7.1f} us  CPU path {r['cpu_path_us']:11.1f} us"
                    f"  x{r['speedup']:8.0f}  identical={r['bit_identical']}",
                    flush=True,
                )
    meta = dict(
        spec.meta,
        K=K,
        max_ngram_size=MAX_NGRAM,
        vocab=VOCAB,
        prompt="3/4 W",
        threshold=f"non-binding, passed explicitly ({THRESHOLD})",
        gpu_time="CUDA events around replays of a graph of back-to-back calls, median per call; "
        "gpu_us warm (inputs stay in L2), gpu_cold_us with a copy of "
        f"{flush.bytes if flush else 0} bytes (L2 {flush.l2_bytes if flush else 0} bytes) "
        "before each call, that copy timed alone and subtracted",
    )
    if flush is not None:
        flush.close()
    if flush is None:
        meta["device"] = "cpu (dry run)"
        columns = ["B", "W", "hit", ("cpu_op_us", "CPU op us", "{:.1f}")]
    else:
        columns = [
            "B",
            "W",
            "hit",
            "gpu_us",
            "gpu_cold_us",
            "host_us",
            ("cpu_path_us", "CPU path us", "{:.0f}"),
            ("speedup", "speed-up (warm)", "{:.0f}x"),
            ("haystack_GBps", "GB/s warm", "{:.0f}"),
            ("haystack_cold_GBps", "GB/s cold", "{:.0f}"),
            "bit_identical",
        ]
    report(
        args.out,
        spec.name,
        meta,
        rows,
        columns + spec.extra_columns,
        lambda rows, path: _plot(rows, path, spec.plot_title, spec.plot_xlabel),
    )
    return rows


# ---- Dry runs: any GPU routine on the CPU, tiny sizes ----------------------------------------------

DRY_RUN = False


class _NoFlush:
    """The dry run's stand-in for L2Flush: no device, nothing to flush."""

    bytes = 0
    l2_bytes = 0

    def __call__(self) -> None:
        pass

    def close(self) -> None:
        pass


def _cpu_time_us(fn: Callable[[], None], **_ignored) -> dict:
    """The dry run's stand-in for time_graph_us: one eager call's wall time on the CPU."""
    us = wall_time_us(fn, iters=1, rounds=1, warmup=1)
    return {"median_us": us, "min_us": us, "overhead_us": 0.0, "method": "cpu wall clock (dry run)"}


def enable_dry_run(module) -> None:
    """Runs ``module`` (a routine) on the CPU: tensors on the CPU, the timer a wall clock, no L2
    flush, the sizes in its ``DRY_RUN_SIZES``. What it proves without a GPU: the inputs build, the
    op takes its arguments in order, the reference check runs and passes, and the JSON, table and
    plot are written. Its figures mean nothing."""
    global DRY_RUN, gpu_place, sync, require_gpu, device_name
    DRY_RUN = True
    gpu_place = paddle.CPUPlace  # noqa: F811  (to_gpu and the routines' tensors go to the CPU)
    sync = lambda: None  # noqa: E731
    require_gpu = lambda script: None  # noqa: E731
    device_name = lambda: "cpu (dry run)"  # noqa: E731
    module.time_graph_us = _cpu_time_us
    module.L2Flush = _NoFlush
    for name, value in getattr(module, "DRY_RUN_SIZES", {}).items():
        setattr(module, name, value)


def place_name() -> str:
    """The place name the routines pass to the library's buffer helpers: "gpu", "cpu" in a dry run."""
    return "cpu" if DRY_RUN else "gpu"


def plot_by_batch(
    path: Path,
    groups: Dict[str, List[dict]],
    series: Sequence[Tuple[str, str, str]],
    title: str,
    ylabel: str = "us per step",
    target: Optional[float] = None,
    ylog: bool = True,
) -> None:
    """The routines' plot: time against B on log axes, one colour per group of rows (a history length,
    a cache size, a configuration), one line style per series (key, style, label) of each group."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, rows in groups.items():
        rows = sorted(rows, key=lambda r: r["B"])
        color = None
        for key, style, label in series:
            (line,) = ax.plot(
                [r["B"] for r in rows],
                [r[key] for r in rows],
                style,
                color=color,
                label=f"{label}, {name}",
            )
            color = line.get_color()
    if target is not None:
        ax.axhline(target, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    if ylog:
        ax.set_yscale("log")
    ax.set(xlabel="B (slots)", ylabel=ylabel, title=title)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
