"""Per-step device time of the suffix-decoding global cache: ``suffix_cache_step`` (the insert and the
query, which includes the local ``suffix_match`` search, as one call: what ``SuffixProposer`` runs)
against ``suffix_match`` alone, with 1k, 10k and 100k cached responses of ~300 tokens, at B in
{8, 64, 256}.

* GPU warm: CUDA events around replays of a captured graph of back-to-back steps
  (benchmarks.gpu_timer.time_graph_us, the project's one timer);
* two calls: the same step as ``suffix_cache_insert`` then ``suffix_cache_query``, warm (the
  baseline of the one call);
* GPU cold: the same with an L2Flush (a copy of a buffer of max(128 MiB, 2 x L2)) before every step
  inside the graph, the copies timed alone and subtracted;
* local only: ``suffix_match`` on the same inputs (the part-1 op; the global cache's cost is the
  difference);
* memory: the cache's device bytes, per cached token and per allocated position;
* identical: the query's outputs on the GPU equal the CPU implementation's on the same state
  (checked where the CPU run is short: up to 10k responses, or every case with ``--check-all``).

Responses are text-like: Zipf-distributed tokens over a 32k vocabulary, built from a pool of shared
phrases (so responses repeat each other); the B querying slots are active requests whose histories
end with a stretch of a cached response (the warm case: long matches in the cache). The cache is
filled with the CPU insert op in large batches, then copied to the device. In the timed graph the
insert finds no new token (the step index does not move between replays): it costs its launch and
its checks. ``--soak`` instead drives many thousands of requests through a small cache on the GPU,
step by step, and checks memory flat and the drafts equal to the CPU implementation at the end.

    python -m benchmarks --routine suffix_cache [--quick] [--out results/bench_suffix_cache]
    python -m benchmarks --routine suffix_cache --soak [--soak-requests 20000]

The same rows at the kernel layer without Paddle (the device time per step, warm and cold, each row
checked against the CPU op): benchmarks/kernels/bench_suffix_kernels.cu.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import zlib  # noqa: F401  (before paddle: Paddle 2.6 crashes in zlib otherwise)
from pathlib import Path

import numpy as np
import paddle  # noqa: E402

from benchmarks import common as bc  # noqa: E402
from benchmarks.gpu_timer import L2Flush, time_graph_us  # noqa: E402
from fastdeploy_spec.ops import suffix_match  # noqa: E402
from fastdeploy_spec.ops.suffix_cache import (  # noqa: E402
    PART_NAMES,
    QUERY_OUTPUTS,
    SuffixCache,
    suffix_cache_insert,
    suffix_cache_query,
    suffix_cache_step,
)
from fastdeploy_spec.ops.suffix_match import SPEC as MATCH_SPEC  # noqa: E402

K = 5
VOCAB = 32_000
WIDTH = 512  # cached tokens per response (row width)
MEAN_LEN = 300
BATCHES = (8, 64, 256)
CACHED = (1_000, 10_000, 100_000)
HISTORY = 2048  # the querying slots' history length
DRY_RUN_SIZES = {"BATCHES": (2, 4), "CACHED": (50,)}  # --dry-run (benchmarks/common.py)
THRESHOLD = 1 << 40
KEY_LEN = [1]  # --key-len
MATCH_ARGS = MATCH_SPEC.tensors
OUTS = QUERY_OUTPUTS
# The printed table's columns: (row key, header, format).
TABLE = (
    ("cached_responses", "cached", "{}"),
    "B",
    ("gpu_warm_us", "step warm us", "{:.2f}"),
    ("gpu_cold_us", "cold us", "{:.2f}"),
    ("two_calls_warm_us", "two calls warm us", "{:.2f}"),
    ("local_only_us", "local only us", "{:.2f}"),
    ("bytes_per_cached_token", "B/cached token", "{:.1f}"),
    "identical",
)


def phrase_pool(rng: np.random.Generator, n: int = 4000) -> list:
    return [(rng.zipf(1.2, int(rng.integers(4, 40))) - 1) % VOCAB for _ in range(n)]


class Texts:
    """Responses: shared phrases and fresh Zipf stretches (slices of one long draw), ~300 tokens."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.pool = phrase_pool(rng)
        self.fresh = ((rng.zipf(1.2, 1 << 22) - 1) % VOCAB).astype(np.int64)

    def response(self) -> np.ndarray:
        rng = self.rng
        n = int(np.clip(rng.normal(MEAN_LEN, 80), 50, WIDTH))
        parts, got = [], 0
        while got < n:
            if rng.random() < 0.5:
                p = self.pool[int(rng.integers(0, len(self.pool)))]
            else:
                at = int(rng.integers(0, len(self.fresh) - 64))
                p = self.fresh[at : at + int(rng.integers(8, 64))]
            parts.append(p)
            got += len(p)
        return np.concatenate(parts)[:n].astype(np.int64)


