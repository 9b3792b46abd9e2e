"""Exactness in distribution of sampled speculative decoding, on the runner mirror (CPU by default).

A tiny vocabulary (V = 6, token 0 the end) and a target whose next-token distribution is known
exactly (``SampledOracle`` over one short text: its logits are a fixed function of the context; the
sampler's law on a row is ``tests.reference.sample_tokens.row_distribution``). Every request has the
same prompt and its own seed; the first L output tokens of each (shorter when the end token comes
first) form one outcome; requests run with max_dec_len L + 1, so that FastDeploy's length rule (the
last token becomes the end token) never touches the outcome. The exact joint law of the outcome follows by the chain rule. For each
method (plain decoding, n-gram, suffix and MTP with TARGET_MATCH; n-gram and MTP with TOPP) the
script runs ``--requests`` requests and prints the chi-square test of the outcome counts against the
exact law (cells below 5 expected pooled), the two-sample test against plain decoding's counts, and
the total variation distance from the exact law.

    python scripts/check_sampling_exactness.py [--requests 100000] [--tokens 4] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Every slot drafts: the n-gram ops' batch budgets (docs/contract/ngram.md) would stop drafting for a
# batch of a thousand slots.
os.environ.setdefault("INFER_WITH_REFERENCE_TOKENUM_THRESHOLD", "100000000")
os.environ.setdefault("SPEC_TOKENUM_THRESHOLD", "100000000")

from examples.oracle import SampledOracle  # noqa: E402
from examples.sampled_runs import END, run_sampled  # noqa: E402
from tests.reference.chi2 import chi2_sf, chi2_test  # noqa: E402
from tests.reference.sample_tokens import row_distribution  # noqa: E402

V = 6
PROMPT = [1, 2, 3, 4, 5, 1, 2, 3]
ANSWER = [4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
CONFIGS = [
    ("naive", "target_match"),
    ("ngram", "target_match"),
    ("suffix", "target_match"),
    ("mtp", "target_match"),
    ("ngram", "topp"),
    ("mtp", "topp"),
]


def exact_law(oracle: SampledOracle, L: int, T: float, top_p: float):
    """{outcome (tuple of up to L tokens, ending early at the end token): probability}."""
    law = {}

    def walk(prefix, prob):
        if len(prefix) == L or (prefix and prefix[-1] == END):
            law[tuple(prefix)] = law.get(tuple(prefix), 0.0) + prob
            return
        p = row_distribution(oracle.row_logits(0, PROMPT + list(prefix)), T, top_p, 0)
        for v in np.flatnonzero(p):
            walk(prefix + [int(v)], prob * p[v])

    walk([], 1.0)
    return law


def two_sample(a: dict, b: dict):
    """Chi-square test of homogeneity of two outcome count tables: (statistic, dof, p)."""
    keys = sorted(set(a) | set(b))
    na, nb = sum(a.values()), sum(b.values())
    stat, cells = 0.0, 0
    for k in keys:
        oa, ob = a.get(k, 0), b.get(k, 0)
        tot = oa + ob
        ea, eb = tot * na / (na + nb), tot * nb / (na + nb)
        if min(ea, eb) < 5:
            continue
        stat += (oa - ea) ** 2 / ea + (ob - eb) ** 2 / eb
        cells += 1
    dof = max(cells - 1, 1)
    return stat, dof, chi2_sf(stat, dof)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--tokens", type=int, default=4, help="L, the outcome's length")
    ap.add_argument("--slots", type=int, default=1024)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument(
        "--configs",
        default=",".join(f"{m}:{v}" for m, v in CONFIGS),
        help="method:strategy pairs, comma-separated (naive:target_match first)",
    )
    ap.add_argument("--json")
    args = ap.parse_args()
    configs = [tuple(c.split(":")) for c in args.configs.split(",")]
    L, n = args.tokens, args.requests
    texts = [(PROMPT, ANSWER)] * n
    oracle = SampledOracle({0: PROMPT + ANSWER}, V, END)
    law = exact_law(oracle, L, args.temperature, args.top_p)
    keys = sorted(law)
    print(
        f"V = {V}, outcome = the first {L} tokens: {len(keys)} outcomes of positive probability; "
        f"{n} requests per method, temperature {args.temperature}, top-p {args.top_p}"
    )
    results, counts_of = [], {}
    for i, (method, strategy) in enumerate(configs):
        t0 = time.time()
        seeds = np.random.default_rng(100 + i).integers(0, 2**63, n)
        runners = []
        out = run_sampled(
            method,
            texts,
            seeds,
            vocab_size=V,
            max_dec_len=L + 1,
            temperature=args.temperature,
            top_p=args.top_p,
            slots=args.slots,
            k=3,
            verify_strategy=strategy,
            runner_out=runners,
        )
        counts: dict = {}
        for toks in out.values():
            key = tuple(toks[:L])
            counts[key] = counts.get(key, 0) + 1
        counts_of[(method, strategy)] = counts
        outside = sum(c for k, c in counts.items() if k not in law)
        stat, dof, p = chi2_test(
            [counts.get(k, 0) for k in keys] + [outside], [law[k] for k in keys] + [0.0]
        )
        if outside:
            p = 0.0
        tv = 0.5 * sum(abs(counts.get(k, 0) / n - law.get(k, 0.0)) for k in set(law) | set(counts))
        r = dict(
            method=method,
            verify_strategy=strategy,
            requests=n,
            chi2=stat,
            dof=dof,
            p_exact=p,
            total_variation=tv,
            outside_support=outside,
            acceptance_rate=runners[0].stats.acceptance_rate,
            seconds=time.time() - t0,
        )
        if (method, strategy) != ("naive", "target_match") and (
            "naive",
            "target_match",
        ) in counts_of:
            s2, d2, p2 = two_sample(counts, counts_of[("naive", "target_match")])
            r.update(chi2_vs_plain=s2, dof_vs_plain=d2, p_vs_plain=p2)
        results.append(r)
        vs = f", vs plain decoding p = {r['p_vs_plain']:.3g}" if "p_vs_plain" in r else ""
        print(
            f"{method:6s} {strategy:12s}: chi2 {stat:9.1f} (dof {dof:3d}) vs the exact law p = {p:.3g}{vs}; "
            f"TV distance {tv:.4f}; acceptance {r['acceptance_rate']:.2f} ({r['seconds']:.0f} s)",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                dict(
                    V=V, tokens=L, temperature=args.temperature, top_p=args.top_p, results=results
                ),
                indent=1,
            )
        )
    ok = all(r["p_exact"] > 0.01 for r in results if r["verify_strategy"] == "target_match")
    print("TARGET_MATCH exact (every p > 0.01):", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
