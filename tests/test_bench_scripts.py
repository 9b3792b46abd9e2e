"""The n-gram benchmark scripts run on the CPU (``--dry-run``): their inputs plant the n-gram where
each row says, the op gets its arguments in order, and the result files are written."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Drafts per slot when the planted n-gram is found: K for ngram_match; K + 1 - ori for hybrid_mtp_ngram.
@pytest.mark.parametrize("name,drafts_per_slot", [("bench_ngram", 5), ("bench_hybrid", 4)])
def test_dry_run(name, drafts_per_slot, tmp_path, capsys):
    bench = load_script(name)
    rows = bench.main(["--dry-run", "--out", str(tmp_path)])
    assert [(r["B"], r["hit"]) for r in rows] == [(B, hit) for B in (1, 4) for hit in ("early", "late", "none")]
    for r in rows:
        assert r["drafted_tokens"] == (0 if r["hit"] == "none" else r["B"] * drafts_per_slot), r
        assert r["cpu_op_us"] > 0
    saved = json.loads((tmp_path / f"{name}.json").read_text())
    assert saved["rows"] == rows and "gpu_cold_us" in saved["meta"]["gpu_time"]
    assert (tmp_path / f"{name}.png").stat().st_size > 0
    assert "| B | W | hit | CPU op us |" in capsys.readouterr().out