def fill_cache(n: int, slots: int, texts: Texts, chunk: int = 2048) -> tuple:
    """A host cache of n responses (rows = n), filled with the CPU insert op; returns it with the
    responses."""
    cache = SuffixCache.allocate(
        n, WIDTH, max(slots, chunk), key_len=KEY_LEN[0], place=paddle.CPUPlace()
    )
    responses = []
    for start in range(0, n, chunk):
        B = min(chunk, n - start)
        resp = [texts.response() for _ in range(B)]
        responses += resp
        ids = np.full((B, WIDTH + 1), -1, np.int64)
        for b, r in enumerate(resp):
            ids[b, 1 : 1 + len(r)] = r
        ids[:, 0] = 1
        t = lambda a: paddle.to_tensor(a, place=paddle.CPUPlace())  # noqa: E731
        lens = np.array([len(r) for r in resp], np.int64)
        suffix_cache_insert(
            t(ids),
            t(np.ones((B, 1), np.int64)),
            t(lens.reshape(B, 1)),
            t(np.zeros(B, np.int32)),
            t((lens + 1).astype(np.int32)),
            cache,
        )
        suffix_cache_insert(
            t(ids),
            t(np.ones((B, 1), np.int64)),
            t(lens.reshape(B, 1)),
            t(np.zeros(B, np.int32)),
            t(np.zeros(B, np.int32)),
            cache,
        )  # finished
    return cache, responses


def query_inputs(B: int, rng, responses) -> dict:
    """B decoding slots: a prompt, then a response that copies the start of a cached one."""
    W = HISTORY + K + 2
    ids = np.full((B, W), -1, np.int64)
    P = HISTORY - 200
    for b in range(B):
        ids[b, :P] = (rng.zipf(1.2, P) - 1) % VOCAB
        src = responses[int(rng.integers(0, len(responses)))]
        take = min(len(src) - 1, 200)
        gen = np.concatenate([src[:take], (rng.zipf(1.2, 200 - take) - 1) % VOCAB])
        ids[b, P:HISTORY] = gen
    return {
        "token_ids_all": ids,
        "prompt_lens": np.full((B, 1), P, np.int64),
        "step_idx": np.full((B, 1), HISTORY - P, np.int64),
        "draft_token_num": np.full(B, K, np.int32),
        "draft_tokens": np.zeros((B, K + 1), np.int64),
        "seq_lens_this_time": np.ones(B, np.int32),
        "seq_lens_encoder": np.zeros(B, np.int32),
        "seq_lens_decoder": np.full(B, HISTORY, np.int32),
        "max_dec_len": np.full((B, 1), 1 << 40, np.int64),
        "suffix_tokens": np.zeros((B, K), np.int64),
        "suffix_probs": np.zeros((B, K), np.float32),
        "suffix_meta": np.zeros((B, 2), np.int32),
        "suffix_source": np.zeros(B, np.int32),
    }


