"""The MTP proposer's own device time per decode step, without the draft model's forward, against the
host path it replaced (issue 17), in the same run.

For B in {1, 8, 64, 256} slots, all decoding, K = 5 drafts, 1 and 2 draft-model steps, with and
without the n-gram extension (``mtp_strategy`` "with_ngram" / "default"), one proposer step is
``MTPProposer.run`` (draft_model_accept_preprocess: the previous step's accept and this step's
preprocess; per draft step the draft model and draft_model_greedy_update; hybrid_mtp_ngram) then
``MTPProposer.accept`` (which keeps its tensors for the next run: the proposer's default). The draft model's forward is
excluded: it returns float32 [B, V] logits prepared on the GPU (V = 32000 by default), so the step
times exactly the proposer's kernels, the greedy read of the logits included. Reported:

* GPU time (warm L2): CUDA events around replays of a captured graph of 20 back-to-back steps,
  median over rounds, per step (benchmarks/gpu_timer.time_graph_us);
* GPU time (cold L2): the same with gpu_timer's L2Flush (a device copy of max(128 MiB, 2 x L2))
  before each step, minus the same graph of copies alone;
* host path: the proposer as it was before issue 17 (``HostPathMTPProposer`` below, kept here only
  for this comparison): device->host copies of the logits and the buffers, greedy choice and
  bookkeeping in NumPy, host->device copies back, hybrid_mtp_ngram on the GPU; wall time of a step
  with the device drained;
* whether both paths leave the same drafts, lengths and draft-model state (bit for bit).

Each slot's prompt (3/4 of W = 8192 tokens) contains, late, the continuation of its newest tokens,
so the n-gram extension searches the whole prompt and finds a match; the hybrid threshold does not
bind (every slot searches). accept_num is 0 for every slot (the step's drafts are dropped and
nothing appended), so the state is the same at every replay.

    python -m benchmarks --routine mtp [--quick] [--vocab 32000] [--accept-at-once] [--out results/bench_mtp]

--accept-at-once builds ``MTPProposer(defer_accept=False)``: ``run`` starts with draft_model_greedy_preprocess
and ``accept`` runs draft_model_accept (two kernels where the default has one).

The same step at the kernel layer, without Paddle and with a per-kernel breakdown:
benchmarks/kernels/bench_mtp_kernels.cu.
"""

from __future__ import annotations

import argparse
import zlib  # noqa: F401  (before paddle: Paddle 2.6 crashes in zlib otherwise)
from pathlib import Path
from typing import Dict

import numpy as np
import paddle  # noqa: E402

from benchmarks import common as bc  # noqa: E402
from benchmarks.gpu_timer import L2Flush, time_graph_us  # noqa: E402
from examples.oracle import PreparedLogits  # noqa: E402
from fastdeploy_spec.buffers import copy_from_host, make_share_inputs  # noqa: E402
from fastdeploy_spec.config import SpeculativeConfig  # noqa: E402
from fastdeploy_spec.proposers import MTPProposer  # noqa: E402
from fastdeploy_spec.proposers.mtp import extend_drafts_with_ngram  # noqa: E402

BATCHES = (1, 8, 64, 256)
K = 5
MODEL_STEPS = (1, 2)
W = 8192
PROMPT = 3 * W // 4
GENERATED = 512
# --dry-run (benchmarks/common.py): two batches, a short row, a small vocabulary.
DRY_RUN_SIZES = {"BATCHES": (1, 4), "W": 512, "PROMPT": 384, "GENERATED": 32}
THRESHOLD = 1 << 40
STATE = ("draft_tokens", "seq_lens_this_time")
DRAFT_STATE = ("pre_ids", "step_idx")


