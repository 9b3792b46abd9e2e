"""Per-source-line totals of an Nsight Compute source view, for kernels whose SASS carries line info.

ncu's CSV source page lists one row per SASS instruction with its executed count and stall samples,
but not the CUDA line it came from. This joins it, instruction by instruction, with nvdisasm's
listing of the same code (built with -lineinfo), and prints the lines (or named ranges of lines) that
execute the most instructions and hold the most stall samples, with each one's main stall reasons
(ncu's stall_* columns: no_inst is instruction fetch, long_sb a global load's wait, barrier a
__syncthreads, wait a fixed-latency dependency), after the kernel's samples by reason.

On the GPU machine (the kernel launch to profile picked with -k / --launch-skip):

    ncu -k regex:query_scan_kernel --launch-skip 2 --launch-count 1 --section SourceCounters \
        --import-source yes -o scan BINARY ARGS
    ncu -i scan.ncu-rep --page source --csv --print-source sass > scan.csv

Here (nvdisasm: the CUDA toolkit's, or the copy in Triton's wheel):

    nvcc ... -lineinfo -cubin custom_ops/suffix_cache/suffix_cache.cu -o sc.cubin
    nvdisasm -g -c sc.cubin > sc.sass
    python scripts/dev/ncu_source_lines.py scan.csv sc.sass query_scan_kernel [--top 30]
        [--range NAME:FILE:FIRST:LAST ...]

The cubin must be the profiled code (same source and flags): the script checks the opcodes match.
"""
import argparse
import collections
import csv
import gzip
import re
import sys


def read_listing(path, kernel):
    """(file, line, inlined-at file, line) of every instruction of `kernel`, in address order."""
    out, inside, where = [], False, ("?", 0, "", 0)
    with open(path) as f:
        for text in f:
            if re.search(r"\.text\._Z\S*" + kernel, text):
                inside = True
                continue
            if inside and re.search(r"\.text\._Z", text):
                break
            if not inside:
                continue
            m = re.search(r'//## File "([^"]*)", line (\d+)(?:.*inlined at "([^"]*)", line (\d+))?', text)
            if m:
                where = (m.group(1).split("/")[-1], int(m.group(2)), (m.group(3) or "").split("/")[-1],
                         int(m.group(4) or 0))
                continue
            m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", text)
            if m:
                out.append((where, m.group(1)))
    return out


def opcode(sass):
    words = sass.split()
    words = words[1:] if words and words[0].startswith("@") else words
    return words[0].split(".")[0] if words else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="ncu --page source --csv --print-source sass (may be gzipped)")
    ap.add_argument("listing", help="nvdisasm -g -c of the same cubin")
    ap.add_argument("kernel", help="a regular expression matching the kernel's mangled name")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--range", action="append", default=[], metavar="NAME:FILE:FIRST:LAST",
                    help="sum the lines FIRST..LAST of FILE (or inlined from them) under NAME")
    args = ap.parse_args()
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "rt") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    cols, data = rows[head], rows[head + 1:]
    n_exec, n_stall = cols.index("Instructions Executed"), cols.index("Warp Stall Sampling (All Samples)")
    listing = read_listing(args.listing, args.kernel)
    if len(listing) != len(data):
        sys.exit(f"{len(data)} profiled instructions, {len(listing)} in the listing: not the same code")
    bad = sum(opcode(r[1]) != opcode(ins) for r, (_, ins) in zip(data, listing))
    if bad:
        sys.exit(f"{bad} opcodes differ between the profile and the listing: not the same code")
    ranges = []
    for spec in args.range:
        name, fname, lo, hi = spec.rsplit(":", 3)
        ranges.append((name, fname, int(lo), int(hi)))
    reasons = [(i, n[len("stall_"):]) for i, n in enumerate(cols) if n.startswith("stall_") and "Not Issued" not in n]
    executed, stalls = collections.Counter(), collections.Counter()
    by_reason = collections.defaultdict(collections.Counter)
    for r, ((fname, line, ifname, iline), _) in zip(data, listing):
        key = f"{fname}:{line}" + (f" (inlined at {ifname}:{iline})" if ifname else "")
        for name, rf, lo, hi in ranges:
            if (fname == rf and lo <= line <= hi) or (ifname == rf and lo <= iline <= hi):
                key = name
                break
        executed[key] += int(r[n_exec] or 0)
        stalls[key] += int(r[n_stall] or 0)
        for i, name in reasons:
            by_reason[key][name] += int(r[i] or 0)
    total, samples = sum(executed.values()), max(sum(stalls.values()), 1)
    print(f"{total} warp instructions executed, {samples} stall samples")
    kernel_reasons = sum(by_reason.values(), collections.Counter())
    print("  " + ", ".join(f"{name} {100 * n / samples:.1f}%" for name, n in kernel_reasons.most_common() if n))
    print(f"{'instructions':>14} {'':>6} {'stalls':>7}  where  (main reasons)")
    for key, _ in sorted(executed.items(), key=lambda kv: -(stalls[kv[0]] / samples + kv[1] / total))[: args.top]:
        main_reasons = ", ".join(f"{name} {n}" for name, n in by_reason[key].most_common(3) if n)
        print(f"{executed[key]:14d} {100 * executed[key] / total:5.1f}% {100 * stalls[key] / samples:6.1f}%  {key}"
              f"  ({main_reasons})")


if __name__ == "__main__":
    main()
