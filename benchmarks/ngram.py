"""Latency of ``ngram_match`` on the GPU, warm and cold L2, against the CPU path a runner without GPU
kernels takes.

For B x W (prompt 3/4 of W, W/8 generated tokens) and three hit positions of the slot's newest
3-gram (early: 1% into the prompt, late: 90% into it, none: nowhere), it reports

* GPU time: the op's own device time per call, warm (``gpu_us``: its inputs stay in L2) and cold
  (``gpu_cold_us``: a copy larger than L2 runs before each call, timed alone and subtracted), from
  CUDA events around replays of a captured graph of back-to-back calls (see benchmarks/common.py),
* host time: wall-clock time of one eager Python call,
* CPU path: device->host copies of the inputs, the CPU op, host->device copies of the two outputs
  (what a runner whose op library lacks GPU kernels would do each step),

checks that the GPU and CPU results are bit-identical, and writes a table, a JSON file and a plot of
latency against W. The threshold is set so it does not bind (every slot searches); tokens come from
a 50k vocabulary with the planted pattern made of ids outside it.

    python -m benchmarks --routine ngram [--quick] [--dry-run] [--out results/bench_ngram]
"""

from __future__ import annotations

import zlib  # noqa: F401  (before paddle: Paddle 2.6 crashes in zlib otherwise)

import numpy as np

from benchmarks import common as bc  # noqa: E402
from fastdeploy_spec.ops import ngram_match  # noqa: E402
from fastdeploy_spec.ops.ngram_match import SPEC as NGRAM_SPEC  # noqa: E402


def make_case(B: int, W: int, hit: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    P, s = (3 * W) // 4, W // 8
    ids = bc.random_rows(rng, B, W)
    ids[:, P + s :] = -1
    for b in range(B):
        ids[b, P + s - bc.MAX_NGRAM : P + s] = bc.planted_ngram(b)
    bc.plant_in_prompt(ids, P, hit)
    return bc.decoding_slots(ids, P, s, np.zeros((B, bc.K + 1), np.int64), 1)


SPEC = bc.NgramBench(
    doc=__doc__,
    script="bench_ngram.py",
    op=ngram_match,
    make_case=make_case,
    args=NGRAM_SPEC.tensors,
    attrs=(bc.MAX_NGRAM, bc.K),
    meta={"op": "ngram_match", "generated": "W/8"},
    extra=lambda out: {"drafted_tokens": int(np.sum(out["seq_lens_this_time"] - 1))},
    extra_columns=[("drafted_tokens", "drafted", "{}")],
    plot_title="ngram_match, late hits",
    plot_xlabel="W (tokens per row; prompt 3/4 of W)",
)

main = SPEC.main


if __name__ == "__main__":
    main()
