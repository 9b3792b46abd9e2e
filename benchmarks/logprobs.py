"""Benchmark of the speculative logprob path (docs/contract/logprobs.md) on one GPU, with its baselines in the
same run.

    python -m benchmarks --routine logprobs [--quick] [--out DIR]

Workload: B = 64 decoding slots, K = 5 drafts (N = B * (K + 1) = 384 rows), accept counts uniform in
1 .. 5 (about 3 per slot, about 192 accepted rows), vocabularies 32000 and 152064, float32 and
bfloat16 logits.

(a) ``speculate_get_accept_tokens_and_logits`` (offsets + token ids + logits rows) against a plain
    device-to-device copy (``cudaMemcpyAsync`` through ``torch.Tensor.copy_``) of the same bytes.
(b) ``speculate_logprobs_topk`` (top-20, valid rows only) against what upstream runs: PyTorch
    ``log_softmax`` + ``topk(20)`` + the accepted token's logprob and rank, over all 384 padded rows.

Timing method. Paddle and PyTorch launch on different default streams, and a Paddle custom op costs
tens of microseconds of Python/C++ dispatch, as long as the kernels themselves. So every timed region
runs on Paddle's current stream (PyTorch joins it through ``torch.cuda.ExternalStream``): the stream
is first held busy by ``torch.cuda._sleep`` long enough for the host to enqueue all iterations, then
a CUDA event is recorded after each iteration (``benchmarks.gpu_timer.StreamTimer``, the
benchmarks' shared timer module: PyTorch's baselines cannot be captured in a graph). The interval between consecutive events is therefore
pure GPU time of one iteration (no host gaps, no launch latency hidden or added); the table reports
the median over the iterations, after warm-up iterations, with the device synchronised (Paddle and
PyTorch) before and after each region. Inputs are built in NumPy and copied to the GPU (Paddle 2.6's
own GPU kernels are not used: bfloat16 is cast on the host); nothing is allocated in the timed loops.

Check ("ok" column; what failed is printed, and the script exits 1). The logits are read back from the
op's own input tensor, so the reference sees the bits the op saw (bfloat16 values are rounded to
nearest even in NumPy first, so Paddle's host cast is exact and the torch baseline gets the same
bits: Paddle 2.6's host cast truncates, Paddle 3's rounds). Against a float64 NumPy reference on
those bits (``check_outputs``): the offsets, gathered token ids and logits rows bit for bit; for every
accepted row all k + 1 ids and the rank exactly and the k + 1 logprobs within a tolerance; padding
rows as docs/contract/logprobs.md says (ids -1, logprob 0, rank 0).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

BATCH = 64
DRAFTS = 5  # K
TOP_K = 20
VOCABS = [32000, 152064]
DTYPES = ["float32", "bfloat16"]
# Logprob tolerance against the float64 reference: the ops' float32 log-sum-exp over V <= 152064
# terms (partial sums, exp2f) and the float32 subtraction x - lse, for logits of magnitude ~15.
SCORE_ATOL, SCORE_RTOL = 1e-4, 1e-5


def fail(msg: str) -> None:
    sys.exit(f"bench_logprobs: {msg}")


def setup():
    try:
        import paddle
    except ImportError:
        fail("Paddle is not installed")
    if not (paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0):
        fail("needs a CUDA GPU and a GPU build of Paddle")
    from fastdeploy_spec import ops

    if not ops.with_cuda():
        fail(
            "the op library was built without CUDA kernels; rebuild with `python setup_ops.py build`"
        )
    try:
        import torch
    except ImportError:
        fail("needs PyTorch with CUDA for the baselines and the CUDA events")
    if not torch.cuda.is_available():
        fail("PyTorch sees no CUDA device")
    paddle.device.set_device("gpu:0")
    return paddle, torch, ops


def bf16_round(values: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bfloat16 value (ties to even), as float32: every cast of it is exact."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return rounded.view(np.float32)


def host_values(array: np.ndarray) -> np.ndarray:
    """float32 values of a logits tensor's ``.numpy()``: bfloat16 comes back as its uint16 bits."""
    if array.dtype == np.uint16:
        return (array.astype(np.uint32) << 16).view(np.float32)
    return np.asarray(array, np.float32)


def to_gpu(paddle, array: np.ndarray, dtype: str | None = None):
    t = paddle.to_tensor(array, place=paddle.CPUPlace())
    if dtype == "bfloat16":
        t = t.astype("bfloat16")  # host cast (exact for bf16_round values): no Paddle GPU kernel
    return t.cuda()