class HostPathMTPProposer:
    """The MTP proposer before issue 17, for this comparison only: it reads the sequence lengths,
    pre_ids, step_idx, drafts and the draft logits back to the host every step, does the greedy
    choice and the bookkeeping in NumPy and copies the results back."""

    def __init__(self, config: SpeculativeConfig, draft_model, S: int, D: int, place) -> None:
        self.config, self.draft_model = config, draft_model
        self.num_model_steps = min(config.num_model_steps, config.num_speculative_tokens)
        self.extend_with_ngram = (
            config.mtp_strategy == "with_ngram"
            and config.num_speculative_tokens > config.num_model_steps
        )
        self.pre_ids = paddle.to_tensor(np.full((S, D), -1, np.int64), place=place)
        self.step_idx = paddle.to_tensor(np.zeros((S, 1), np.int64), place=place)
        self.place = place
        self._drafted = np.zeros(S, np.int64)

    def accept(self, accept_tokens, accept_num) -> None:
        tokens, num = accept_tokens.numpy(), accept_num.numpy().reshape(-1)
        pre, step = self.pre_ids.numpy(), self.step_idx.numpy()
        D = pre.shape[1]
        for b in range(pre.shape[0]):
            s = int(step[b, 0]) - int(self._drafted[b])
            n = int(np.clip(num[b], 0, min(tokens.shape[1], D - 1 - s)))
            pre[b, s + 1 : s + 1 + n] = tokens[b, :n]
            step[b, 0] = s + n
        self._drafted[:] = 0
        copy_from_host(self.pre_ids, pre)
        copy_from_host(self.step_idx, step)

    def run(self, share_inputs) -> None:
        s = share_inputs
        enc = s["seq_lens_encoder"].numpy().reshape(-1)
        dec = s["seq_lens_decoder"].numpy().reshape(-1)
        active = (enc == 0) & (dec > 0)
        pre, step = self.pre_ids.numpy(), self.step_idx.numpy()
        drafts, slt = s["draft_tokens"].numpy(), s["seq_lens_this_time"].numpy()
        rows = np.arange(pre.shape[0])
        drafted = np.zeros(pre.shape[0], np.int64)
        for i in range(self.num_model_steps):
            newest = np.where(active, pre[rows, step[:, 0]], 0).reshape(-1, 1)
            logits = self.draft_model(paddle.to_tensor(newest, place=self.place), None)
            token = np.argmax(logits.numpy().reshape(len(rows), -1), axis=-1)
            room = active & (step[:, 0] + 1 < pre.shape[1]) & (drafted == i)
            step[room, 0] += 1
            pre[rows[room], step[room, 0]] = token[room]
            drafts[room, 1 + i] = token[room]
            drafted[room] += 1
        slt[active] = 1 + drafted[active]
        self._drafted = drafted
        copy_from_host(self.pre_ids, pre)
        copy_from_host(self.step_idx, step)
        copy_from_host(s["draft_tokens"], drafts)
        copy_from_host(s["seq_lens_this_time"], slt)
        if self.extend_with_ngram:
            extend_drafts_with_ngram(
                self.config, s, self.pre_ids, self.step_idx, s["seq_lens_decoder"], s["max_dec_len"]
            )


def make_case(B: int, V: int, steps: int, seed: int = 0) -> Dict[str, np.ndarray]:
    """Host arrays: the runner's share-inputs, the draft side's pre_ids / step_idx, the logits."""
    rng = np.random.default_rng(seed)
    ids = np.full((B, W), -1, np.int64)
    prompt = rng.integers(0, V, (B, PROMPT))
    gen = rng.integers(0, V, (B, GENERATED))
    # The newest 3 generated tokens and what follows them occur 90% into the prompt: a late hit.
    at = int(0.9 * PROMPT)
    prompt[:, at : at + 3] = gen[:, -3:]
    ids[:, :PROMPT], ids[:, PROMPT : PROMPT + GENERATED] = prompt, gen
    pre = np.full((B, W), -1, np.int64)
    pre[:, 1 : GENERATED + 1] = gen
    logits = [rng.standard_normal((B, V)).astype(np.float32) for _ in range(steps)]
    return dict(
        token_ids_all=ids,
        prompt_lens=np.full((B, 1), PROMPT, np.int64),
        step_idx=np.full((B, 1), GENERATED, np.int64),
        max_dec_len=np.full((B, 1), W - PROMPT, np.int64),
        seq_lens_this_time=np.ones(B, np.int32),
        seq_lens_encoder=np.zeros(B, np.int32),
        seq_lens_decoder=np.full(B, PROMPT + GENERATED, np.int32),
        stop_flags=np.zeros((B, 1), bool),
        accept_num=np.zeros(B, np.int32),
        pre_ids=pre,
        draft_step_idx=np.full((B, 1), GENERATED, np.int64),
        logits=logits,
    )