# The parts of the cache's state that do not depend on the slot count: every part but the slots'
# states and the query scratch. Derived from the layout's parts, so that a part added to it is
# copied too (a hand-kept list once missed the pair counts).
CACHE_STATE = tuple(p for p in PART_NAMES if p not in ("slots", "cand", "stat", "line_mask"))


def copy_cache(src: SuffixCache, B: int, place, slots: bool = False) -> SuffixCache:
    """A cache with B slots and its own query scratch on `place`, holding src's state (and, with
    `slots`, its slot states: src has B slots too)."""
    cfg = dataclasses.replace(src.config, slots=B)
    dst = SuffixCache.allocate(**dataclasses.asdict(cfg), place=paddle.CPUPlace())
    parts = src.parts()
    for name in CACHE_STATE + (("slots",) if slots else ()):
        dst.write(name, parts[name])
    return SuffixCache(paddle.to_tensor(dst.state.numpy(), place=place), dst.config)


def step(t: dict, cache: SuffixCache) -> None:
    suffix_cache_step(*(t[k] for k in MATCH_ARGS), t["suffix_source"], cache, threshold=THRESHOLD)


def two_calls(t: dict, cache: SuffixCache) -> None:
    suffix_cache_insert(
        t["token_ids_all"],
        t["prompt_lens"],
        t["step_idx"],
        t["seq_lens_encoder"],
        t["seq_lens_decoder"],
        cache,
    )
    suffix_cache_query(*(t[k] for k in MATCH_ARGS), t["suffix_source"], cache, threshold=THRESHOLD)


def bench_case(B: int, host_cache: SuffixCache, responses, quick: bool, flush, check: bool) -> dict:
    rng = np.random.default_rng(B)
    q = query_inputs(B, rng, responses)
    gpu = {k: bc.to_gpu(v) for k, v in q.items()}
    cache = copy_cache(host_cache, B, gpu["token_ids_all"].place)
    step(gpu, cache)  # the slots begin their requests (rows taken, responses inserted)
    bc.sync()
    timing = dict(calls=5 if quick else 10, reps=5 if quick else 10, rounds=7 if quick else 15)
    warm = time_graph_us(lambda: step(gpu, cache), **timing)
    cold = time_graph_us(lambda: step(gpu, cache), cold_l2=flush, **timing)
    two = time_graph_us(lambda: two_calls(gpu, cache), **timing)
    local = time_graph_us(
        lambda: suffix_match(*(gpu[k] for k in MATCH_ARGS), threshold=THRESHOLD), **timing
    )
    cached_tokens = int(host_cache.read("rows")[:, 1].sum())
    row = {
        "B": B,
        "cached_responses": len(responses),
        "cached_tokens": cached_tokens,
        "gpu_warm_us": warm["median_us"],
        "gpu_cold_us": cold["median_us"],
        "two_calls_warm_us": two["median_us"],
        "local_only_us": local["median_us"],
        "capture": warm["method"],
        "cache_bytes": cache.nbytes,
        "bytes_per_cached_token": cache.nbytes / cached_tokens,
        "bytes_per_position": cache.bytes_per_position,
        "identical": None,
        "global_wins": int((gpu["suffix_source"].numpy() == 1).sum()),
    }
    if check:
        cpu_q = {k: paddle.to_tensor(v, place=paddle.CPUPlace()) for k, v in q.items()}
        cpu_cache = copy_cache(cache, B, paddle.CPUPlace(), slots=True)
        fresh = {k: bc.to_gpu(v) for k, v in q.items()}
        suffix_cache_query(
            *(fresh[k] for k in MATCH_ARGS), fresh["suffix_source"], cache, threshold=THRESHOLD
        )
        suffix_cache_query(
            *(cpu_q[k] for k in MATCH_ARGS), cpu_q["suffix_source"], cpu_cache, threshold=THRESHOLD
        )
        row["identical"] = all(np.array_equal(fresh[k].numpy(), cpu_q[k].numpy()) for k in OUTS)
    return row


