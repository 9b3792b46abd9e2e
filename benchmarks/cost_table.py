"""The verification cost table: the step time of a Llama-3.1-8B-shaped decoder forward, measured.

What the draft-length policy (``speculate_draft_length_policy``, docs/contract/policy.md) and the
goodput benchmark (``benchmarks/goodput.py``) read as the price of verifying N tokens in one step.
PyTorch on one CUDA GPU, random bf16 weights (a forward's time does not depend on the weights'
values). The model: hidden 4096, 32 query heads and 8 KV heads of dimension 128, SwiGLU FFN 14336,
RMSNorm, rotary embedding, vocabulary 128256, 32 layers, no tensor parallelism.

The step time splits into two parts, measured separately and added by the reader:

* ``dense_us[N]``: everything whose cost follows the tokens of the step, N = 1 .. 2048 (a grid of N;
  readers interpolate linearly between its points): the embedding gather, per layer RMSNorm, the
  fused QKV projection, rotary embedding, the output projection, RMSNorm, the fused gate/up
  projection, SiLU-and-multiply and the down projection with the residual adds, then the final
  RMSNorm and the lm_head over all N tokens (verification needs the logits of every position).
  ``LAYERS_TIMED`` layers (distinct weights, so that no layer finds another's weights in L2) are
  timed as one CUDA graph; the table is ``32 / LAYERS_TIMED`` times that plus the embedding,
  final norm and lm_head, timed as a second graph.
* ``attn_us_per_seq``: the attention of one decoding sequence over a KV cache of ``--kv-len``
  tokens, for all 32 layers: one SDPA call (PyTorch's flash path) of C sequences, each with q query
  tokens (1 and 6: the last accepted token and up to 5 drafts) over its own cache, timed for C in
  {8, 32, 128, 256} on one layer, the slope over C (a least-squares line) times 32. Decode
  attention reads each sequence's cache once whatever its few query tokens (GQA: the 4 query heads
  of a KV head and the q tokens form one 4q-row query block per KV head), so its cost follows the
  sequences, not the tokens; the q = 1 and q = 6 slopes are both recorded.

A step of C decoding sequences verifying N tokens in all then costs
``dense_us(N) + C * attn_us_per_seq(q = 1)``; the policy's marginal cost of one more verified token
is the slope of ``dense_us`` (plus the small q dependence of attention, recorded, not used).

Timing: CUDA graphs replayed ``--reps`` times between two CUDA events, ``--rounds`` rounds, the
median; two warm-up replays per graph. The whole run takes about a minute on an H100.

    python benchmarks/cost_table.py --out fastdeploy_spec/data/cost_table_llama3_8b_h100.json

Prints the JSON (and writes it with ``--out``). A user with another model or GPU supplies a JSON of
the same keys (``tokens``, ``dense_us``, ``attn_us_per_seq``) to the policy and the benchmark.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

HIDDEN = 4096
HEADS = 32
KV_HEADS = 8
HEAD_DIM = 128
FFN = 14336
VOCAB = 128256
LAYERS = 32
LAYERS_TIMED = 4
# The grid of token counts: dense up to 64 (where the GEMMs change shape fastest), then coarser.
TOKEN_GRID = [
    1,
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    12,
    16,
    20,
    24,
    32,
    40,
    48,
    56,
    64,
    80,
    96,
    112,
    128,
    160,
    192,
    224,
    256,
    320,
    384,
    448,
    512,
    640,
    768,
    896,
    1024,
    1280,
    1536,
    1792,
    2048,
]
ATTN_SEQS = (8, 32, 128, 256)


def _parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the JSON here as well")
    ap.add_argument("--kv-len", type=int, default=1024, help="KV cache length of each sequence")
    ap.add_argument("--reps", type=int, default=10, help="graph replays per timed round")
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds (the median is reported)")
    ap.add_argument("--quick", action="store_true", help="a few grid points (a smoke test)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = _parse(argv)
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        print("cost_table: needs a CUDA GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    dt = torch.bfloat16
    torch.manual_seed(0)
    t_start = time.time()

    def w(*shape):
        return torch.randn(*shape, device=dev, dtype=dt) * 0.02

    layers = [
        dict(
            ln1=torch.ones(HIDDEN, device=dev, dtype=dt),
            ln2=torch.ones(HIDDEN, device=dev, dtype=dt),
            qkv=w(HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM),
            o=w(HEADS * HEAD_DIM, HIDDEN),
            gate_up=w(HIDDEN, 2 * FFN),
            down=w(FFN, HIDDEN),
        )
        for _ in range(LAYERS_TIMED)
    ]
    embed = w(VOCAB, HIDDEN)
    lm_head = w(HIDDEN, VOCAB)
    final_ln = torch.ones(HIDDEN, device=dev, dtype=dt)
    max_n = TOKEN_GRID[-1]
    inv_freq = 1.0 / (
        500000.0 ** (torch.arange(0, HEAD_DIM, 2, device=dev, dtype=torch.float32) / HEAD_DIM)
    )
    pos = torch.arange(max_n, device=dev, dtype=torch.float32) + args.kv_len
    ang = torch.outer(pos, inv_freq)
    cos_all, sin_all = ang.cos().to(dt), ang.sin().to(dt)

    def rms(x, g):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt) * g

    def rope(x, cos, sin):  # x [N, H, D]
        x1, x2 = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2 :]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)

    def layer_dense(h, L, cos, sin):
        x = rms(h, L["ln1"])
        qkv = x @ L["qkv"]
        q = qkv[:, : HEADS * HEAD_DIM].view(-1, HEADS, HEAD_DIM)
        k = qkv[:, HEADS * HEAD_DIM : (HEADS + KV_HEADS) * HEAD_DIM].view(-1, KV_HEADS, HEAD_DIM)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        # q stands in for the attention output (attention is timed apart, per sequence); k's rotary
        # embedding still runs, as it does before the cache write.
        h = h + q.reshape(-1, HEADS * HEAD_DIM) @ L["o"]
        x = rms(h, L["ln2"])
        gu = x @ L["gate_up"]
        return h + (F.silu(gu[:, :FFN]) * gu[:, FFN:]) @ L["down"]

    stream = torch.cuda.Stream()

    def time_graph(fn) -> float:
        """Median us of one call of fn, from graph replays."""
        with torch.cuda.stream(stream):
            for _ in range(2):
                fn()  # eager warm-up (allocations, library handles)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            fn()
        for _ in range(2):
            g.replay()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(args.rounds):
            e0.record()
            for _ in range(args.reps):
                g.replay()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) * 1e3 / args.reps)
        del g
        return statistics.median(times)

    grid = [1, 4, 16, 64, 256, 1024] if args.quick else TOKEN_GRID
    layer_us, head_us, dense_us = [], [], []
    for n in grid:
        ids = torch.randint(0, VOCAB, (n,), device=dev)
        h0 = w(n, HIDDEN)
        cos, sin = cos_all[:n], sin_all[:n]

        def layers_fn(h0=h0, cos=cos, sin=sin):
            h = h0
            for L in layers:
                h = layer_dense(h, L, cos, sin)
            return h

        def head_fn(ids=ids, h0=h0):
            return rms(embed[ids] + h0, final_ln) @ lm_head

        t_layers = time_graph(layers_fn)
        t_head = time_graph(head_fn)
        layer_us.append(t_layers / LAYERS_TIMED)
        head_us.append(t_head)
        dense_us.append(t_layers * LAYERS / LAYERS_TIMED + t_head)
        print(
            f"N={n:5d} layer {t_layers / LAYERS_TIMED:8.1f} us  head {t_head:8.1f} us  "
            f"dense {dense_us[-1]:9.1f} us",
            file=sys.stderr,
        )

    def attn_fn_of(c: int, q: int):
        # GQA as one query block per KV head: the 4 query heads x q tokens of a KV head are its rows.
        qt = w(c, KV_HEADS, (HEADS // KV_HEADS) * q, HEAD_DIM)
        kt = w(c, KV_HEADS, args.kv_len, HEAD_DIM)
        vt = w(c, KV_HEADS, args.kv_len, HEAD_DIM)
        return lambda: F.scaled_dot_product_attention(qt, kt, vt)

    attn = {}
    for q in (1, 6):
        pts = []
        for c in ATTN_SEQS:
            t = time_graph(attn_fn_of(c, q))
            pts.append((c, t))
            print(
                f"attention C={c:4d} q={q} kv={args.kv_len}: {t:8.1f} us per layer", file=sys.stderr
            )
        mx = sum(c for c, _ in pts) / len(pts)
        my = sum(t for _, t in pts) / len(pts)
        slope = sum((c - mx) * (t - my) for c, t in pts) / sum((c - mx) ** 2 for c, _ in pts)
        attn[q] = dict(
            points_us_per_layer=[[c, round(t, 3)] for c, t in pts],
            us_per_seq=round(slope * LAYERS, 4),
        )

    out = dict(
        source="benchmarks/cost_table.py (PyTorch, CUDA graphs, median of rounds)",
        device=torch.cuda.get_device_name(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        model=dict(
            name="Llama-3.1-8B-shaped, random bf16 weights",
            hidden=HIDDEN,
            heads=HEADS,
            kv_heads=KV_HEADS,
            head_dim=HEAD_DIM,
            ffn=FFN,
            vocab=VOCAB,
            layers=LAYERS,
        ),
        layers_timed=LAYERS_TIMED,
        scaling=(
            f"dense_us = layers_graph_us * {LAYERS} / {LAYERS_TIMED} + head_graph_us (embedding, "
            f"final norm, lm_head over all N tokens); attention timed apart per sequence"
        ),
        kv_len=args.kv_len,
        reps=args.reps,
        rounds=args.rounds,
        tokens=grid,
        dense_us=[round(x, 3) for x in dense_us],
        layer_us=[round(x, 3) for x in layer_us],
        head_us=[round(x, 3) for x in head_us],
        attn_us_per_seq=attn[1]["us_per_seq"],
        attn_q6_us_per_seq=attn[6]["us_per_seq"],
        attn_points=attn,
        placeholder=False,
        wall_s=round(time.time() - t_start, 1),
    )
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0 if all(math.isfinite(x) for x in dense_us) else 1


if __name__ == "__main__":
    raise SystemExit(main())