def make_step(rng, V: int, batch: int = BATCH):
    stride = DRAFTS + 1
    accept = rng.integers(1, DRAFTS + 1, batch).astype(np.int32)  # mean 3
    return dict(
        slt=np.full(batch, stride, np.int32),
        enc=np.zeros(batch, np.int32),
        cu_q=(np.arange(batch + 1) * stride).astype(np.int32),
        accept=accept,
        accept_tokens=rng.integers(0, V, (batch, stride)).astype(np.int64),
        logits=(rng.standard_normal((batch * stride, V)) * 3).astype(np.float32),
    )


def check_outputs(
    step: dict,
    logits: np.ndarray,
    k: int,
    *,
    cu: np.ndarray,
    token_ids: np.ndarray,
    gathered: np.ndarray,
    ids: np.ndarray,
    scores: np.ndarray,
    ranks: np.ndarray,
) -> list[str]:
    """What is wrong in one run of the gather and the logprob op on ``step``; [] when nothing is.

    ``logits`` [B * (K + 1), V] and ``gathered`` [N, V] are float32 values (``host_values`` of what the
    ops read and wrote), the rest the outputs as read back. Reference in float64 on those values:
    ids (all k + 1 columns, ties to the lower id) and ranks exact, logprobs within SCORE_ATOL /
    SCORE_RTOL; every message names the check and the first row that fails it.
    """
    problems = []

    def expect(ok: np.ndarray, what: str) -> None:
        ok = np.asarray(ok)
        bad = np.flatnonzero(~ok.reshape(ok.shape[0], -1).all(axis=1)) if ok.size else ok
        if bad.size:
            problems.append(f"{what}: {bad.size} of {len(ok)} rows differ (first: row {bad[0]})")

    stride = step["accept_tokens"].shape[1]
    accept = np.clip(step["accept"].astype(np.int64), 0, stride)
    want_cu = np.concatenate([[0], np.cumsum(accept)])
    if not np.array_equal(cu, want_cu):
        problems.append(f"offsets: cu_batch_token_offset {cu.tolist()} != {want_cu.tolist()}")
        return problems  # every row below depends on them
    slot = np.repeat(np.arange(len(accept)), accept)
    col = np.arange(len(slot)) - want_cu[slot]
    valid = len(slot)
    tokens = step["accept_tokens"][slot, col]
    x = logits[step["cu_q"][slot] + col].astype(np.float64)  # exact: float32 -> float64
    expect(token_ids[:valid] == tokens, "gathered token ids")
    expect(
        gathered[:valid].view(np.uint32) == logits[step["cu_q"][slot] + col].view(np.uint32),
        "gathered logits rows (bits)",
    )

    m = x.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(x - m).sum(axis=1))
    rows = np.arange(valid)
    tok_x = x[rows, tokens]
    want_ids = np.empty((valid, k + 1), np.int64)
    want_ids[:, 0] = tokens
    for r in range(valid):
        kth = np.partition(x[r], -k)[-k] if k else np.inf
        cand = np.flatnonzero(x[r] >= kth)  # the top k and every value tied with the k-th
        want_ids[r, 1:] = cand[np.lexsort((cand, -x[r, cand]))][:k]
    want_scores = x[rows[:, None], want_ids] - lse[:, None]
    want_ranks = (x >= tok_x[:, None]).sum(axis=1)
    expect(ids[:valid] == want_ids, f"logprob ids (all {k + 1} columns)")
    expect(ranks[:valid] == want_ranks, "ranks")
    expect(
        np.isclose(scores[:valid], want_scores, atol=SCORE_ATOL, rtol=SCORE_RTOL),
        f"logprobs (atol {SCORE_ATOL:g}, rtol {SCORE_RTOL:g})",
    )
    expect(
        (ids[valid:] == -1).all(axis=1) & (scores[valid:] == 0).all(axis=1) & (ranks[valid:] == 0),
        "padding rows (ids -1, logprob 0, rank 0)",
    )
    return problems


