"""Per-step device time of the suffix-decoding proposer (``suffix_match``) against the host path.

For B in {1, 8, 64, 256} slots and histories of N in {1k, 8k, 32k} tokens (K = 5, max_tree_depth
64, FastDeploy's defaults, a non-binding batch budget so that every slot drafts), it reports

* GPU warm: the op's device time per call, CUDA events around replays of a captured graph of
  back-to-back calls (benchmarks/gpu_timer.time_graph_us); the histories stay in L2
  where they fit;
* GPU cold: the same with gpu_timer's L2Flush (a device copy of max(128 MiB, 2 x L2)) before every
  call inside the graph, minus a graph of the copies alone;
* host: wall-clock time of one eager Python call (launch overhead);
* CPU path: what FastDeploy's SUFFIX method does instead, modelled with our CPU op: device->host
  copies of the inputs, the CPU implementation, host->device copies of the outputs;

checks that the GPU and CPU results are bit-identical, and writes a table, a JSON file and a plot.
Histories are text-like: Zipf-distributed tokens over a 32k vocabulary whose last 256 tokens repeat
an earlier stretch (so long matches exist and the warp path and the block path both run).

    python -m benchmarks --routine suffix [--quick] [--out results/bench_suffix]

The same rows at the kernel layer without Paddle (the device time per step, warm and cold, each row
checked against the CPU op): benchmarks/kernels/bench_suffix_kernels.cu; its ``--stages B N`` times the search
and the walk kernels apart and, built with PROFILE=1 (benchmarks/kernels/build.sh), prints per-stage clocks of the
search. The budget here never binds, so the op runs as one kernel (docs/contract/suffix.md).
"""

from __future__ import annotations

import argparse
import zlib  # noqa: F401  (before paddle: Paddle 2.6 crashes in zlib otherwise)
from pathlib import Path

import numpy as np
import paddle  # noqa: E402

from benchmarks import common as bc  # noqa: E402
from benchmarks.gpu_timer import L2Flush, time_graph_us  # noqa: E402
from fastdeploy_spec.ops import suffix_match  # noqa: E402
from fastdeploy_spec.ops.suffix_match import SPEC as SUFFIX_SPEC  # noqa: E402

K = 5
VOCAB = 32_000
BATCHES = (1, 8, 64, 256)
HISTORIES = (1 << 10, 1 << 13, 1 << 15)
DRY_RUN_SIZES = {"BATCHES": (1, 4), "HISTORIES": (1 << 10,)}  # --dry-run (benchmarks/common.py)
ARGS = SUFFIX_SPEC.tensors  # the op's tensor order, the wrapper's own
OUTS = tuple(k for k in ARGS if k in SUFFIX_SPEC.outputs)
THRESHOLD = 1 << 40