def setup(
    proposer_cls, B: int, V: int, steps: int, ngram: bool, case: dict, defer_accept: bool = True
):
    cfg = SpeculativeConfig(
        method="mtp",
        num_speculative_tokens=K,
        num_model_steps=steps,
        mtp_strategy="with_ngram" if ngram else "default",
        max_ngram_size=3,
        min_ngram_size=1,
        hybrid_threshold=THRESHOLD,
    )
    bufs = make_share_inputs(B, W, cfg, bc.place_name())
    for name, buf in bufs.items():
        if name in case:
            copy_from_host(buf, case[name])
    model = PreparedLogits([bc.to_gpu(x) for x in case["logits"]])
    if proposer_cls is MTPProposer:
        proposer = MTPProposer(
            cfg,
            model,
            max_num_seqs=B,
            max_model_len=W,
            place=bc.place_name(),
            defer_accept=defer_accept,
        )
    else:
        proposer = HostPathMTPProposer(cfg, model, B, W, bc.gpu_place())
    copy_from_host(proposer.pre_ids, case["pre_ids"])
    copy_from_host(proposer.step_idx, case["draft_step_idx"])

    def step() -> None:
        proposer.run(share_inputs=bufs) if proposer_cls is MTPProposer else proposer.run(bufs)
        proposer.accept(bufs["accept_tokens"], bufs["accept_num"])

    return bufs, proposer, step


def results_of(bufs, proposer) -> Dict[str, np.ndarray]:
    out = {k: bufs[k].numpy() for k in STATE}
    out.update({k: getattr(proposer, k).numpy() for k in DRAFT_STATE})
    return out


def bench_case(
    B: int, V: int, steps: int, ngram: bool, quick: bool, defer_accept: bool = True
) -> dict:
    case = make_case(B, V, steps)
    timing = dict(calls=10 if quick else 20, reps=5 if quick else 10, rounds=7 if quick else 15)

    bufs, proposer, step = setup(MTPProposer, B, V, steps, ngram, case, defer_accept)
    warm = time_graph_us(step, **timing)
    flush = L2Flush()
    try:
        cold = time_graph_us(step, cold_l2=flush, **timing)
    finally:
        flush.close()

    # One step of each path from the same state: the same drafts and draft-model state.
    bufs_new, prop_new, step_new = setup(MTPProposer, B, V, steps, ngram, case, defer_accept)
    if prop_new.defer_accept:  # accept_num 0: only the fused op's path differs
        prop_new.accept(bufs_new["accept_tokens"], bufs_new["accept_num"])
    prop_new.run(share_inputs=bufs_new)
    bufs_old, prop_old, step_old = setup(HostPathMTPProposer, B, V, steps, ngram, case)
    prop_old.run(bufs_old)
    got, want = results_of(bufs_new, prop_new), results_of(bufs_old, prop_old)
    same = all(np.array_equal(got[k], want[k]) for k in got)
    drafts = int(np.sum(got["seq_lens_this_time"] - 1))

    def host_path() -> None:
        step_old()
        bc.sync()

    host_us = bc.wall_time_us(host_path, iters=5 if quick else 20, rounds=3)
    gpu_us = warm["median_us"]
    return {
        "B": B,
        "model_steps": steps,
        "ngram": ngram,
        "V": V,
        "gpu_us": gpu_us,
        "gpu_cold_us": cold["median_us"],
        "capture": warm["method"],
        "host_path_us": host_us,
        "speedup": host_us / gpu_us,
        "identical": same,
        "drafts_per_step": drafts,
        "logits_GBps": B * V * 4 * steps / (gpu_us * 1e3),
    }