def bench_case(paddle, torch, ops, timer, V: int, dtype: str, rng) -> dict:
    step = make_step(rng, V)
    N = BATCH * (DRAFTS + 1)
    elem = 4 if dtype == "float32" else 2
    valid_rows = int(step["accept"].sum())

    if dtype == "bfloat16":
        step["logits"] = bf16_round(step["logits"])
    logits = to_gpu(paddle, step["logits"], dtype)
    token_ids = to_gpu(paddle, np.zeros(N, np.int64))
    target = to_gpu(paddle, np.zeros((N, V), np.float32), dtype)
    cu = to_gpu(paddle, np.zeros(BATCH + 1, np.int32))
    small = {k: to_gpu(paddle, step[k]) for k in ("cu_q", "slt", "enc", "accept", "accept_tokens")}
    ids = to_gpu(paddle, np.zeros((N, TOP_K + 1), np.int64))
    scores = to_gpu(paddle, np.zeros((N, TOP_K + 1), np.float32))
    ranks = to_gpu(paddle, np.zeros(N, np.int64))

    def gather():
        ops.speculate_get_accept_tokens_and_logits(
            token_ids,
            target,
            logits,
            cu,
            small["cu_q"],
            small["slt"],
            small["enc"],
            small["accept"],
            small["accept_tokens"],
        )

    def logprobs():
        ops.speculate_logprobs_topk(target, token_ids, cu, ids, scores, ranks)

    nbytes = valid_rows * V * elem
    src_bytes = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst_bytes = torch.empty_like(src_bytes)

    def memcpy():
        dst_bytes.copy_(src_bytes)

    tdtype = torch.float32 if dtype == "float32" else torch.bfloat16
    t_logits = (
        torch.from_numpy(step["logits"]).cuda().to(tdtype)
    )  # all N padded rows, as upstream; exact
    t_tokens = torch.from_numpy(
        np.repeat(step["accept_tokens"][:, :1], DRAFTS + 1, 1).reshape(-1)
    ).cuda()[:, None]

    def torch_logprobs():
        lp = torch.log_softmax(t_logits, dim=-1)
        tok_lp = lp.gather(-1, t_tokens)
        rank = (lp >= tok_lp).sum(-1)
        top_lp, top_ids = lp.topk(TOP_K, dim=-1)
        return torch.cat([t_tokens, top_ids], 1), torch.cat([tok_lp, top_lp], 1), rank

    res = dict(vocab=V, dtype=dtype, rows_valid=valid_rows, rows_padded=N)
    res["gather_us"] = timer(gather)
    res["memcpy_us"] = timer(memcpy)
    res["gather_GBps"] = nbytes / res["gather_us"] / 1e3
    res["memcpy_GBps"] = nbytes / res["memcpy_us"] / 1e3
    res["gather_vs_memcpy"] = res["memcpy_us"] / res["gather_us"]
    res["logprobs_us"] = timer(logprobs)
    res["torch_logprobs_us"] = timer(torch_logprobs)
    res["logprobs_read_GBps"] = valid_rows * V * elem / res["logprobs_us"] / 1e3
    res["logprobs_speedup"] = res["torch_logprobs_us"] / res["logprobs_us"]

    timer.sync()
    problems = check_outputs(
        step,
        host_values(logits.numpy()),
        TOP_K,
        **outputs_of(cu, token_ids, target, ids, scores, ranks),
    )
    res["check_ok"], res["check_failures"] = not problems, problems
    return res


DRY_RUN_TABLE = (
    ("vocab", "V", "{}"),
    ("dtype", "dtype", "{}"),
    ("rows_valid", "valid rows", "{}"),
    ("check_ok", "reference check", "{}"),
)


def print_table(results: list[dict]) -> None:
    head = (
        f"{'V':>7} {'dtype':>8} {'rows':>5} | {'gather us':>9} {'GB/s':>6} {'memcpy us':>9} {'GB/s':>6} "
        f"{'ratio':>5} | {'logprob us':>10} {'GB/s':>6} {'torch us':>9} {'speedup':>7} {'ok':>3}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r['vocab']:>7} {r['dtype']:>8} {r['rows_valid']:>5} | {r['gather_us']:>9.1f} "
            f"{r['gather_GBps']:>6.0f} {r['memcpy_us']:>9.1f} {r['memcpy_GBps']:>6.0f} "
            f"{r['gather_vs_memcpy']:>5.2f} | {r['logprobs_us']:>10.1f} {r['logprobs_read_GBps']:>6.0f} "
            f"{r['torch_logprobs_us']:>9.1f} {r['logprobs_speedup']:>6.1f}x {'yes' if r['check_ok'] else 'NO':>3}"
        )


