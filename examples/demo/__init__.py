"""Speculative decoding on real text: ``python -m examples.demo``.

A batch of requests whose prompts are source files of the Python standard library and whose answers
are an edit of them (the file's most used identifier renamed throughout: the kind of rewrite an LLM
is asked for every day). The target model is an oracle that emits the answer greedily, token by
token; the runner mirror (fastdeploy_spec.runner) decodes it with plain decoding (the baseline), with
the n-gram proposer, the suffix-decoding proposer and the MTP proposer, on the plugin's ops, and the demo checks that
speculation did not change a single token. It prints acceptance, tokens per step, the decode steps
saved and the time per step in the proposer and the verification ops, and writes ``demo.json`` and
``demo.png`` into ``--out``.

The MTP draft model is a bigram table learned from the prompts (``BigramDraft``): a real, if tiny,
language model, from the newest token to logits, that knows nothing of the answer. ``--logprobs K``
turns on the logprob path: every step's accepted tokens go with their top-K logprobs (of the oracle's
logits, ``examples.oracle_logits``) through a System V message queue to a token
processor process, and the demo checks what arrived.

    python -m examples.demo                       # plain, ngram, suffix, mtp; GPU if there is one
    python -m examples.demo --method suffix
    python -m examples.demo --method mtp --mtp-strategy with_ngram --logprobs 5
    python -m examples.demo --device cpu
    python -m examples.demo --temperature 0.8 --top-p 0.9 --seed 7   # sampled requests

``--temperature T > 0`` serves sampled requests (``--top-p``, ``--top-k``, request i seeded with
``--seed + i``): the target is then ``SampledOracle``, whose next-token distribution is a known
function of the context over the request's text, and every row's token is drawn by
``speculate_sample_tokens``. With ``--verify-strategy target_match`` (the default) the demo checks
that every method's output equals plain decoding's, token for token; ``topp`` (FastDeploy's lossy
acceptance) reports how many requests differ.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import sysconfig
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from examples.demo.data import BigramDraft, Task, Vocabulary, make_tasks

__all__ = [
    "BigramDraft",
    "HostDraftOnPlace",
    "main",
    "parse_args",
    "plot",
    "plot_acceptance",
    "resolve_device",
    "run_method",
]


class HostDraftOnPlace:
    """A host (NumPy) draft model as the MTP proposer needs it: logits on the buffers' place.

    The caller's copy, outside the proposer: the input ids come to the host, the model runs there,
    and its logits are copied into one float32 [S, V] buffer on ``place``, allocated once. (On the
    GPU machine Paddle computes nothing on the GPU, so a real model would run the same way there.)
    """

    def __init__(self, model, num_slots: int, vocab_size: int, place) -> None:
        import paddle

        from fastdeploy_spec.buffers import resolve_place

        self.model = model
        self.logits = paddle.to_tensor(
            np.zeros((num_slots, vocab_size), np.float32), place=resolve_place(place)
        )

    def __call__(self, input_ids, hidden_states=None):
        from fastdeploy_spec.buffers import copy_from_host

        if isinstance(input_ids, dict):  # the upstream-ops step: its model_inputs, rows packed
            from fastdeploy_spec.proposers import last_input_tokens

            input_ids = last_input_tokens(input_ids)
        copy_from_host(self.logits, np.asarray(self.model(input_ids, hidden_states), np.float32))
        return self.logits


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


METHODS = ("naive", "ngram", "suffix", "mtp")


def method_label(method: str, args) -> str:
    return "mtp+ngram" if method == "mtp" and args.mtp_strategy == "with_ngram" else method


# The options of a sampled run, recorded with its result.
SAMPLING_OPTIONS = ("temperature", "top_p", "top_k", "seed", "verify_strategy")


def run_method(method: str, tasks: List[Task], vocab: Vocabulary, args, reference=None) -> Dict:
    from examples import LogprobChecker, OracleTarget, SampledOracle
    from fastdeploy_spec.config import SpeculativeConfig
    from fastdeploy_spec.proposers import create_proposer
    from fastdeploy_spec.runner import Request, SpecRunner

    k = 0 if method == "naive" else args.num_speculative_tokens
    cfg = SpeculativeConfig(
        method=method,
        num_speculative_tokens=k,
        max_ngram_size=args.max_ngram_size,
        min_ngram_size=min(2, args.max_ngram_size),
        num_model_steps=args.mtp_steps,
        mtp_strategy=args.mtp_strategy,
    )
    sampled = args.temperature > 0
    requests = [
        Request(
            i,
            vocab.encode(t.prompt),
            t.max_dec_len,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            seed=args.seed + i,
        )
        for i, t in enumerate(tasks)
    ]
    if sampled:
        oracle = SampledOracle(
            {i: vocab.encode(t.prompt) + vocab.encode(t.answer) for i, t in enumerate(tasks)},
            len(vocab),
            0,
            seed=args.seed,
        )
    else:
        oracle = OracleTarget(
            {i: vocab.encode(t.answer) for i, t in enumerate(tasks)}, len(vocab), 0
        )
    width = max(len(r.prompt) + r.max_dec_len for r in requests) + 1
    # The draft model is NumPy code on the host; its logits are copied to the buffers' place, where the
    # proposer's ops read them (no Paddle kernel runs on the device).
    draft = (
        HostDraftOnPlace(
            BigramDraft([r.prompt for r in requests], len(vocab)),
            args.slots,
            len(vocab),
            args.device,
        )
        if method == "mtp"
        else None
    )
    proposer = create_proposer(
        cfg,
        draft_model=draft,
        max_num_seqs=args.slots,
        max_model_len=width,
        place=args.device,
        mtp_ops=args.mtp_ops,
    )
    label = method_label(method, args)
    runner = SpecRunner(
        cfg,
        oracle,
        max_num_seqs=args.slots,
        max_model_len=width,
        end_tokens=[0],
        place=args.device,
        proposer=proposer,
        logprobs=args.logprobs,
        timing=True,
        verify_strategy=args.verify_strategy,
    )
    checker = LogprobChecker()
    runner.observers.append(checker)
    with runner:
        for r in requests:
            runner.add_request(r)
        progress = Progress(len(requests), f"{label:>9}")
        tokens_per_step = []
        t0 = time.perf_counter()
        while runner.has_work():
            before = runner.stats.tokens_generated
            progress(len(runner.step()))
            tokens_per_step.append(runner.stats.tokens_generated - before)
        runner.drain_logprobs()
        wall = time.perf_counter() - t0
        progress.close()

    identical = []
    for i, t in enumerate(tasks):
        if sampled:  # plain decoding's output with the same seed (the plain run itself: trivially)
            identical.append(reference is None or runner.outputs[i] == reference[i])
            continue
        want = (vocab.encode(t.answer) + [0])[: t.max_dec_len]
        want[-1] = 0  # the answer's end token, or FastDeploy's at max_dec_len
        identical.append(runner.outputs[i] == want)
    st = runner.stats
    us = {n: 1e6 * v / st.steps for n, v in st.op_seconds.items()}
    result = dict(
        method=label,
        num_speculative_tokens=k,
        steps=st.steps,
        **st.draft_counts(),
        tokens_generated=st.tokens_generated,
        tokens_per_decode_step=st.tokens_per_decode_step,
        op_us_per_step=us,
        op_us_per_step_total=1e6 * st.op_seconds_per_step,
        wall_s=wall,
        outputs_identical=identical,
        tokens_per_step=tokens_per_step,
        sample_output=vocab.decode(runner.outputs[0])[:400],
        outputs=dict(runner.outputs),
        sampling={k: getattr(args, k) for k in SAMPLING_OPTIONS} if sampled else None,
    )
    if method == "mtp":
        result.update(
            num_model_steps=cfg.num_model_steps,
            mtp_strategy=cfg.mtp_strategy,
            mtp_ops=args.mtp_ops,
            draft_model="bigram table of the prompts (BigramDraft)",
        )
    result["acceptance"] = runner.acceptance.to_dict()
    result["acceptance_table"] = runner.acceptance.table()
    if args.logprobs is not None:
        result["logprobs"] = check_logprobs(runner, checker, oracle, len(tasks))
    return result


def check_logprobs(runner, checker, oracle, num_requests: int) -> Dict:
    """What the token processor received against the outputs and the oracle's logits.

    ``checker`` (a ``LogprobChecker`` on the runner) has already checked each message bit for bit
    against the rows the device computed;
    here every request's delivered tokens must be its output, in order, and each logprob the
    log-softmax of the oracle's logits row at that token (computed here in float64: the ops work in
    float32, hence the tolerance), with rank 1 (the oracle's token is its row's argmax).
    """
    from examples import oracle_logits

    st = runner.stats
    matching = 0
    worst = 0.0
    for rid in range(num_requests):
        got = runner.logprobs.get(rid, [])
        tokens = [g.token for g in got]
        if tokens != runner.outputs[rid]:
            continue
        rows = oracle_logits(np.asarray(tokens), np.arange(len(tokens)), oracle.vocab_size).astype(
            np.float64
        )
        shifted = rows - rows.max(axis=1, keepdims=True)
        want = shifted[np.arange(len(tokens)), tokens] - np.log(np.exp(shifted).sum(axis=1))
        have = np.array([g.logprob for g in got])
        error = np.abs(have - want)
        worst = max(worst, float(error.max(initial=0.0)))
        matching += int(
            np.sum((error <= 1e-5 + 1e-5 * np.abs(want)) & (np.array([g.rank for g in got]) == 1))
        )
    return dict(
        messages_sent=st.logprob_messages_sent,
        messages_received=st.logprob_messages_received,
        tokens_received=st.logprob_tokens_received,
        tokens_bit_exact=checker.tokens_verified,
        tokens_generated=st.tokens_generated,
        tokens_match_oracle=matching,
        max_abs_logprob_error=worst,
    )


PLOT_EXTRA_HINT = (
    "pip install matplotlib, or install the demo extras: "
    "pip install 'fastdeploy_spec[demo]' (matplotlib, tqdm)"
)


def plot(results: List[Dict], path: Path) -> bool:
    """Writes the figure to ``path``; False (nothing written) when matplotlib is not installed: the
    plot is optional, the demo's checks and its JSON report do not need it."""
    try:
        import matplotlib
    except ImportError:
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in results:
        ax0.plot(np.cumsum(r["tokens_per_step"]), label=f"{r['method']} ({r['steps']} steps)")
    ax0.set(
        xlabel="decode step",
        ylabel="tokens generated (all requests)",
        title="Output tokens vs. steps: same text, fewer steps",
    )
    ax0.legend()
    names = list(dict.fromkeys(n for r in results for n in r["op_us_per_step"]))
    x = np.arange(len(results))
    bottom = np.zeros(len(results))
    for n in names:
        vals = np.array([r["op_us_per_step"].get(n, 0.0) for r in results])
        ax1.bar(x, vals, bottom=bottom, label=n)
        bottom += vals
    ax1.set_xticks(x, [r["method"] for r in results])
    ax1.set(ylabel="µs per step", title="Time per step: proposer and plugin ops")
    ax1.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_acceptance(results: List[Dict], path: Path) -> bool:
    """Histogram of accepted drafts per decode step, one panel per speculative method; False when
    matplotlib is missing (the plot is optional)."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = [r for r in results if r["num_speculative_tokens"] > 0]
    if not spec:
        return False
    fig, axes = plt.subplots(1, len(spec), figsize=(4.5 * len(spec), 3.5), squeeze=False)
    for ax, r in zip(axes[0], spec):
        overall = r["acceptance"]["overall"]
        hist = overall["histogram"]
        ax.bar(range(len(hist)), hist)
        ax.set(
            xlabel="drafts accepted in a decode step",
            ylabel="decode steps (all requests)",
            title=f"{r['method']}: rate {100 * overall['acceptance_rate']:.1f}%, "
            f"mean length {overall['mean_acceptance_length']:.2f}",
        )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def resolve_device(device: str) -> str:
    """``auto``: the GPU when Paddle has CUDA, a GPU is present and the op library has CUDA kernels."""
    if device != "auto":
        return device
    import paddle

    from fastdeploy_spec import ops

    has_gpu = (
        paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0 and ops.with_cuda()
    )
    return "gpu" if has_gpu else "cpu"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m examples.demo", description=__doc__.split("\n")[0])
    p.add_argument(
        "--method",
        choices=("all",) + METHODS[1:],
        default="all",
        help="speculative method compared with plain decoding; all: ngram, suffix and mtp (default)",
    )
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "gpu"),
        default="auto",
        help="auto (default): gpu when Paddle has CUDA, a GPU is present and the op library "
        "has CUDA kernels, else cpu",
    )
    p.add_argument("--requests", type=int, default=16, help="requests (stdlib modules, cycled)")
    p.add_argument("--slots", type=int, default=8, help="runner slots (max_num_seqs)")
    p.add_argument("--max-prompt-tokens", type=int, default=2048)
    p.add_argument("--num-speculative-tokens", type=int, default=5, help="K")
    p.add_argument("--max-ngram-size", type=int, default=3)
    p.add_argument(
        "--mtp-steps", type=int, default=2, help="draft-model steps per decode step (mtp)"
    )
    p.add_argument(
        "--mtp-strategy",
        choices=("default", "with_ngram"),
        default="default",
        help="with_ngram: extend the MTP drafts with n-gram matches up to K",
    )
    p.add_argument(
        "--mtp-ops",
        choices=("fused", "upstream"),
        default="fused",
        help="fused (default): our fused greedy ops; upstream: FastDeploy's MTPProposer op sequence "
        "(draft_model_preprocess, sampler, draft_model_update, draft_model_postprocess)",
    )
    p.add_argument(
        "--logprobs",
        type=int,
        default=None,
        metavar="K",
        help="send each accepted token's top-K logprobs through the message queue and "
        "check what arrives (K up to fastdeploy_spec.logprobs.max_num_logprobs(); "
        "--num-speculative-tokens + 1 must fit the token rows a message carries per slot)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sampled requests when > 0 (default 0: greedy, the oracle's text)",
    )
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0, help="0: no top-k")
    p.add_argument("--seed", type=int, default=0, help="request i is seeded with SEED + i")
    p.add_argument(
        "--verify-strategy",
        choices=("target_match", "greedy", "topp"),
        default="target_match",
        help="target_match (exact), greedy (the argmax) or topp (FastDeploy's lossy top-p acceptance)",
    )
    p.add_argument("--out", type=Path, default=Path("results/demo"))
    args = p.parse_args(argv)
    if args.temperature > 0 and args.logprobs is not None:
        p.error("--logprobs checks the greedy oracle's logits: use it without --temperature")
    if args.logprobs is not None:
        from fastdeploy_spec.logprobs import max_num_logprobs
        from fastdeploy_spec.transport import layout

        limit, rows = max_num_logprobs(), layout().max_draft_tokens
        if not 0 <= args.logprobs <= limit:
            p.error(f"--logprobs must be in [0, {limit}], got {args.logprobs}")
        if args.num_speculative_tokens > rows - 1:
            p.error(
                f"--logprobs: a logprob message carries at most {rows} tokens per slot, so K <= "
                f"{rows - 1} (--num-speculative-tokens {args.num_speculative_tokens})"
            )
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    import paddle

    from fastdeploy_spec import ops

    args.device = resolve_device(args.device)
    if args.device == "gpu" and not (paddle.is_compiled_with_cuda() and ops.with_cuda()):
        print(
            "--device gpu needs a GPU build of Paddle and of the op library "
            "(CUDA_HOME=... python setup_ops.py build)",
            file=sys.stderr,
        )
        return 2
    methods = ["naive"] + (list(METHODS[1:]) if args.method == "all" else [args.method])

    tasks = make_tasks(args.max_prompt_tokens, args.requests)
    vocab = Vocabulary([t.prompt for t in tasks] + [t.answer for t in tasks])
    print(
        f"{len(tasks)} requests from {sysconfig.get_paths()['stdlib']} "
        f"({sum(len(t.prompt) for t in tasks)} prompt tokens, vocabulary {len(vocab)}); "
        f"edit: rename each file's most used identifier (e.g. {tasks[0].renamed} -> {tasks[0].new_name} "
        f"in {tasks[0].name.split('#')[0]}.py); {args.slots} slots, device {args.device}"
    )
    if "mtp" in methods:
        print(
            f"mtp: draft model = bigram table of the prompts, {args.mtp_steps} draft step(s) per "
            f"decode step, strategy {args.mtp_strategy}, ops {args.mtp_ops}"
        )

    if args.temperature > 0:
        print(
            f"sampled requests: temperature {args.temperature}, top-p {args.top_p}, top-k {args.top_k}, "
            f"seeds {args.seed} + i, verify strategy {args.verify_strategy}; target: SampledOracle"
        )
    results = []
    for m in methods:
        results.append(
            run_method(m, tasks, vocab, args, reference=results[0]["outputs"] if results else None)
        )
    base = results[0]
    lp_cols = args.logprobs is not None
    print(f"\n{'':>34}{'µs per step':-^{27 + 20 * lp_cols}}")
    print(
        f"{'method':>9} {'K':>2} {'steps':>6} {'saved':>13} {'accept':>7} {'tok/step':>8} "
        f"{'proposer':>9} {'verify+upd':>10} {'total':>7}"
        + (f" {'logprobs':>9} {'send':>9}" if lp_cols else "")
        + f" {'wall s':>7}"
    )
    for r in results:
        saved = base["steps"] - r["steps"]
        r["steps_saved"], r["steps_saved_frac"] = saved, saved / base["steps"]
        us = r["op_us_per_step"]
        verify = us["verify_draft_tokens"] + us["unified_update_model_status"]
        print(
            f"{r['method']:>9} {r['num_speculative_tokens']:>2} {r['steps']:>6} "
            f"{saved:>6} ({100 * r['steps_saved_frac']:4.1f}%) {100 * r['acceptance_rate']:6.1f}% "
            f"{r['tokens_per_decode_step']:>8.2f} {us['proposer']:>9.1f} {verify:>10.1f} "
            f"{us['proposer'] + verify:>7.1f}"
            + (
                f" {us['build_output_logprobs']:>9.1f} {us['speculate_save_output_topk']:>9.1f}"
                if lp_cols
                else ""
            )
            + f" {r['wall_s']:>7.2f}"
        )
    print(
        "(proposer: the ngram_match op; for mtp the bigram draft model on the host with its copies, "
        "the draft_model_* ops and hybrid_mtp_ngram)"
    )
    for r in results:
        if r["num_speculative_tokens"] > 0:
            print(
                f"\nacceptance per request ({r['method']}; request = task index):\n{r['acceptance_table']}"
            )
    lossy = args.temperature > 0 and args.verify_strategy != "target_match"  # GREEDY: the argmax
    ok = lossy or all(all(r["outputs_identical"]) for r in results)
    what = (
        "plain decoding's output with the same seeds"
        if args.temperature > 0
        else "the oracle's target text"
    )
    for r in results:
        same = sum(r["outputs_identical"])
        flag = (
            ""
            if same == len(tasks)
            else (
                f"  ({args.verify_strategy} is not exact for sampled requests)"
                if lossy
                else "  <-- MISMATCH"
            )
        )
        print(
            f"output check ({r['method']}): {same}/{len(tasks)} requests identical to {what}{flag}"
        )
    for r in results:
        r.pop("outputs", None)
    for r in results if lp_cols else ():
        lp = r["logprobs"]
        good = (
            lp["messages_received"] == lp["messages_sent"] == r["steps"]
            and lp["tokens_received"]
            == lp["tokens_bit_exact"]
            == lp["tokens_match_oracle"]
            == lp["tokens_generated"]
        )
        ok = ok and good
        print(
            f"logprob check ({r['method']}, top-{args.logprobs}): {lp['messages_received']}/"
            f"{lp['messages_sent']} messages and {lp['tokens_received']} tokens delivered, "
            f"{lp['tokens_bit_exact']} bit-exact to the device rows, {lp['tokens_match_oracle']}/"
            f"{lp['tokens_generated']} with the oracle's log-softmax (max |error| "
            f"{lp['max_abs_logprob_error']:.1e}) and rank 1{'' if good else '  <-- MISMATCH'}"
        )

    args.out.mkdir(parents=True, exist_ok=True)
    report = dict(
        device=args.device,
        paddle=paddle.__version__,
        python=platform.python_version(),
        stdlib=sysconfig.get_paths()["stdlib"],
        modules=[t.name for t in tasks],
        renames={t.name: [t.renamed, t.new_name] for t in tasks},
        settings={k: str(v) for k, v in vars(args).items()},
        all_outputs_identical=ok,
        results=results,
    )
    (args.out / "demo.json").write_text(json.dumps(report, indent=1))
    if plot(results, args.out / "demo.png"):
        print(f"wrote {args.out / 'demo.json'} and {args.out / 'demo.png'}")
    else:
        print(
            f"wrote {args.out / 'demo.json'}; plot skipped: matplotlib is not installed "
            f"({PLOT_EXTRA_HINT})"
        )
    if plot_acceptance(results, args.out / "demo_acceptance.png"):
        print(f"wrote {args.out / 'demo_acceptance.png'}")
    return 0 if ok else 1
