"""Benchmark of the logprob message transport (docs/contract/transport.md): messages per second from a sender
process to a receiver process, and bytes per message.

    python -m benchmarks --routine msgqueue [--quick] [--out DIR] [--tokens-per-slot 3]

Ours: ``speculate_save_output_topk`` in a sender process, ``speculate_get_output_topk`` (blocking)
in a receiver process, both called from Python on CPU tensors, for B in {1, 64, 512} x top-k in
{0, 5, 20}, every slot carrying ``--tokens-per-slot`` tokens. Everything the op does is timed:
Paddle's dispatch, the pack, the fragments, the reassembly and the fill of the receive layout.

Baselines, in the same run:
  * ``upstream-raw``: upstream's fixed layout (530,444 bytes per message, whatever the content) sent
    as one SysV message by ``msgsnd``/``msgrcv`` through ctypes, with no pack or unpack (so it is an
    upper bound for upstream's ops). It needs kernel.msgmax / kernel.msgmnb above 530 KB: they are
    raised for it (root only) and restored; otherwise it is skipped, as upstream's op cannot send
    at all then (its msgsnd fails with EINVAL and the message is dropped).
  * ``fixed-size-ours``: the same volume through our transport at the machine's limits: B = 512,
    6 tokens per slot, 21 columns (upstream's full layout, fragmented).
  * With the limits raised, ``ours-raised`` / ``fixed-size-raised`` repeat B = 512, top-k 20 (3 and
    6 tokens per slot) through our ops under the same limits as ``upstream-raw``.

The receiver times ``--messages`` messages after ``--warmup``; each point is the median of
``--repeats`` runs. It needs no GPU. A table is printed; JSON goes to ``--out``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from tests import sysv  # noqa: E402
from tests.sysv import MSGMAX, MSGMNB  # noqa: E402

# Upstream's message: long mtype + int meta[3 + 512] + 512 x (int tokens[126], float scores[126],
# int ranks[6]); msgsnd is given the size without the mtype.
UPSTREAM_TEXT_BYTES = 4 * (3 + 512) + 512 * (126 * 4 + 126 * 4 + 6 * 4)
TIMEOUT_S = 120


def _step_tensors(batch: int, columns: int, tokens_per_slot: int, last: bool):
    """Inputs of one speculate_save_output_topk call (CPU tensors); `last` clears not_need_stop."""
    import paddle

    rng = np.random.default_rng(0)
    n = batch * tokens_per_slot
    arrays = [
        rng.integers(0, 150000, n).astype(np.int64),
        rng.integers(0, 150000, (n, columns)).astype(np.int64),
        (-rng.exponential(3.0, (n, columns))).astype(np.float32),
        rng.integers(0, 1000, n).astype(np.int64),
        np.full(batch, tokens_per_slot, np.int32),
        (np.arange(batch + 1) * tokens_per_slot).astype(np.int32),
        np.array([not last]),
        np.full(batch, 100, np.int32),
        np.full((batch, 1), 10, np.int64),
    ]
    return [paddle.to_tensor(a) for a in arrays]


def sender_worker(conn) -> None:
    """Runs send jobs from the parent: ('ours', cfg) or ('raw', cfg)."""
    from fastdeploy_spec import ops, transport

    libc = sysv.libc()
    while (job := conn.recv()) is not None:
        kind, cfg = job
        os.environ["INFERENCE_MSG_QUEUE_ID"] = str(cfg["queue_id"])
        total = cfg["warmup"] + cfg["messages"]
        if kind == "ours":
            step = _step_tensors(cfg["batch"], cfg["columns"], cfg["tokens_per_slot"], last=False)
            final = _step_tensors(cfg["batch"], cfg["columns"], cfg["tokens_per_slot"], last=True)
            conn.send("ready")
            conn.recv()
            flag = transport.layout().flag_target
            for _ in range(total - 1):
                ops.speculate_save_output_topk(*step, flag, 0, False)
            ops.speculate_save_output_topk(*final, flag, 0, False)
            nbytes, fragments = transport.last_send_stats()
        else:
            msqid = sysv.raw_queue(cfg["queue_id"])
            buf = ctypes.create_string_buffer(8 + UPSTREAM_TEXT_BYTES)
            ctypes.c_long.from_buffer(buf).value = 1
            conn.send("ready")
            conn.recv()
            for _ in range(total):
                if libc.msgsnd(msqid, buf, UPSTREAM_TEXT_BYTES, 0) != 0:
                    raise OSError(ctypes.get_errno(), "msgsnd of the upstream layout failed")
            nbytes, fragments = UPSTREAM_TEXT_BYTES, 1
        conn.send(dict(bytes=nbytes, fragments=fragments))


def last_message_ok(tokens, scores, ranks, cfg) -> bool:
    """The reference check: the last message received, parsed, equals what the sender sent (ids,
    float32 logprobs bit for bit, ranks, for every slot)."""
    from fastdeploy_spec.transport.parser import parse_logprob_output

    msg = parse_logprob_output(tokens, scores, ranks)
    sent = [
        t.numpy() for t in _step_tensors(cfg["batch"], cfg["columns"], cfg["tokens_per_slot"], True)
    ]
    if msg is None or msg.batch != cfg["batch"]:
        return False
    tps = cfg["tokens_per_slot"]
    ids = np.concatenate([sent[0][:, None], sent[1][:, 1:]], axis=1)  # column 0: the sampled token
    for b, slot in enumerate(msg.slots):
        rows = slice(b * tps, (b + 1) * tps)
        if (
            slot.count != tps
            or not np.array_equal(np.asarray(slot.topk_token_ids, np.int64), ids[rows])
            or not np.array_equal(
                np.asarray(slot.topk_logprobs, np.float32).view(np.int32),
                sent[2][rows].view(np.int32),
            )
            or not np.array_equal(np.asarray(slot.ranks, np.int64), sent[3][rows])
        ):
            return False
    return True


def receiver_worker(conn) -> None:
    """Runs receive jobs: times cfg['messages'] messages after cfg['warmup']."""
    import paddle

    from fastdeploy_spec import ops, transport

    lay = transport.layout()
    tokens = paddle.to_tensor(np.zeros((lay.tokens_len, 1), np.int64))
    scores = paddle.to_tensor(np.zeros((lay.scores_len, 1), np.float32))
    ranks = paddle.to_tensor(np.zeros(lay.ranks_len, np.int64))
    libc = sysv.libc()
    raw = ctypes.create_string_buffer(8 + UPSTREAM_TEXT_BYTES)
    while (job := conn.recv()) is not None:
        kind, cfg = job
        os.environ["INFERENCE_MSG_QUEUE_ID"] = str(cfg["queue_id"])
        if kind == "ours":

            def get():
                ops.speculate_get_output_topk(tokens, scores, ranks, 20, 0, True)
        else:
            msqid = sysv.raw_queue(cfg["queue_id"])

            def get(msqid=msqid):
                if libc.msgrcv(msqid, raw, UPSTREAM_TEXT_BYTES, 0, 0) != UPSTREAM_TEXT_BYTES:
                    raise OSError(ctypes.get_errno(), "msgrcv of the upstream layout failed")

        conn.send("ready")
        for _ in range(cfg["warmup"]):
            get()
        start = time.perf_counter()
        for _ in range(cfg["messages"]):
            get()
        elapsed = time.perf_counter() - start
        # The last message is the only one with not_need_stop false: all arrived, in order.
        complete = kind != "ours" or int(tokens.numpy()[0, 0]) == -1
        conn.send(
            dict(
                seconds=elapsed,
                complete=complete,
                content_ok=kind != "ours" or last_message_ok(tokens, scores, ranks, cfg),
            )
        )


class Workers:
    """One sender and one receiver process, kept for the whole run (spawned once)."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for target in (sender_worker, receiver_worker):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=target, args=(child,), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def _recv(self, conn):
        if not conn.poll(TIMEOUT_S):
            raise TimeoutError("a benchmark worker did not answer (see its traceback above)")
        return conn.recv()

    def run(self, kind: str, cfg: dict) -> dict:
        sender, receiver = self.conns
        sender.send((kind, cfg))
        receiver.send((kind, cfg))
        assert self._recv(sender) == "ready" and self._recv(receiver) == "ready"
        sender.send("go")
        sent = self._recv(sender)
        got = self._recv(receiver)
        if not got["complete"]:
            raise RuntimeError(
                f"{kind} {cfg}: the receiver did not end on the sender's last message"
            )
        if not got["content_ok"]:
            raise RuntimeError(f"{kind} {cfg}: the last message received differs from the one sent")
        return dict(sent, rate=cfg["messages"] / got["seconds"])

    def close(self) -> None:
        for conn in self.conns:
            conn.send(None)
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()


