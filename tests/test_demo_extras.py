"""The demo's extras (matplotlib, tqdm) are optional: without them it does all its work, says the plot
was skipped and how to get it, and exits 0."""

from __future__ import annotations

import json
import sys

import pytest


@pytest.mark.parametrize("missing", [("matplotlib",), ("matplotlib", "tqdm")])
def test_demo_without_extras_exits_0(tmp_path, capsys, monkeypatch, missing):
    from examples import demo

    for name in missing:  # a None entry makes "import name" raise ImportError, as if not installed
        monkeypatch.setitem(sys.modules, name, None)
        for sub in [m for m in sys.modules if m.startswith(name + ".")]:
            monkeypatch.setitem(sys.modules, sub, None)
    rc = demo.main(
        [
            "--method",
            "ngram",
            "--requests",
            "3",
            "--slots",
            "2",
            "--max-prompt-tokens",
            "200",
            "--device",
            "cpu",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "output check (ngram): 3/3 requests identical" in out
    assert "plot skipped: matplotlib is not installed" in out and "fastdeploy_spec[demo]" in out
    assert json.loads((tmp_path / "demo.json").read_text())["all_outputs_identical"]
    assert not (tmp_path / "demo.png").exists()


def test_demo_extras_declared():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
        "project"
    ]
    assert project["optional-dependencies"]["demo"] == ["matplotlib", "tqdm"]
    assert "matplotlib" not in project["dependencies"]
