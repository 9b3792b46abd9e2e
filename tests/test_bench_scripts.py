"""The benchmark entry point runs every routine on the CPU (``python -m benchmarks --routine R
--dry-run``): inputs, argument order, the reference check, the JSON file and the table, and the
printed repro command. The n-gram routines' planted n-grams are found where each row says."""

from __future__ import annotations

import importlib.util
import json

import pytest

from benchmarks.__main__ import ROUTINES
from benchmarks.__main__ import main as bench_main

HAVE_MPL = importlib.util.find_spec("matplotlib") is not None


# Drafts per slot when the planted n-gram is found: K for ngram_match; K + 1 - ori for hybrid_mtp_ngram.
@pytest.mark.parametrize("name,drafts_per_slot", [("ngram", 5), ("hybrid", 4)])
def test_ngram_dry_run(name, drafts_per_slot, tmp_path, capsys):
    from benchmarks import common

    assert bench_main(["--routine", name, "--dry-run", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / f"bench_{name}.json").read_text())
    rows = saved["rows"]
    assert [(r["B"], r["hit"]) for r in rows] == [
        (B, hit) for B in (1, 4) for hit in ("early", "late", "none")
    ]
    for r in rows:
        assert r["drafted_tokens"] == (0 if r["hit"] == "none" else r["B"] * drafts_per_slot), r
        assert r["cpu_op_us"] > 0
    assert "gpu_cold_us" in saved["meta"]["gpu_time"]
    assert (
        saved["meta"]["repro"]
        == common.REPRO
        == f"python -m benchmarks --routine {name} --dry-run --out {tmp_path}"
    )
    if HAVE_MPL:  # the plot is optional (the `bench` extra)
        assert (tmp_path / f"bench_{name}.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "| B | W | hit | CPU op us |" in out and out.count("repro: python -m benchmarks") == 2


# The other routines: name -> the JSON file they write and the key of its reference check.
OTHERS = {
    "suffix": ("bench_suffix.json", "bit_identical"),
    "suffix_cache": ("bench_suffix_cache.json", "identical"),
    "mtp": ("bench_mtp.json", "identical"),
    "logprobs": ("bench_logprobs.json", "check_ok"),
    "msgqueue": ("bench_msgqueue.json", None),  # the receiver checks the last message's content
    "acceptance": (
        "bench_drafters.json",
        None,
    ),  # the runner checks every output against the oracle
    "goodput": ("goodput.json", None),  # a model over the cost table: nothing to check against
}


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_routine_dry_run(name, tmp_path, capsys):
    assert bench_main(["--routine", name, "--dry-run", "--out", str(tmp_path)]) == 0
    file, check = OTHERS[name]
    saved = json.loads((tmp_path / file).read_text())
    if check is not None:
        assert saved["rows"] and all(r[check] for r in saved["rows"])
    assert "repro: python -m benchmarks --routine" in capsys.readouterr().out


def test_every_routine_listed(capsys):
    assert set(ROUTINES) == {"ngram", "hybrid"} | set(OTHERS)
    assert bench_main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ROUTINES)
