"""Latency of ``hybrid_mtp_ngram`` on the GPU, warm and cold L2, against the CPU path a runner without
GPU kernels takes.

Same method, sizes and driver as the ngram routine (benchmarks/common.py). For B x W (prompt 3/4 of W in
token_ids_all; pre_ids holds W/8 draft-model tokens, width W/8 + 64) and three hit positions of the
slot's newest 3-gram (early: 1% into the prompt, late: 90% into it, none: nowhere), it reports GPU
time warm (``gpu_us``) and cold (``gpu_cold_us``), host time and the CPU path, and checks GPU == CPU.
The op reads its in-place seq_lens_this_time (the MTP length, ori), so each call in the graph is
preceded by a device copy that restores it; that copy is timed alone and subtracted (as is the cold-L2
copy). Every slot arrives with one MTP draft (ori = 2) and may take up to K = 5 drafts in all;
min_ngram_size is 1.

    python -m benchmarks --routine hybrid [--quick] [--dry-run] [--out results/bench_hybrid]
"""

from __future__ import annotations

import zlib  # noqa: F401  (before paddle: Paddle 2.6 crashes in zlib otherwise)

import numpy as np

from benchmarks import common as bc  # noqa: E402
from fastdeploy_spec.ops import hybrid_mtp_ngram  # noqa: E402
from fastdeploy_spec.ops.hybrid_mtp_ngram import SPEC as HYBRID_SPEC  # noqa: E402

ORI = 2  # 1 + one MTP draft
MIN_NGRAM = 1


def make_case(B: int, W: int, hit: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    P, s = (3 * W) // 4, W // 8
    D = s + 64
    ids = bc.random_rows(rng, B, W)
    ids[:, P:] = -1
    pre = rng.integers(0, bc.VOCAB, size=(B, D), dtype=np.int64)
    pre[:, s + 1 :] = -1
    for b in range(B):
        pre[b, s + 1 - bc.MAX_NGRAM : s + 1] = bc.planted_ngram(b)
    bc.plant_in_prompt(ids, P, hit)
    drafts = np.zeros((B, bc.K + 1), np.int64)
    drafts[:, 1] = 7  # the MTP draft
    case = bc.decoding_slots(ids, P, s, drafts, ORI)
    del case["seq_lens_encoder"]  # not an input of hybrid_mtp_ngram
    return dict(case, pre_ids=pre)


SPEC = bc.NgramBench(
    doc=__doc__,
    script="bench_hybrid.py",
    op=hybrid_mtp_ngram,
    make_case=make_case,
    # the op's tensor order (the wrapper's own), its history inputs under the n-gram family's names
    args=tuple(
        {"input_ids": "token_ids_all", "input_ids_len": "prompt_lens"}.get(k, k)
        for k in HYBRID_SPEC.tensors
    ),
    attrs=(bc.MAX_NGRAM, MIN_NGRAM, bc.K),
    restore="seq_lens_this_time",
    meta={
        "op": "hybrid_mtp_ngram",
        "ori": ORI,
        "min_ngram_size": MIN_NGRAM,
        "pre_ids": "W/8 tokens, width W/8 + 64",
    },
    extra=lambda out: {"drafted_tokens": int(np.sum(out["seq_lens_this_time"] - ORI))},
    extra_columns=[
        ("warm_subtracted_us", "restore us", "{:.2f}"),
        ("drafted_tokens", "drafted", "{}"),
    ],
    plot_title="hybrid_mtp_ngram, late hits",
    plot_xlabel="W (tokens per row; prompt 3/4 of W, W/8 draft-model tokens)",
)

main = SPEC.main


if __name__ == "__main__":
    main()
