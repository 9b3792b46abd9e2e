"""The metrics of one profiled kernel from `ncu --csv --page raw`, largest first.

    python scripts/dev/ncu_raw_top.py RAW.csv [--strip TEXT ...] [--top N]

ncu prints a header row of metric names, a row of units, then a row per profiled launch; lines of
its own (==PROF==, the program's output) come before them. Only the metrics (the columns with a
unit) of the first launch are listed; --strip removes a common prefix or suffix from their names.
"""
import argparse
import csv
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--strip", action="append", default=[])
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    with open(args.csv) as f:
        rows = [r for r in csv.reader(f) if r]
    head = next((i for i, r in enumerate(rows) if r[0] == "ID"), None)
    if head is None or len(rows) < head + 3:
        sys.exit(f"no ncu raw table in {args.csv}: " + " | ".join(",".join(r) for r in rows[-3:]))
    names, units, values = rows[head], rows[head + 1], rows[head + 2]
    found = []
    for name, unit, value in zip(names, units, values):
        if not unit:  # the launch's own columns (ID, kernel name, grid, ...) have no unit
            continue
        try:
            number = float(value.replace(",", ""))
        except ValueError:
            continue
        for text in args.strip:
            name = name.replace(text, "")
        found.append((number, name))
    total = sum(n for n, _ in found) or 1.0
    for number, name in sorted(found, reverse=True)[: args.top]:
        print(f"  {number:10.3f}  {100 * number / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
