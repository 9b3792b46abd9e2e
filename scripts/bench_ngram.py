"""Latency of ``ngram_match`` on the GPU against the CPU path a runner without GPU kernels takes.

For B x W (prompt 3/4 of W, W/8 generated tokens) and three hit positions of the slot's newest
3-gram (early: 1% into the prompt, late: 90% into it, none: nowhere), it reports

* GPU time: the op's own device time per call, from CUDA events around replays of a captured graph
  of back-to-back calls (kernels and the gap between them; see bench_common),
* host time: wall-clock time of one eager Python call,
* CPU path: device->host copies of the inputs, the CPU op, host->device copies of the two outputs
  (what a runner whose op library lacks GPU kernels would do each step),

checks that the GPU and CPU results are bit-identical, and writes a table, a JSON file and a plot of
latency against W. The threshold is set so it does not bind (every slot searches); tokens come from
a 50k vocabulary with the planted pattern made of ids outside it.

    python scripts/bench_ngram.py [--quick] [--out results/bench_ngram]
"""

from __future__ import annotations

import argparse
import sys
import zlib  # noqa: F401  (before paddle: Paddle 2.6 crashes in zlib otherwise)
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import paddle  # noqa: E402

import bench_common as bc  # noqa: E402
from fastdeploy_spec.ops import ngram_match  # noqa: E402

VOCAB = 50_000
K = 5
MAX_NGRAM = 3
HITS = ("early", "late", "none")
HIT_AT = {"early": 0.01, "late": 0.90}


def make_case(B: int, W: int, hit: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    P = (3 * W) // 4
    s = W // 8
    ids = rng.integers(0, VOCAB, size=(B, W), dtype=np.int64)
    ids[:, P + s:] = -1
    for b in range(B):
        pattern = np.array([VOCAB + 3 * b, VOCAB + 3 * b + 1, VOCAB + 3 * b + 2], np.int64)
        ids[b, P + s - MAX_NGRAM:P + s] = pattern
        if hit in HIT_AT:
            at = int(HIT_AT[hit] * P)
            ids[b, at:at + MAX_NGRAM] = pattern
    return {
        "token_ids_all": ids,
        "prompt_lens": np.full((B, 1), P, np.int64),
        "step_idx": np.full((B, 1), s, np.int64),
        "draft_token_num": np.full((B,), K, np.int32),
        "draft_tokens": np.zeros((B, K + 1), np.int64),
        "seq_lens_this_time": np.ones((B,), np.int32),
        "seq_lens_encoder": np.zeros((B,), np.int32),
        "seq_lens_decoder": np.full((B,), P + s, np.int32),
        "max_dec_len": np.full((B, 1), 1 << 40, np.int64),
    }


ARGS = ("token_ids_all", "prompt_lens", "step_idx", "draft_token_num", "draft_tokens",
        "seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder", "max_dec_len")


def call(t: dict, threshold: int) -> None:
    ngram_match(*(t[k] for k in ARGS), MAX_NGRAM, K, threshold=threshold)


def copy_into(dst: paddle.Tensor, src: paddle.Tensor) -> None:
    """Host->device copy into an existing GPU tensor (no Paddle compute kernel)."""
    dst.copy_(src, False) if hasattr(dst, "copy_") else dst._copy_from(src, False)


def bench_case(B: int, W: int, hit: str, quick: bool) -> dict:
    host = make_case(B, W, hit)
    threshold = 1 << 40
    gpu = {k: bc.to_gpu(v) for k, v in host.items()}
    gpu_t = bc.graph_time_us(lambda: call(gpu, threshold), calls=10 if quick else 20,
                             reps=5 if quick else 10, rounds=7 if quick else 15)
    host_us = bc.host_time_us(lambda: call(gpu, threshold), iters=50 if quick else 200)

    cpu = {k: paddle.to_tensor(v) for k, v in host.items()}
    call(cpu, threshold)
    gpu_ref = {k: bc.to_gpu(v) for k, v in host.items()}
    call(gpu_ref, threshold)
    same = all(np.array_equal(gpu_ref[k].numpy(), cpu[k].numpy())
               for k in ("draft_tokens", "seq_lens_this_time"))

    def cpu_path() -> None:
        staged = {k: gpu[k].cpu() for k in ARGS}
        call(staged, threshold)
        copy_into(gpu["draft_tokens"], staged["draft_tokens"])
        copy_into(gpu["seq_lens_this_time"], staged["seq_lens_this_time"])
        bc.sync()

    work = B * W
    iters = 1 if work > (1 << 23) else (3 if work > (1 << 19) else 20)
    cpu_us = bc.wall_time_us(cpu_path, iters=iters, rounds=1 if quick else 3)
    bytes_read = B * ((3 * W) // 4 + W // 8) * 8
    return {
        "B": B, "W": W, "hit": hit, "gpu_us": gpu_t["median_us"], "gpu_min_us": gpu_t["min_us"],
        "capture": gpu_t["method"], "host_us": host_us, "cpu_path_us": cpu_us,
        "speedup": cpu_us / gpu_t["median_us"], "bit_identical": same,
        "haystack_GBps": bytes_read / (gpu_t["median_us"] * 1e3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    ap.add_argument("--out", default="results/bench_ngram")
    args = ap.parse_args()
    bc.require_gpu("bench_ngram.py")

    batches, widths = bc.QUICK_GRID if args.quick else bc.GRID
    rows = []
    for B in batches:
        for W in widths:
            for hit in HITS:
                r = bench_case(B, W, hit, args.quick)
                rows.append(r)
                print(f"B={B:4d} W={W:7d} {hit:5s}: GPU {r['gpu_us']:8.2f} us  host {r['host_us']:7.1f} us"
                      f"  CPU path {r['cpu_path_us']:11.1f} us  x{r['speedup']:8.0f}"
                      f"  identical={r['bit_identical']}", flush=True)
    meta = {"device": bc.device_name(), "paddle": paddle.__version__, "K": K,
            "max_ngram_size": MAX_NGRAM, "vocab": VOCAB, "prompt": "3/4 W", "generated": "W/8",
            "threshold": "non-binding (2^40)", "gpu_time": "CUDA events around graph replays"}
    path = bc.write_results(args.out, "bench_ngram", meta, rows)
    bc.plot_latency_vs_width(rows, Path(args.out) / "bench_ngram.png", "ngram_match, late hits",
                             "W (tokens per row; prompt 3/4 of W)")
    print(f"\n{meta['device']}, Paddle {meta['paddle']}; results in {path}\n")
    bc.print_table(rows, [("B", "B", "{}"), ("W", "W", "{}"), ("hit", "hit", "{}"),
                          ("gpu_us", "GPU us", "{:.2f}"), ("host_us", "host us/call", "{:.1f}"),
                          ("cpu_path_us", "CPU path us", "{:.0f}"), ("speedup", "speed-up", "{:.0f}x"),
                          ("haystack_GBps", "GB/s", "{:.0f}"), ("bit_identical", "identical", "{}")])


if __name__ == "__main__":
    main()
