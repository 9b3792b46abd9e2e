"""Launch planning on every supported GPU, without a GPU (issue 48).

``tests/cuda/launch_plan_check.cu`` links the launchers' own planning functions (the suffix searches'
forms, the suffix cache's scan and batch limit, the n-gram search's shape rule) and the feature and
cap decisions of ``custom_ops/common/launch_plan.h``, and checks them for an H100 and for an H100
capped as an A100, an L20 / RTX 4090 and an A10 (``FDSPEC_DEVICE_CAP``): every dynamic shared-memory
request fits the device or takes its small form, and no kernel image below sm_90 is launched with
clusters or as a programmatic dependent. Compiled with nvcc (device code as PTX only; nothing runs on
a GPU); skipped where nvcc is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "build" / "launch_plan_check"
SOURCES = [
    "tests/cuda/launch_plan_check.cu",
    "custom_ops/suffix_match/suffix_match.cu",
    "custom_ops/suffix_cache/suffix_cache.cu",
]


def _nvcc() -> str | None:
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    found = shutil.which("nvcc") or (
        f"{home}/bin/nvcc" if Path(f"{home}/bin/nvcc").exists() else None
    )
    return found


def _stale() -> bool:
    if not BIN.exists():
        return True
    built = BIN.stat().st_mtime
    deps = [ROOT / s for s in SOURCES] + [
        p for p in (ROOT / "custom_ops").rglob("*") if p.suffix in (".h", ".cuh", ".cu")
    ]
    return any(p.stat().st_mtime > built for p in deps)


@pytest.fixture(scope="module")
def plan_check() -> Path:
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (CUDA_HOME)")
    if _stale():
        home = str(Path(nvcc).resolve().parent.parent)
        BIN.parent.mkdir(parents=True, exist_ok=True)
        tmp = BIN.with_suffix(".tmp")
        cmd = [
            nvcc,
            "-std=c++17",
            "-O1",
            "-DFDSPEC_WITH_CUDA",
            f"-I{ROOT / 'custom_ops'}",
            f"-I{home}/include/cccl",
            "-gencode=arch=compute_80,code=compute_80",
            *[str(ROOT / s) for s in SOURCES],
            "-o",
            str(tmp),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
        tmp.replace(BIN)
    return BIN


def test_every_launch_plan_fits_its_device(plan_check: Path) -> None:
    result = subprocess.run([str(plan_check)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "launch_plan_check: PASS" in result.stdout
    lines = result.stdout.splitlines()
    # The figures the contract quotes (docs/contract/general.md, "Supported GPUs").
    l20 = [line for line in lines if line.startswith("ok   L20 cap (8.9)")]
    assert any("suffix_match search holds 1024 candidates" in line for line in l20)
    assert any("suffix_cache search holds 1024 candidates" in line for line in l20)
    assert any("ring (131072 B) in 0 of 60 shapes" in line for line in l20)
    assert any("scan fits every batch up to 1474" in line for line in l20)
    a100 = [line for line in lines if line.startswith("ok   A100 cap (8.0)")]
    assert any("suffix_match search holds 2048 candidates" in line for line in a100)
    assert any("up to 2048 (the op's limit)" in line for line in a100)