def soak(requests: int, seed: int = 1) -> int:
    """Many thousands of requests through a 64-row cache on the GPU (evictions all along): state and
    drafts against the NumPy reference at the end (and every 500 steps), memory unchanged."""
    from tests.reference.suffix_cache_stream import soak as run_soak

    t0 = time.perf_counter()
    drv = run_soak(
        "gpu", seed, requests, rows=64, width=48, slots=16, check_every=500, key_len=KEY_LEN[0]
    )
    print(
        f"soak: {drv.ref.counter} requests through {drv.cache.config.rows} rows (key_len {drv.cache.key_len}), "
        f"memory {drv.cache.nbytes} bytes unchanged, state and drafts equal to the reference "
        f"at the end ({time.perf_counter() - t0:.0f} s)"
    )
    return 0


def plot(rows, path: Path) -> None:
    groups = {
        f"{n} cached": [r for r in rows if r["cached_responses"] == n]
        for n in sorted({r["cached_responses"] for r in rows})
    }
    bc.plot_by_batch(
        path,
        groups,
        [("gpu_warm_us", "o-", "warm"), ("gpu_cold_us", "s:", "cold")],
        "suffix_cache_step (insert + query)",
        ylog=False,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, no 100k case")
    ap.add_argument("--check-all", action="store_true", help="CPU identity check on every case")
    ap.add_argument("--soak", action="store_true", help="run the GPU soak instead of the timing")
    ap.add_argument("--soak-requests", type=int, default=20_000)
    ap.add_argument(
        "--key-len",
        type=int,
        default=1,
        help="G: shortest global match length (1 = FastDeploy's semantics; 2-3 bound the "
        "hits of frequent tokens)",
    )
    ap.add_argument("--out", default="results/bench_suffix_cache")
    args = ap.parse_args(argv)
    bc.require_gpu("bench_suffix_cache.py")
    if args.soak:
        return soak(args.soak_requests)
    KEY_LEN[0] = args.key_len
    flush = L2Flush()
    texts = Texts(np.random.default_rng(0))
    rows = []
    for cached in CACHED[:2] if args.quick and not bc.DRY_RUN else CACHED:
        t0 = time.perf_counter()
        host_cache, responses = fill_cache(cached, max(BATCHES), texts)
        print(f"filled {cached} responses in {time.perf_counter() - t0:.1f} s", flush=True)
        for B in BATCHES:
            r = bench_case(
                B,
                host_cache,
                responses,
                args.quick,
                flush,
                check=args.check_all or cached <= 10_000,
            )
            rows.append(r)
            print(
                f"cached={cached:6d} B={B:4d}: step warm {r['gpu_warm_us']:8.2f} us"
                f"  cold {r['gpu_cold_us']:8.2f} us  two calls {r['two_calls_warm_us']:8.2f} us"
                f"  local only {r['local_only_us']:7.2f} us"
                f"  {r['bytes_per_cached_token']:.1f} B/cached token  identical={r['identical']}"
                f"  global wins {r['global_wins']}/{B}",
                flush=True,
            )
    meta = dict(
        K=K,
        max_tree_depth=64,
        width=WIDTH,
        mean_response=MEAN_LEN,
        key_len=args.key_len,
        max_occurrences=1024,
        history=HISTORY,
        gpu_time="CUDA events around graph replays of suffix_cache_step (insert + query)",
        cold_l2=f"{flush.bytes >> 20} MiB device copy before each step, its own time subtracted",
    )
    bc.report(args.out, "bench_suffix_cache", meta, rows, TABLE, plot)
    target = [r for r in rows if r["B"] == 64 and r["cached_responses"] == 10_000]
    if target:
        ok = target[0]["gpu_warm_us"] <= 40.0
        print(
            f"B=64, 10k cached responses: {target[0]['gpu_warm_us']:.2f} us per step "
            f"({'within' if ok else 'ABOVE'} the 40 us target)"
        )
    return 0 if all(r["identical"] in (None, True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