def free_queue_id(exclude=()) -> int:
    from fastdeploy_spec import transport

    for qid in range(200, 255):
        if qid not in exclude and transport.queue_stats(qid) is None:
            return qid
    raise RuntimeError("no free message queue id in 200 .. 254")


def measure(workers: Workers, kind: str, cfg: dict, repeats: int) -> dict:
    runs = [workers.run(kind, cfg) for _ in range(repeats)]
    rate = statistics.median(r["rate"] for r in runs)
    return dict(
        bytes=runs[0]["bytes"],
        fragments=runs[0]["fragments"],
        msgs_per_s=rate,
        mb_per_s=rate * runs[0]["bytes"] / 1e6,
        runs=[r["rate"] for r in runs],
    )


def limits_writable() -> bool:
    return os.geteuid() == 0 and os.access(MSGMAX, os.W_OK) and os.access(MSGMNB, os.W_OK)


def plot(rows, path: Path) -> None:
    from benchmarks import common as bc

    plt = bc.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = [f"{r['case']}\nB={r['batch']} k={r['topk']}" for r in rows]
    ax.bar(range(len(rows)), [r["msgs_per_s"] for r in rows])
    ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("messages / s")
    ax.set_title("logprob messages between two processes")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer messages, one repeat")
    ap.add_argument(
        "--out", type=Path, default=Path("results"), help="directory of the JSON result"
    )
    ap.add_argument(
        "--tokens-per-slot", type=int, default=3, help="accepted tokens per slot (1 .. 6)"
    )
    ap.add_argument("--messages", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument(
        "--no-raise",
        action="store_true",
        help="never raise the system's message-queue limits (skips the upstream-raw baseline)",
    )
    args = ap.parse_args(argv)
    if not 1 <= args.tokens_per_slot <= 6:
        ap.error("--tokens-per-slot must be in 1 .. 6")
    try:
        from fastdeploy_spec import transport

        transport.layout()
    except ImportError as e:
        print(f"bench_msgqueue: cannot load the op library: {e}", file=sys.stderr)
        return 1
    repeats = args.repeats or (1 if args.quick else 3)
    messages = args.messages or (500 if args.quick else 4000)
    warmup = max(20, messages // 20)

    import paddle

    limits = dict(msgmax=int(MSGMAX.read_text()), msgmnb=int(MSGMNB.read_text()))
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Paddle {paddle.__version__}, "
        f"kernel.msgmax {limits['msgmax']}, kernel.msgmnb {limits['msgmnb']}, "
        f"{args.tokens_per_slot} tokens/slot, {messages} messages x {repeats} repeats",
        flush=True,
    )
    workers = Workers()
    rows = []
    qid = free_queue_id()
    try:
        base = dict(queue_id=qid, warmup=warmup, tokens_per_slot=args.tokens_per_slot)
        for batch in (1, 64, 512):
            for topk in (0, 5, 20):
                n = messages if batch < 512 else max(messages // 8, 50)
                cfg = dict(base, batch=batch, columns=topk + 1, messages=n)
                rows.append(
                    dict(
                        case="ours",
                        batch=batch,
                        topk=topk,
                        **measure(workers, "ours", cfg, repeats),
                    )
                )
                print(
                    f"  ours B={batch} top-k={topk}: {rows[-1]['msgs_per_s']:.0f} msg/s", flush=True
                )
        n = max(messages // 8, 50)
        cfg = dict(base, batch=512, columns=21, tokens_per_slot=6, messages=n)
        rows.append(
            dict(
                case="fixed-size-ours", batch=512, topk=20, **measure(workers, "ours", cfg, repeats)
            )
        )
        fallback_baseline = rows[-1]
        if limits_writable() and not args.no_raise:
            # Queues created after the limits are raised get the larger capacity (msg_qbytes).
            raised_qid = free_queue_id(exclude=(qid,))
            try:
                MSGMAX.write_text(str(2 * UPSTREAM_TEXT_BYTES))
                MSGMNB.write_text(str(8 * UPSTREAM_TEXT_BYTES))
                cfg = dict(base, queue_id=raised_qid, messages=n)
                rows.append(
                    dict(
                        case="upstream-raw",
                        batch=512,
                        topk=20,
                        **measure(workers, "raw", cfg, repeats),
                    )
                )
                transport.remove_queue(raised_qid)
                # Ours under the same raised limits: one fragment per message.
                for tokens_per_slot in (args.tokens_per_slot, 6):
                    case = (
                        "ours-raised"
                        if tokens_per_slot == args.tokens_per_slot
                        else "fixed-size-raised"
                    )
                    cfg = dict(
                        base,
                        queue_id=raised_qid,
                        batch=512,
                        columns=21,
                        tokens_per_slot=tokens_per_slot,
                        messages=n,
                    )
                    rows.append(
                        dict(
                            case=case, batch=512, topk=20, **measure(workers, "ours", cfg, repeats)
                        )
                    )
            finally:
                transport.remove_queue(raised_qid)
                MSGMAX.write_text(str(limits["msgmax"]))
                MSGMNB.write_text(str(limits["msgmnb"]))
        else:
            print(
                "# upstream-raw skipped: raising kernel.msgmax / kernel.msgmnb needs root "
                "(at these limits upstream's op cannot send its 530 KB message at all)"
            )
    finally:
        workers.close()
        transport.remove_queue(qid)

    ref = next((r for r in rows if r["case"] == "upstream-raw"), fallback_baseline)
    print(
        f"\n{'case':<18} {'B':>4} {'top-k':>5} {'bytes/msg':>10} {'frags':>5} {'msg/s':>10} {'MB/s':>8} "
        f"{'vs ' + ref['case']:>22}"
    )
    for r in rows:
        print(
            f"{r['case']:<18} {r['batch']:>4} {r['topk']:>5} {r['bytes']:>10} {r['fragments']:>5} "
            f"{r['msgs_per_s']:>10.0f} {r['mb_per_s']:>8.1f} {r['msgs_per_s'] / ref['msgs_per_s']:>21.1f}x"
        )
    target = next(r for r in rows if r["case"] == "ours" and r["batch"] == 64 and r["topk"] == 0)
    ok = target["msgs_per_s"] >= 20000
    print(
        f"\nrequirement B=64 top-k 0 >= 20,000 msg/s: {target['msgs_per_s']:.0f} -> {'met' if ok else 'NOT met'}"
    )

    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "bench_msgqueue.json"
    out.write_text(
        json.dumps(
            dict(
                machine=dict(
                    processor=platform.processor(),
                    cpus=os.cpu_count(),
                    paddle=paddle.__version__,
                    python=platform.python_version(),
                    **limits,
                ),
                tokens_per_slot=args.tokens_per_slot,
                messages=messages,
                warmup=warmup,
                repeats=repeats,
                baseline=ref["case"],
                rows=rows,
            ),
            indent=1,
        )
    )
    print(f"wrote {out}")
    plot(rows, args.out / "bench_msgqueue.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
