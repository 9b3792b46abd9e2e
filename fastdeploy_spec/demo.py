"""Speculative decoding on real text: ``python -m fastdeploy_spec.demo``.

A batch of requests whose prompts are source files of the Python standard library and whose answers
are an edit of them (the file's most used identifier renamed throughout: the kind of rewrite an LLM
is asked for every day). The target model is an oracle that emits the answer greedily, token by
token; the runner mirror (fastdeploy_spec.runner) decodes it with plain decoding (the baseline) and
with the n-gram proposer, on the plugin's ops, and the demo checks that speculation did not change a
single token. It prints acceptance, tokens per step, the decode steps saved and the time spent in the
plugin's ops, and writes ``demo.json`` and ``demo.png`` into ``--out``.

    python -m fastdeploy_spec.demo                     # CPU
    python -m fastdeploy_spec.demo --device gpu        # the plugin's CUDA kernels (no Paddle GPU kernel)
"""

from __future__ import annotations

import argparse
import builtins
import io
import json
import keyword
import platform
import re
import sys
import sysconfig
import time
import tokenize as pytokenize
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

# Fixed, so that every run decodes the same text; all of them exist in Python 3.8 .. 3.13.
MODULES = ("textwrap", "shlex", "dataclasses", "queue", "sched", "glob", "fnmatch", "string", "contextlib",
           "copy", "calendar", "functools", "pprint", "fractions", "tempfile", "selectors")
EOS = "<eos>"
# Identifiers, whitespace runs (a newline with its indentation is one token), single punctuation
# characters: the tokens cover the text exactly, so "".join(tokens) gives it back.
TOKEN_RE = re.compile(r"\w+|\s+|[^\w\s]")
NOT_RENAMED = set(keyword.kwlist) | set(dir(builtins)) | {"self", "cls"}


def tokenize(text: str) -> List[str]:
    return TOKEN_RE.findall(text)


class Vocabulary:
    """Token strings <-> ids; id 0 is the end token, the rest sorted so that ids are reproducible."""

    def __init__(self, texts: Sequence[Sequence[str]]) -> None:
        self.tokens = [EOS] + sorted({t for toks in texts for t in toks})
        self.ids = {t: i for i, t in enumerate(self.tokens)}

    def encode(self, tokens: Sequence[str]) -> List[int]:
        return [self.ids[t] for t in tokens]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.tokens[i] for i in ids if i != 0)

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class Task:
    name: str
    prompt: List[str]      # tokens
    answer: List[str]      # tokens of the edited text
    renamed: str
    new_name: str
    max_dec_len: int       # tokens the request may generate, the end token included


def rename_identifier(source: str, prefix_chars: int) -> "tuple[str, str, str]":
    """Renames the identifier most used in code (not in strings or comments) within the first
    ``prefix_chars`` characters (the whole file if that prefix has no code): a refactoring rename.
    Returns (edited source, old, new)."""
    line_starts = np.cumsum([0] + [len(l) for l in source.splitlines(keepends=True)])
    names = [(int(line_starts[t.start[0] - 1]) + t.start[1], t.string)
             for t in pytokenize.generate_tokens(io.StringIO(source).readline)
             if t.type == pytokenize.NAME and t.string not in NOT_RENAMED and len(t.string) >= 3
             and not t.string.startswith("__")]
    counts = Counter(n for off, n in names if off < prefix_chars) or Counter(n for _, n in names)
    old = min(counts, key=lambda n: (-counts[n], n))
    new = f"{old}_v2"
    pieces, prev = [], 0
    for off, n in names:
        if n == old:
            pieces += [source[prev:off], new]
            prev = off + len(old)
    return "".join(pieces) + source[prev:], old, new