TABLE = (
    "B",
    ("model_steps", "model steps", "{}"),
    ("ngram", "n-gram", "{}"),
    "gpu_us",
    "gpu_cold_us",
    ("host_path_us", "host path us", "{:.0f}"),
    "speedup",
    ("logits_GBps", "logits GB/s", "{:.0f}"),
    "identical",
)


def plot(rows, path: Path) -> None:
    groups = {
        f"{s} step{'s' if s > 1 else ''}{' + n-gram' if g else ''}": [
            r for r in rows if r["model_steps"] == s and r["ngram"] == g
        ]
        for s in MODEL_STEPS
        for g in (False, True)
    }
    bc.plot_by_batch(
        path,
        groups,
        [("gpu_us", "o-", "ops"), ("host_path_us", "x--", "host path")],
        f"MTP proposer without the draft forward, K = {K}, V = {rows[0]['V']}",
        ylabel="µs per proposer step",
        target=15,
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--vocab", type=int, default=32000, help="V of the draft logits (float32)")
    ap.add_argument(
        "--accept-at-once",
        action="store_true",
        help="MTPProposer(defer_accept=False): accept as its own op after verification",
    )
    ap.add_argument("--out", default="results/bench_mtp")
    args = ap.parse_args(argv)
    bc.require_gpu("bench_mtp.py")

    rows = []
    for B in BATCHES:
        for steps in MODEL_STEPS:
            for ngram in (False, True):
                r = bench_case(B, args.vocab, steps, ngram, args.quick, not args.accept_at_once)
                rows.append(r)
                print(
                    f"B={B:4d} steps={steps} ngram={ngram!s:5}: ops {r['gpu_us']:7.2f} us (cold "
                    f"{r['gpu_cold_us']:7.2f})  host path {r['host_path_us']:9.1f} us  "
                    f"x{r['speedup']:6.0f}  identical={r['identical']}",
                    flush=True,
                )
    meta = {
        "K": K,
        "W": W,
        "prompt": PROMPT,
        "generated": GENERATED,
        "vocab": args.vocab,
        "logits_dtype": "float32",
        "defer_accept": not args.accept_at_once,
        "step": "MTPProposer.run (accept + preprocess, or preprocess alone with --accept-at-once; "
        "model_steps x (prepared logits + update); hybrid_mtp_ngram if ngram) + "
        "MTPProposer.accept (accept_num 0; draft_model_accept with --accept-at-once)",
        "gpu_time": "CUDA events around graph replays of 20 steps, median per step (warm L2); "
        "cold: gpu_timer.L2Flush (a copy larger than L2) before each step, minus the copy alone",
        "host_path": "the pre-issue-17 proposer (NumPy bookkeeping), wall time with the device drained",
    }
    bc.report(args.out, "bench_mtp", meta, rows, TABLE, plot)
    target = next((r for r in rows if r["B"] == 64 and r["model_steps"] == 2 and r["ngram"]), None)
    if target is None:
        return 0 if all(r["identical"] for r in rows) else 1
    print(
        f"\ntarget B=64, K=5, 2 model steps, n-gram: {target['gpu_us']:.2f} µs per step "
        f"(target <= 15 µs: {'met' if target['gpu_us'] <= 15 else 'NOT met'}); host path "
        f"{target['host_path_us']:.0f} µs in the same run"
    )
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    main()
