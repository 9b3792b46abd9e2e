"""torch's sort-based top-k / top-p sampling on the rows of benchmarks/kernels/bench_sample_tokens.cu: the
baseline of speculate_sample_tokens' benchmark (same shapes, same row distributions, same
parameters), with a device-to-device copy of the logits timed in the same run.

The sampler is the usual one of engines without a fused kernel (vLLM's PyTorch fallback): scale by
the temperature, sort descending, softmax, mask past the top-p mass (and past k), renormalise,
draw with exponential noise (argmax of p / E). Timed as a CUDA graph of back-to-back calls (warm) and
with each call after a read of max(128 MB, 2.5 x L2) whose time alone is subtracted (cold); medians.

    python benchmarks/kernels/bench_sample_torch.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

V, K = 152064, 5


def make_logits(n: int, dtype: torch.dtype, broad: bool, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(n, V, device="cuda", generator=gen) * (1.0 if broad else 2.0)
    if not broad:
        heavy = torch.rand(n, V, device="cuda", generator=gen) < 0.002
        x += heavy * (14.0 + 6.0 * torch.rand(n, V, device="cuda", generator=gen))
    return x.to(dtype)


def sort_sample(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_p: torch.Tensor,
    top_k: int,
) -> torch.Tensor:
    x = logits.float() / temperature[:, None]
    srt, idx = x.sort(dim=-1, descending=True)
    probs = srt.softmax(dim=-1)
    cum = probs.cumsum(dim=-1)
    mask = (cum - probs) > top_p[:, None]  # keep the entry that crosses the threshold
    if top_k:
        mask[:, top_k:] = True
    probs = probs.masked_fill(mask, 0.0)
    probs = probs / probs.sum(dim=-1, keepdim=True)
    # The default generator: graph capture advances its offset at each replay (a generator of one's own
    # must be registered with the graph, which older torch versions cannot do).
    q = torch.empty_like(probs).exponential_()
    return idx.gather(-1, (probs / q).argmax(dim=-1, keepdim=True)).squeeze(-1)


def time_us(fn, calls: int, reps: int, rounds: int, flush=None) -> float:
    def body():
        for _ in range(calls):
            if flush is not None:
                flush()
            fn()

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        body()  # warm-up outside the graph (allocations)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / (calls * reps))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    rounds, reps, calls = (3, 2, 2) if args.quick else (7, 5, 2)
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    flush_buf = torch.empty(max(128 << 20, 5 * l2 // 2) // 4, dtype=torch.float32, device="cuda")
    sink = torch.empty(1, device="cuda")
    flush = lambda: torch.sum(flush_buf.view(1, -1), dim=1, out=sink)  # noqa: E731
    gen = torch.Generator(device="cuda")
    gen.manual_seed(51)
    torch.manual_seed(51)
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for B in (64, 256):
            n = B * (K + 1)
            temperature = torch.full((n,), 0.8, device="cuda")
            top_p = torch.full((n,), 0.9, device="cuda")
            for kind in ("peaked", "broad"):
                logits = make_logits(n, dtype, kind == "broad", gen)
                dst = torch.empty_like(logits)
                for top_k in (0, 50):
                    if kind == "broad" and top_k:
                        continue
                    sample = lambda x=logits, t=temperature, p=top_p, k=top_k: sort_sample(
                        x, t, p, k
                    )  # noqa: E731
                    copy = lambda d=dst, x=logits: d.copy_(x)  # noqa: E731
                    flush_us = time_us(flush, calls, reps, rounds)
                    r = dict(
                        dtype=str(dtype).split(".")[-1],
                        B=B,
                        N=n,
                        logits=kind,
                        top_k=top_k,
                        torch_us=time_us(sample, calls, reps, rounds),
                        torch_cold_us=time_us(sample, calls, reps, rounds, flush) - flush_us,
                        copy_us=time_us(copy, calls, reps, rounds),
                    )
                    print(
                        f"{r['dtype']:8s} B={B:3d} N={n:4d} {kind:6s} top_k={top_k:2d}: torch sort-sample "
                        f"{r['torch_us']:9.1f} us (cold {r['torch_cold_us']:9.1f}) | copy {r['copy_us']:8.1f} us "
                        f"-> torch / one read {r['torch_us'] / (r['copy_us'] / 2):.1f}",
                        flush=True,
                    )
                    rows.append(r)
                del logits, dst
                torch.cuda.empty_cache()
    print(f"\ndevice: {props.name}, torch {torch.__version__}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"device": props.name, "torch": torch.__version__, "V": V, "K": K, "rows": rows},
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