def make_tasks(max_prompt_tokens: int, num_requests: int) -> List[Task]:
    """One task per stdlib module (cycling through MODULES): the truncated source, then the same text
    with its most used identifier renamed in code. Every fourth request is capped below its answer's
    length, so that it stops on max_dec_len rather than on the end token."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    tasks = []
    for i in range(num_requests):
        name = MODULES[i % len(MODULES)]
        source = (stdlib / f"{name}.py").read_text(encoding="utf-8")
        prompt = tokenize(source)[:max_prompt_tokens]
        edited, old, new = rename_identifier(source, sum(map(len, prompt)))
        # A rename maps one word token to one word token, so the answer has the prompt's token count.
        answer = tokenize(edited)[:len(prompt)]
        cap = len(answer) + 1 if i % 4 != 3 else (3 * len(answer)) // 4
        tasks.append(Task(f"{name}#{i}", prompt, answer, old, new, cap))
    return tasks


class Progress:
    """tqdm when installed, else a one-line counter on a terminal."""

    def __init__(self, total: int, desc: str) -> None:
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        self.bar = tqdm(total=total, desc=desc, unit="req", leave=False) if tqdm else None
        self.total, self.desc, self.done = total, desc, 0

    def __call__(self, finished: int) -> None:
        self.done += finished
        if self.bar is not None:
            self.bar.update(finished)
        elif finished and sys.stderr.isatty():
            print(f"\r{self.desc}: {self.done}/{self.total} requests", end="", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif sys.stderr.isatty():
            print("\r", end="", file=sys.stderr)


def run_method(method: str, tasks: List[Task], vocab: Vocabulary, args) -> Dict:
    from fastdeploy_spec.config import SpeculativeConfig
    from fastdeploy_spec.runner import OracleTarget, Request, SpecRunner

    k = 0 if method == "naive" else args.num_speculative_tokens
    cfg = SpeculativeConfig(method=method, num_speculative_tokens=k, max_ngram_size=args.max_ngram_size)
    requests = [Request(i, vocab.encode(t.prompt), t.max_dec_len) for i, t in enumerate(tasks)]
    oracle = OracleTarget({i: vocab.encode(t.answer) for i, t in enumerate(tasks)}, len(vocab), 0)
    width = max(len(r.prompt) + r.max_dec_len for r in requests) + 1
    runner = SpecRunner(cfg, oracle, max_num_seqs=args.slots, max_model_len=width, end_tokens=[0],
                        place=args.device, timing=True)
    for r in requests:
        runner.add_request(r)
    progress = Progress(len(requests), f"{method:>5}")
    tokens_per_step = []
    t0 = time.perf_counter()
    while runner.has_work():
        before = runner.stats.tokens_generated
        progress(len(runner.step()))
        tokens_per_step.append(runner.stats.tokens_generated - before)
    wall = time.perf_counter() - t0
    progress.close()

    identical = []
    for i, t in enumerate(tasks):
        want = (vocab.encode(t.answer) + [0])[:t.max_dec_len]
        identical.append(runner.outputs[i] == want)
    st = runner.stats
    return dict(
        method=method, num_speculative_tokens=k, steps=st.steps,
        decode_slot_steps=st.decode_slot_steps, drafts_proposed=st.drafts_proposed,
        drafts_accepted=st.drafts_accepted, acceptance_rate=st.acceptance_rate,
        tokens_generated=st.tokens_generated, tokens_per_decode_step=st.tokens_per_decode_step,
        op_us_per_step={n: 1e6 * v / st.steps for n, v in st.op_seconds.items()},
        op_us_per_step_total=1e6 * st.op_seconds_per_step, wall_s=wall,
        outputs_identical=identical, tokens_per_step=tokens_per_step,
        sample_output=vocab.decode(runner.outputs[0])[:400],
    )


def plot(results: List[Dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in results:
        ax0.plot(np.cumsum(r["tokens_per_step"]), label=f"{r['method']} ({r['steps']} steps)")
    ax0.set(xlabel="decode step", ylabel="tokens generated (all requests)",
            title="Output tokens vs. steps: same text, fewer steps")
    ax0.legend()
    names = [n for n in results[0]["op_us_per_step"]]
    x = np.arange(len(results))
    bottom = np.zeros(len(results))
    for n in names:
        vals = np.array([r["op_us_per_step"][n] for r in results])
        ax1.bar(x, vals, bottom=bottom, label=n)
        bottom += vals
    ax1.set_xticks(x, [r["method"] for r in results])
    ax1.set(ylabel="µs per step", title="Time in the plugin's ops per step")
    ax1.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m fastdeploy_spec.demo", description=__doc__.split("\n")[0])
    p.add_argument("--method", choices=("ngram", "mtp"), default="ngram",
                   help="speculative method compared with plain decoding (default: ngram)")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--requests", type=int, default=16, help="requests (stdlib modules, cycled)")
    p.add_argument("--slots", type=int, default=8, help="runner slots (max_num_seqs)")
    p.add_argument("--max-prompt-tokens", type=int, default=2048)
    p.add_argument("--num-speculative-tokens", type=int, default=5, help="K")
    p.add_argument("--max-ngram-size", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("results/demo"))
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import paddle

    from fastdeploy_spec import ops, proposers

    if args.device == "gpu" and not (paddle.is_compiled_with_cuda() and ops.with_cuda()):
        print("--device gpu needs a GPU build of Paddle and of the op library "
              "(CUDA_HOME=... python setup_ops.py build)", file=sys.stderr)
        return 2
    methods = ["naive", args.method]
    if args.method == "mtp":
        if not hasattr(proposers, "MTPProposer"):
            print("mtp: not available yet (fastdeploy_spec.proposers has no MTPProposer); "
                  "running the plain-decoding baseline only")
        else:
            print("mtp: MTPProposer exists but the demo has no draft model wired to it yet; "
                  "running the plain-decoding baseline only")
        methods = ["naive"]

    tasks = make_tasks(args.max_prompt_tokens, args.requests)
    vocab = Vocabulary([t.prompt for t in tasks] + [t.answer for t in tasks])
    print(f"{len(tasks)} requests from {sysconfig.get_paths()['stdlib']} "
          f"({sum(len(t.prompt) for t in tasks)} prompt tokens, vocabulary {len(vocab)}); "
          f"edit: rename each file's most used identifier (e.g. {tasks[0].renamed} -> {tasks[0].new_name} "
          f"in {tasks[0].name.split('#')[0]}.py); {args.slots} slots, device {args.device}")

    results = [run_method(m, tasks, vocab, args) for m in methods]
    base = results[0]
    print(f"\n{'method':>6} {'K':>2} {'steps':>6} {'saved':>13} {'accept':>7} {'tok/step':>8} "
          f"{'op µs/step':>10} {'wall s':>7}")
    for r in results:
        saved = base["steps"] - r["steps"]
        r["steps_saved"], r["steps_saved_frac"] = saved, saved / base["steps"]
        print(f"{r['method']:>6} {r['num_speculative_tokens']:>2} {r['steps']:>6} "
              f"{saved:>6} ({100 * r['steps_saved_frac']:4.1f}%) {100 * r['acceptance_rate']:6.1f}% "
              f"{r['tokens_per_decode_step']:>8.2f} {r['op_us_per_step_total']:>10.1f} {r['wall_s']:>7.2f}")
    ok = all(all(r["outputs_identical"]) for r in results)
    for r in results:
        same = sum(r["outputs_identical"])
        print(f"output check ({r['method']}): {same}/{len(tasks)} requests identical to the oracle's "
              f"target text{'' if same == len(tasks) else '  <-- MISMATCH'}")

    args.out.mkdir(parents=True, exist_ok=True)
    report = dict(
        device=args.device, paddle=paddle.__version__, python=platform.python_version(),
        stdlib=sysconfig.get_paths()["stdlib"], modules=[t.name for t in tasks],
        renames={t.name: [t.renamed, t.new_name] for t in tasks},
        settings={k: str(v) for k, v in vars(args).items()}, all_outputs_identical=ok,
        results=results,
    )
    (args.out / "demo.json").write_text(json.dumps(report, indent=1))
    plot(results, args.out / "demo.png")
    print(f"wrote {args.out / 'demo.json'} and {args.out / 'demo.png'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
