"""The suffix cache's ordering rules between launches, checked without a GPU.

The rules (O1-O4) and the table of the launch sequence are written once, in
``docs/design/suffix_cache.md`` ("Ordering between launches"). This module reads that table and
checks (1) that the table obeys the rules: every read before a wait is of a grid that had ended
before the reader could launch, or of the step's inputs after a primary that does not write them;
(2) that the sources match the table: the query's launch order in ``suffix_cache.cu``, and in every
kernel an ``allow_dependent_launch()`` only right after a ``wait_for_primary_grid()`` except where
the table says a kernel allows first, and no kernel returning before its first wait (O1 as far as
the text shows it); (3) that every ``volatile`` and every read before a wait in the cache's kernels
names its rule. A race these rules prevent shows on a GPU only as an occasional
mismatch (the harness's programmatic-launch cases); breaking a rule here fails at once.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design" / "suffix_cache.md"
KERNELS = ROOT / "custom_ops" / "suffix_cache"
LOCAL_SEARCH = ROOT / "custom_ops" / "suffix_match" / "suffix_match.cu"

# The table's kernel names as the launcher spells them.
LAUNCHED_AS = {
    "suffix_search_gpu": "local search",
    "query_prep_kernel": "prep",
    "query_scan_kernel": "scan",
    "query_prep2_kernel": "prep2",
    "query_search_kernel": "search",
    "suffix_walk_gpu": "walk",
}


def ordering_table() -> list[dict[str, str]]:
    text = DESIGN.read_text()
    section = text[text.index("## Ordering between launches") :]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    table = []
    for line in rows[1:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        table.append(dict(zip(header, cells)))
    return table


def ended_before_launch(table: list[dict[str, str]], k: str) -> set[str]:
    """The kernels whose grids have ended whenever kernel k starts.

    A kernel starts only after its primary has started; a primary that waits before it allows (O2)
    has seen its own primary end; an ended grid's primary has ended (O1).
    """
    by_name = {row["kernel"]: row for row in table}
    ended: set[str] = set()
    a = by_name[k]["primary"]
    while a in by_name:
        if by_name[a]["waits before allowing"] == "yes":
            e = by_name[a]["primary"]
            while e in by_name:
                ended.add(e)
                e = by_name[e]["primary"]
        a = by_name[a]["primary"]
    return ended


def rule_violations(table: list[dict[str, str]]) -> list[str]:
    """Every read before a wait that O3 does not allow."""
    kernels = {row["kernel"] for row in table}
    found = []
    for row in table:
        k = row["kernel"]
        if row["read before its wait"] == "nothing":
            continue
        for w in (w.strip() for w in row["written by"].split(",")):
            if w == "inputs":  # O3a: only after a kernel of the sequence (none writes the inputs)
                if row["primary"] not in kernels:
                    found.append(f"{k} reads the inputs before waiting for unknown work")
            elif w not in ended_before_launch(table, k):  # O3b
                found.append(f"{k} reads {w}'s output before its wait")
    return found


def test_the_table_obeys_the_rules() -> None:
    table = ordering_table()
    order = [row["kernel"] for row in table]
    assert order[0] == "insert" and order[-1] == "walk"
    for i, row in enumerate(table[1:], start=1):
        assert row["primary"] == order[i - 1], f"{row['kernel']}: the kernel launched before it"
    assert rule_violations(table) == []
    # Exactly the first scan lets its dependent launch before it waits (O2's exception).
    assert [r["kernel"] for r in table if r["waits before allowing"] == "no"] == ["scan 1"]


def test_the_rules_catch_a_broken_table() -> None:
    """The checker itself refuses an early read the rules forbid."""
    table = ordering_table()
    prep2 = next(r for r in table if r["kernel"] == "prep2")
    prep2["written by"] = "prep, scan 1"  # the first scan's histogram before prep2's wait
    assert rule_violations(table) == ["prep2 reads scan 1's output before its wait"]
    table = ordering_table()
    next(r for r in table if r["kernel"] == "local search")["waits before allowing"] = "no"
    assert "scan 1 reads prep's output before its wait" in rule_violations(table)


def _function_body(text: str, name: str) -> str:
    at = re.search(r"\b" + re.escape(name) + r"\s*\(", text)
    assert at is not None, name
    start = text.index("{", at.end())
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start : i + 1]
    raise AssertionError(name)


def test_the_launch_order_is_the_tables() -> None:
    body = _function_body((KERNELS / "suffix_cache.cu").read_text(), "launch_query")
    calls = re.findall(
        r"(?:launch\(|launch_dependent_smem\(|\b)("
        + "|".join(LAUNCHED_AS)
        + r")(?:<[^>]*>)?(?:\s*<<<|\s*\(|,)",
        body,
    )
    launched = []
    for name in calls:
        kernel = LAUNCHED_AS[name]
        if not launched or launched[-1] != kernel:
            launched.append(kernel)
    # With B > SMs the local search goes first; beside it, it follows prep. Then each scan is
    # launched on one of two branches (dependent or ordinary), named once here.
    assert launched[0] == "local search"
    expected = [r["kernel"].replace(" 1", "").replace(" 2", "") for r in ordering_table()[1:]]
    assert launched[1:] == expected


def _kernel_sources() -> dict[str, str]:
    files = sorted(KERNELS.glob("suffix_cache_*.cuh")) + [KERNELS / "suffix_cache.cu"]
    return {p.name: p.read_text() for p in files}


def test_every_allow_follows_a_wait_but_the_first_scans() -> None:
    exceptions = []
    for name, text in _kernel_sources().items():
        code = [ln for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("//")]
        for i, line in enumerate(code):
            if "allow_dependent_launch();" not in line:
                continue
            if "ordering rule O2's exception" in line:
                exceptions.append(name)
                continue
            assert "wait_for_primary_grid();" in code[i - 1], f"{name}: {line.strip()}"
    assert exceptions == ["suffix_cache_scan.cuh"]
    # The local search (suffix_match.cu's search kernel) waits before it allows too.
    text = LOCAL_SEARCH.read_text()
    lines = [
        ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("//")
    ]
    allows = [i for i, ln in enumerate(lines) if ln.startswith("allow_dependent_launch();")]
    assert allows and all(lines[i - 1].startswith("wait_for_primary_grid();") for i in allows)


def test_every_volatile_and_early_read_names_its_rule() -> None:
    for name, text in _kernel_sources().items():
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if "volatile" in line and not line.strip().startswith("//"):
                near = "\n".join(lines[max(0, i - 8) : i + 1])
                assert "ordering rule O4" in near, f"{name}:{i + 1}: a volatile without its rule"
    # The kernels that read before their wait (the table's rows) say so where they do.
    wanted = {
        "suffix_cache_prep.cuh": "O3a",
        "suffix_cache_scan.cuh": "O3",
        "suffix_cache_prep2.cuh": "O3b",
        "suffix_cache_search.cuh": "O3b",
    }
    sources = _kernel_sources()
    for name, rule in wanted.items():
        assert re.search(r"ordering rules? [^.\n]*" + rule, sources[name]), f"{name}: {rule}"


def test_no_kernel_returns_before_its_wait() -> None:
    """O1 where text can show it: in every kernel of the sequence, and in the device functions that
    wait for them, no ``return`` comes before the first ``wait_for_primary_grid()``."""
    waiting = []
    for name, text in _kernel_sources().items():
        pattern = (
            r"__global__ void (?:__launch_bounds__\([^)]*\)\s*)?(\w+)\(|__device__ \w+ (\w+)\("
        )
        for m in re.finditer(pattern, text):
            fn = m.group(1) or m.group(2)
            body = _function_body(text[m.start() :], fn)
            if fn in ("finish_kernel", "evict_kernel") or "wait_for_primary_grid();" not in body:
                continue  # ordinary launches; helpers that do not wait
            code = "\n".join(ln.split("//")[0] for ln in body.splitlines())
            first_wait = code.index("wait_for_primary_grid();")
            first_return = code.find("return")
            assert first_return < 0 or first_return > first_wait, f"{name}: {fn} returns first"
            waiting.append(fn)
    assert set(waiting) >= {
        "insert_kernel",
        "query_prep_kernel",
        "filter_lines",
        "query_scan_kernel",
        "query_prep2_kernel",
        "global_search_slot",
    }