def plot(results: list[dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_logprobs: matplotlib missing, no plot")
        return
    labels = [f"{r['vocab'] // 1000}k {r['dtype']}" for r in results]
    xs = np.arange(len(results))
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.bar(
        xs - 0.2,
        [r["gather_GBps"] for r in results],
        0.4,
        label="speculate_get_accept_tokens_and_logits",
    )
    a.bar(xs + 0.2, [r["memcpy_GBps"] for r in results], 0.4, label="cudaMemcpyAsync D2D")
    a.set_xticks(xs, labels)
    a.set_ylabel("GB/s (bytes copied)")
    a.set_title("(a) gather of the accepted rows")
    a.legend(fontsize=8)
    b.bar(
        xs - 0.2,
        [r["logprobs_us"] for r in results],
        0.4,
        label="speculate_logprobs_topk (valid rows)",
    )
    b.bar(
        xs + 0.2,
        [r["torch_logprobs_us"] for r in results],
        0.4,
        label="torch log_softmax+topk (all rows)",
    )
    b.set_yscale("log")
    b.set_xticks(xs, labels)
    b.set_ylabel("µs (median)")
    b.set_title(f"(b) logprobs, top-{TOP_K}, B={BATCH}, K={DRAFTS}")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"bench_logprobs: wrote {path}")


def outputs_of(cu, token_ids, target, ids, scores, ranks) -> dict:
    """The two ops' outputs as host arrays, under ``check_outputs``'s names."""
    return dict(
        cu=cu.numpy(),
        token_ids=token_ids.numpy(),
        gathered=host_values(target.numpy()),
        ids=ids.numpy(),
        scores=scores.numpy(),
        ranks=ranks.numpy(),
    )


def cpu_step(rng: np.random.Generator, vocab: int, batch: int, dtype: str):
    """One step (``make_step``) through both ops on CPU tensors; returns (the step, the logits'
    float32 values, ``outputs_of`` the ops)."""
    import paddle

    from fastdeploy_spec import ops

    def cpu(array, dtype=None):
        t = paddle.to_tensor(array, place=paddle.CPUPlace())
        return t.astype("bfloat16") if dtype == "bfloat16" else t

    step = make_step(rng, vocab, batch=batch)
    if dtype == "bfloat16":
        step["logits"] = bf16_round(step["logits"])
    n = batch * (DRAFTS + 1)
    logits = cpu(step["logits"], dtype)
    token_ids, target = cpu(np.zeros(n, np.int64)), cpu(np.zeros((n, vocab), np.float32), dtype)
    cu = cpu(np.zeros(batch + 1, np.int32))
    ids, scores = (
        cpu(np.zeros((n, TOP_K + 1), np.int64)),
        cpu(np.zeros((n, TOP_K + 1), np.float32)),
    )
    ranks = cpu(np.zeros(n, np.int64))
    ops.speculate_get_accept_tokens_and_logits(
        token_ids,
        target,
        logits,
        cu,
        cpu(step["cu_q"]),
        cpu(step["slt"]),
        cpu(step["enc"]),
        cpu(step["accept"]),
        cpu(step["accept_tokens"]),
    )
    ops.speculate_logprobs_topk(target, token_ids, cu, ids, scores, ranks)
    return step, host_values(logits.numpy()), outputs_of(cu, token_ids, target, ids, scores, ranks)


def dry_run(out: Path, batch: int = 7, vocab: int = 300) -> int:
    """Both ops on CPU tensors on one small step per dtype, checked by ``check_outputs``; no timing."""
    from benchmarks import common as bc

    rows = []
    for dtype in DTYPES:
        step, logits, outputs = cpu_step(np.random.default_rng(0), vocab, batch, dtype)
        n = batch * (DRAFTS + 1)
        problems = check_outputs(step, logits, TOP_K, **outputs)
        rows.append(
            dict(
                vocab=vocab,
                dtype=dtype,
                rows_valid=int(step["accept"].sum()),
                rows_padded=n,
                check_ok=not problems,
                check_failures=problems,
            )
        )
    path = bc.write_results(
        str(out), "bench_logprobs", dict(device="cpu (dry run)", batch=batch), rows
    )
    bc.print_table(rows, DRY_RUN_TABLE)
    print(f"bench_logprobs: wrote {path}")
    return 0 if all(r["check_ok"] for r in rows) else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one vocabulary, fewer iterations")
    ap.add_argument(
        "--out", type=Path, default=Path("results/bench_logprobs"), help="folder for JSON and PNG"
    )
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: both ops on the CPU on a small step, checked against the reference",
    )
    args = ap.parse_args(argv)
    if args.dry_run:
        return dry_run(args.out)
    paddle, torch, ops = setup()
    iters = args.iters or (20 if args.quick else 100)
    vocabs = VOCABS[:1] if args.quick else VOCABS
    from benchmarks.gpu_timer import StreamTimer

    timer = StreamTimer(torch, iters, args.warmup)
    rng = np.random.default_rng(0)
    results = [
        bench_case(paddle, torch, ops, timer, V, dtype, rng) for V in vocabs for dtype in DTYPES
    ]
    print_table(results)
    for r in results:
        for problem in r["check_failures"]:
            print(f"bench_logprobs: check failed (V {r['vocab']}, {r['dtype']}): {problem}")
    args.out.mkdir(parents=True, exist_ok=True)
    meta = dict(
        device=torch.cuda.get_device_name(0),
        paddle=paddle.__version__,
        torch=torch.__version__,
        python=platform.python_version(),
        batch=BATCH,
        drafts=DRAFTS,
        top_k=TOP_K,
        iters=iters,
        warmup=args.warmup,
        method="per-iteration CUDA events on Paddle's stream, held by _sleep; median",
    )
    (args.out / "bench_logprobs.json").write_text(
        json.dumps(dict(meta=meta, results=results), indent=2)
    )
    print(f"bench_logprobs: wrote {args.out / 'bench_logprobs.json'}")
    plot(results, args.out / "bench_logprobs.png")
    return 0 if all(r["check_ok"] for r in results) else 1


if __name__ == "__main__":
    main()