def make_case(B: int, N: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    W = N + 64
    ids = np.full((B, W), -1, np.int64)
    for b in range(B):
        h = (rng.zipf(1.2, N) - 1) % VOCAB
        src = int(rng.integers(0, N - 512))
        h[-256:] = h[src : src + 256]
        ids[b, :N] = h
    P = (3 * N) // 4
    return {
        "token_ids_all": ids,
        "prompt_lens": np.full((B, 1), P, np.int64),
        "step_idx": np.full((B, 1), N - P, np.int64),
        "draft_token_num": np.full((B,), K, np.int32),
        "draft_tokens": np.zeros((B, K + 1), np.int64),
        "seq_lens_this_time": np.ones((B,), np.int32),
        "seq_lens_encoder": np.zeros((B,), np.int32),
        "seq_lens_decoder": np.full((B,), N, np.int32),
        "max_dec_len": np.full((B, 1), 1 << 40, np.int64),
        "suffix_tokens": np.zeros((B, K), np.int64),
        "suffix_probs": np.zeros((B, K), np.float32),
        "suffix_meta": np.zeros((B, 2), np.int32),
    }


def call(t: dict) -> None:
    suffix_match(*(t[k] for k in ARGS), threshold=THRESHOLD)


def copy_into(dst: paddle.Tensor, src: paddle.Tensor) -> None:
    """A copy into an existing tensor (no Paddle compute kernel; device->device inside a graph)."""
    dst.copy_(src, False) if hasattr(dst, "copy_") else dst._copy_from(src, False)


def bench_case(B: int, N: int, quick: bool, flush: L2Flush) -> dict:
    host = make_case(B, N)
    gpu = {k: bc.to_gpu(v) for k, v in host.items()}
    timing = dict(calls=5 if quick else 10, reps=5 if quick else 10, rounds=7 if quick else 15)
    warm = time_graph_us(lambda: call(gpu), **timing)
    cold = time_graph_us(lambda: call(gpu), cold_l2=flush, **timing)
    cold_us = cold["median_us"]
    host_us = bc.host_time_us(lambda: call(gpu), iters=20 if quick else 100)

    cpu = {k: paddle.to_tensor(v) for k, v in host.items()}
    call(cpu)
    fresh = {k: bc.to_gpu(v) for k, v in host.items()}
    call(fresh)
    same = all(np.array_equal(fresh[k].numpy(), cpu[k].numpy()) for k in OUTS)
    if bc.DRY_RUN:  # both runs were on the CPU: check against the NumPy reference instead
        from tests.reference.suffix_match import suffix_match_ref

        want = suffix_match_ref(host, threshold=THRESHOLD)
        same = all(np.array_equal(cpu[k].numpy().reshape(want[k].shape), want[k]) for k in OUTS)
    drafted = float((cpu["suffix_meta"].numpy()[:, 0] > 0).mean())

    def cpu_path() -> None:
        staged = {k: gpu[k].cpu() for k in ARGS}
        call(staged)
        for k in OUTS:
            copy_into(gpu[k], staged[k])
        bc.sync()

    iters = 1 if B * N > (1 << 22) else 5
    cpu_us = bc.wall_time_us(cpu_path, iters=iters, rounds=1 if quick else 3)
    return {
        "B": B,
        "N": N,
        "gpu_warm_us": warm["median_us"],
        "gpu_cold_us": cold_us,
        "flush_us": cold["overhead_us"],
        "capture": warm["method"],
        "host_us": host_us,
        "cpu_path_us": cpu_us,
        "speedup": cpu_us / warm["median_us"],
        "bit_identical": same,
        "slots_drafting": drafted,
        "history_GBps": B * N * 8 / (warm["median_us"] * 1e3),
    }


TABLE = (
    "B",
    ("N", "history", "{}"),
    "gpu_warm_us",
    "gpu_cold_us",
    "host_us",
    ("cpu_path_us", "host path us", "{:.0f}"),
    "speedup",
    "bit_identical",
)


def plot(rows, out: Path) -> None:
    groups = {f"N={N}": [r for r in rows if r["N"] == N] for N in sorted({r["N"] for r in rows})}
    bc.plot_by_batch(
        out,
        groups,
        [
            ("gpu_warm_us", "o-", "GPU warm"),
            ("gpu_cold_us", "s:", "GPU cold"),
            ("cpu_path_us", "x--", "host path"),
        ],
        "suffix_match per decode step (K = 5, max_tree_depth 64)",
        target=20,
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--out", default="results/bench_suffix")
    args = ap.parse_args(argv)
    bc.require_gpu("bench_suffix.py")

    flush = L2Flush()
    rows = []
    for N in HISTORIES:
        for B in BATCHES:
            r = bench_case(B, N, args.quick, flush)
            rows.append(r)
            print(
                f"B={B:4d} N={N:6d}: GPU warm {r['gpu_warm_us']:8.2f} us  cold {r['gpu_cold_us']:8.2f} us"
                f"  host {r['host_us']:7.1f} us  host path {r['cpu_path_us']:11.1f} us"
                f"  identical={r['bit_identical']}  drafting={r['slots_drafting']:.2f}",
                flush=True,
            )
    meta = {
        "K": K,
        "max_tree_depth": 64,
        "vocab": VOCAB,
        "history": "Zipf(1.2) tokens, last 256 repeat an earlier stretch",
        "threshold": "non-binding (2^40)",
        "gpu_time": "CUDA events around graph replays",
        "cold_l2": f"{flush.bytes >> 20} MiB device copy (benchmarks.gpu_timer.L2Flush) "
        "before each call, its own time subtracted",
        "host_path": "D2H copies of the inputs + CPU op + H2D copies of the outputs",
    }
    bc.report(args.out, "bench_suffix", meta, rows, TABLE, plot)
    return 0 if all(r["bit_identical"] for r in rows) else 1


if __name__ == "__main__":
    main()
