"""One entry point for the benchmarks: ``python -m benchmarks --routine NAME [options]``.

    python -m benchmarks --list                          # the routines and what each times
    python -m benchmarks --routine ngram --dry-run       # any routine: a tiny CPU-only run, no GPU
    python -m benchmarks --routine ngram --quick         # the GPU run (writes results/bench_ngram/)
    python -m benchmarks --routine suffix_cache --help   # a routine's own options

GPU routines time the op's own device time with one timer (benchmarks/gpu_timer.py): CUDA events
around replays of a captured graph of back-to-back calls, warm (inputs stay in L2) and cold (a copy
larger than L2 before each call, timed alone and subtracted). Every routine checks its outputs
against a reference, writes JSON (and a plot when matplotlib is installed) into ``--out``, prints a
table and, first and last, the command that reproduces the run. The Paddle-free kernel benchmarks
are in benchmarks/kernels/ (``bash benchmarks/kernels/build.sh``).
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
import zlib  # noqa: F401  (before paddle: Paddle 2.6 crashes in zlib otherwise)

# routine -> (module, what it times, whether it needs a GPU for its real run)
ROUTINES = {
    "ngram": (
        "ngram",
        "ngram_match: device time warm/cold vs the CPU path (GPU == CPU checked)",
        True,
    ),
    "hybrid": ("hybrid", "hybrid_mtp_ngram: device time warm/cold vs the CPU path", True),
    "suffix": ("suffix", "suffix_match: device time per step warm/cold vs the host path", True),
    "suffix_cache": (
        "suffix_cache",
        "suffix_cache_step with 1k-100k cached responses; --soak",
        True,
    ),
    "mtp": ("mtp", "the MTP proposer's step (draft-model ops) vs its host path", True),
    "logprobs": (
        "logprobs",
        "accepted-row gather and fused top-k logprobs vs copy and PyTorch",
        True,
    ),
    "msgqueue": ("msgqueue", "logprob messages per second between two processes (no GPU)", False),
    "acceptance": (
        "acceptance",
        "acceptance replays: naive, ngram, suffix on real text (no GPU)",
        False,
    ),
    "goodput": (
        "goodput",
        "draft-length policies' tokens/s from the cost table and acceptance replays (no GPU)",
        False,
    ),
}


# What --dry-run means for the routines that do not parse it themselves (ngram, hybrid, logprobs do).
DRY_RUN_ARGS = {
    "suffix": ["--quick"],
    "suffix_cache": ["--quick"],
    "mtp": ["--quick", "--vocab", "512"],
    "msgqueue": ["--quick", "--messages", "50", "--repeats", "1", "--no-raise"],
    "acceptance": [
        "--max-per-category",
        "2",
        "--edit-requests",
        "2",
        "--slots",
        "2",
        "--ks",
        "5",
        "--no-warm",
        "--datasets",
        "edit",
    ],
    "goodput": ["--quick", "--concurrency", "1", "64", "--drafters", "ngram"],
}


def repro_command(routine: str, argv: list[str]) -> str:
    return " ".join(["python -m benchmarks --routine", routine] + [shlex.quote(a) for a in argv])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks", add_help=False, description=__doc__.splitlines()[0]
    )
    ap.add_argument("--routine", "-R", choices=sorted(ROUTINES))
    ap.add_argument("--list", action="store_true", help="list the routines")
    args, rest = ap.parse_known_args(argv)
    if args.list or args.routine is None:
        if args.routine is None and not args.list and not {"-h", "--help"} & set(rest):
            ap.print_usage(sys.stderr)
        print(__doc__)
        for name, (_, what, gpu) in ROUTINES.items():
            print(f"  {name:13s} {'GPU' if gpu else 'CPU'}  {what}")
        return 0 if args.list or {"-h", "--help"} & set(rest) else 2
    module = importlib.import_module(f"benchmarks.{ROUTINES[args.routine][0]}")
    from benchmarks import common

    common.REPRO = repro_command(args.routine, rest)
    if "--dry-run" in rest and args.routine in DRY_RUN_ARGS:
        # A routine without a --dry-run of its own: on the CPU (GPU routines) or on tiny inputs.
        rest = [a for a in rest if a != "--dry-run"] + DRY_RUN_ARGS[args.routine]
        if ROUTINES[args.routine][2]:
            common.enable_dry_run(module)
    print(f"repro: {common.REPRO}", flush=True)
    rc = module.main(rest)
    print(f"\nrepro: {common.REPRO}", flush=True)
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
