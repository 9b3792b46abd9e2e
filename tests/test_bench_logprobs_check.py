"""The NumPy check of benchmarks/logprobs.py (``check_outputs``), on the CPU: it passes the ops' own
output and names each kind of corruption."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import bf16_bits

_spec = importlib.util.spec_from_file_location(
    "bench_logprobs", Path(__file__).resolve().parent.parent / "benchmarks" / "logprobs.py"
)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

BATCH, V, K = 7, 300, bench.TOP_K


def run_ops(dtype: str):
    """One bench step run through both ops on the CPU; returns (step, logits values, outputs)."""
    return bench.cpu_step(np.random.default_rng(7), V, BATCH, dtype)


def valid_rows(step) -> int:
    return int(step["accept"].sum())


def corrupt_ids(o, v):
    o["ids"][3, 1:3] = o["ids"][3, 2:0:-1].copy()  # two top-k ids swapped


def corrupt_token(o, v):
    o["ids"][v - 1, 0] += 1


def corrupt_rank(o, v):
    o["ranks"][0] += 1


def corrupt_score(o, v):
    o["scores"][1, 5] += 1e-3


def corrupt_padding(o, v):
    o["scores"][v, 0] = -1.0


def corrupt_offsets(o, v):
    o["cu"][2] += 1


def corrupt_gathered_row(o, v):
    o["gathered"][2, 7] = np.nextafter(o["gathered"][2, 7], np.float32(np.inf))


CORRUPTIONS = [
    (corrupt_ids, "logprob ids"),
    (corrupt_token, "logprob ids"),
    (corrupt_rank, "ranks"),
    (corrupt_score, "logprobs"),
    (corrupt_padding, "padding rows"),
    (corrupt_offsets, "offsets"),
    (corrupt_gathered_row, "gathered logits rows"),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ops_output_passes(dtype):
    step, logits, out = run_ops(dtype)
    assert valid_rows(step) < len(out["token_ids"])  # padding rows exist and are checked
    assert bench.check_outputs(step, logits, K, **out) == []


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("corrupt,what", CORRUPTIONS, ids=[c.__name__ for c, _ in CORRUPTIONS])
def test_corruption_is_named(dtype, corrupt, what):
    step, logits, out = run_ops(dtype)
    corrupt(out, valid_rows(step))
    problems = bench.check_outputs(step, logits, K, **out)
    assert len(problems) == 1 and problems[0].startswith(what), problems


def test_bf16_round_is_round_to_nearest_even():
    x = (np.random.default_rng(1).standard_normal(10000) * 3).astype(np.float32)
    rounded = bench.bf16_round(x)
    np.testing.assert_array_equal(rounded.view(np.uint32) >> 16, bf16_bits(x))
    assert not (rounded.view(np.uint32) & 0xFFFF).any()
    bits = bf16_bits(x)
    np.testing.assert_array_equal(bench.host_values(bits), rounded)
