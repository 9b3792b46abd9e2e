"""One valid, non-empty call of each op on one place, in its own process; compares GPU with CPU.

    python scripts/dev/smoke_ops.py            # every op, CPU then GPU, a process each
    python scripts/dev/smoke_ops.py OP PLACE   # one call; prints the outputs' digest

A dev tool for a Paddle whose failures take the process down (Paddle 2.6 on the GPU machine): the
parent reports which op and place crashed instead of losing the whole run.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zlib  # noqa: F401
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def cases() -> dict:
    rng = np.random.default_rng(0)
    B, W, K1, D, V = 4, 64, 6, 40, 3
    ids = rng.integers(0, V, (B, W)).astype(np.int64)
    per = lambda v, dt: np.asarray(v, dt)  # noqa: E731
    ngram = dict(token_ids_all=ids, prompt_lens=per([[30]] * B, np.int64), step_idx=per([[10]] * B, np.int64),
                 draft_token_num=per([5] * B, np.int32), draft_tokens=np.zeros((B, K1), np.int64),
                 seq_lens_this_time=per([1] * B, np.int32), seq_lens_encoder=per([0, 0, 3, 0], np.int32),
                 seq_lens_decoder=per([40, 0, 0, 40], np.int32), max_dec_len=per([[500]] * B, np.int64))
    hybrid = dict(token_ids_all=ids, prompt_lens=ngram["prompt_lens"],
                  pre_ids=rng.integers(0, V, (B, D)).astype(np.int64), step_idx=ngram["step_idx"],
                  draft_token_num=ngram["draft_token_num"], draft_tokens=np.zeros((B, K1), np.int64),
                  seq_lens_this_time=per([2, 1, 0, 2], np.int32), seq_lens_decoder=per([40, 40, 0, 40], np.int32),
                  max_dec_len=ngram["max_dec_len"])
    target = rng.integers(0, V, (B, K1)).astype(np.int64)
    verify = dict(target_tokens=target, accept_tokens=np.full((B, K1), -7, np.int64),
                  accept_num=np.zeros(B, np.int32), step_idx=ngram["step_idx"],
                  stop_flags=np.zeros((B, 1), bool), seq_lens_encoder=per([0, 3, 0, 0], np.int32),
                  seq_lens_decoder=per([40, 0, 40, 40], np.int32), draft_tokens=target.copy(),
                  seq_lens_this_time=per([6, 3, 4, 1], np.int32), max_dec_len=ngram["max_dec_len"],
                  end_tokens=per([99], np.int64))
    update = dict(accept_tokens=target.copy(), accept_num=per([3, 1, 2, 0], np.int32), token_ids_all=ids.copy(),
                  prompt_lens=ngram["prompt_lens"], step_idx=ngram["step_idx"].copy(),
                  max_dec_len=ngram["max_dec_len"], end_tokens=per([99], np.int64),
                  stop_flags=np.zeros((B, 1), bool), seq_lens_this_time=per([6, 3, 4, 1], np.int32),
                  seq_lens_encoder=per([0, 3, 0, 0], np.int32), seq_lens_decoder=per([40, 0, 40, 40], np.int32),
                  draft_tokens=np.zeros((B, K1), np.int64))
    Vl, N = 1000, B * K1
    gather = dict(token_ids=np.full(N, -1, np.int64), target_logits=np.zeros((N, Vl), np.float32),
                  logits=rng.standard_normal((B * K1, Vl)).astype(np.float32),
                  cu_batch_token_offset=np.zeros(B + 1, np.int32),
                  cu_seqlens_q_output=per([0, 6, 7, 13], np.int32), seq_lens_this_time=per([6, 1, 6, 1], np.int32),
                  seq_lens_encoder=per([0, 3, 0, 0], np.int32), accept_num=per([3, 1, 6, 1], np.int32),
                  accept_tokens=target.copy())
    logprobs = dict(target_logits=rng.standard_normal((N, Vl)).astype(np.float32),
                    token_ids=rng.integers(0, Vl, N).astype(np.int64),
                    cu_batch_token_offset=per([0, 3, 4, 10, 11], np.int32),
                    logprob_token_ids=np.zeros((N, 21), np.int64), logprob_scores=np.zeros((N, 21), np.float32),
                    logprob_ranks=np.zeros(N, np.int64))
    return dict(ngram_match=(ngram, (3, 5)), hybrid_mtp_ngram=(hybrid, (3, 1, 5)),
                speculate_verify_greedy=(verify, ()), speculate_step_update=(update, ()),
                speculate_get_accept_tokens_and_logits=(gather, ()), speculate_logprobs_topk=(logprobs, ()))


def run_one(op: str, place: str) -> None:
    import paddle
    from fastdeploy_spec import ops
    arrays, attrs = cases()[op]
    target = paddle.CUDAPlace(0) if place == "gpu" else paddle.CPUPlace()
    t = {k: paddle.to_tensor(v, place=target) for k, v in arrays.items()}
    print(f"{op} {place}: calling", file=sys.stderr, flush=True)
    getattr(ops, op)(*t.values(), *attrs)
    digest = hashlib.sha256()
    for k in t:
        digest.update(t[k].numpy().tobytes())
    print(digest.hexdigest())


def main() -> None:
    if len(sys.argv) == 3:
        run_one(sys.argv[1], sys.argv[2])
        return
    for op in cases():
        out = {}
        for place in ("cpu", "gpu"):
            p = subprocess.run([sys.executable, "-X", "faulthandler", __file__, op, place], cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
            out[place] = p.stdout.strip() if p.returncode == 0 else f"rc={p.returncode}"
            if p.returncode != 0:
                lines = [l for l in p.stderr.splitlines() if "File \"/work" in l or "Error" in l]
                print(f"  {op} {place} rc={p.returncode}: " + " | ".join(lines[-3:]))
        same = out["cpu"] == out["gpu"] and not out["cpu"].startswith("rc=")
        print(f"{op:42s} cpu={out['cpu'][:12]} gpu={out['gpu'][:12]} {'GPU==CPU' if same else 'DIFFER'}",
              flush=True)


if __name__ == "__main__":
    main()
