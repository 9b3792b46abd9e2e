"""The package's numpydoc examples run (``pytest --doctest-modules fastdeploy_spec``, also part of
scripts/run_tests.sh) and touch no shared queue: the message-queue examples use private queues that
they remove, so the queue named by INFERENCE_MSG_QUEUE_ID is never created."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fastdeploy_spec import transport
from fastdeploy_spec.transport import child_env, free_queue_id, release_queue_id

ROOT = Path(__file__).resolve().parents[1]


def test_examples_run_and_leave_no_queue():
    shared = free_queue_id()  # stands for a FastDeploy server's queue on this host
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--doctest-modules",
                "fastdeploy_spec",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            env=child_env(INFERENCE_MSG_QUEUE_ID=str(shared)),
        )
        summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
        assert " passed" in summary and "failed" not in summary and "skipped" not in summary, (
            summary
        )
        assert transport.queue_stats(shared) is None, (
            "an example used INFERENCE_MSG_QUEUE_ID's queue"
        )
    finally:
        transport.remove_queue(shared)
        release_queue_id(shared)
