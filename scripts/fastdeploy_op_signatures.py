"""Writes tests/data/fastdeploy_op_signatures.json: the name, inputs, outputs, attributes and in-place
map of every op a FastDeploy checkout registers under custom_ops/gpu_ops (facts read from its
PD_BUILD_OP / PD_BUILD_STATIC_OP registrations; no code of it is kept).

    python scripts/fastdeploy_op_signatures.py /path/to/FastDeploy > tests/data/fastdeploy_op_signatures.json

An op registered twice (a CUDA and a CPU file, or two variants) keeps its first registration in path
order; tests/test_fastdeploy_op_names.py compares our registrations with this list.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# A registration runs from the macro to its statement's `;` (SetInplaceMap may follow SetKernelFn).
_BUILD = re.compile(r"^\s*PD_BUILD(?:_STATIC)?_OP\(\s*(\w+)\s*\)([^;]*);", re.S | re.M)
_LIST = r"\.{}\(\s*\{{(.*?)\}}\s*\)"


def _names(body: str, method: str) -> list[str]:
    m = re.search(_LIST.format(method), body, re.S)
    if not m:
        return []
    # paddle::Optional("x") and paddle::Vec("x") keep their name; comments are dropped first
    text = re.sub(r"//[^\n]*", "", m.group(1))
    return re.findall(r'"([^"]+)"', text)


def signatures(root: Path) -> dict:
    found: dict = {}
    for path in sorted((root / "custom_ops" / "gpu_ops").rglob("*")):
        if path.suffix not in (".cc", ".cu", ".cpp") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for name, body in _BUILD.findall(text):
            if name in found:
                continue
            inplace = re.search(r"\.SetInplaceMap\(\s*\{(.*)\}\s*\)", body, re.S)
            pairs = (
                re.findall(r'\{\s*"(\w+)"\s*,\s*"(\w+)"\s*\}', inplace.group(1)) if inplace else []
            )
            found[name] = {
                "inputs": _names(body, "Inputs"),
                "outputs": _names(body, "Outputs"),
                "attrs": [re.sub(r"\s+", " ", a).strip() for a in _names(body, "Attrs")],
                "inplace": {a: b for a, b in pairs},
                "source": str(path.relative_to(root)),
            }
    return found


if __name__ == "__main__":
    sigs = signatures(Path(sys.argv[1]))
    json.dump(
        {"fastdeploy": "PaddlePaddle/FastDeploy develop (2026-05-20)", "ops": sigs},
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    sys.stdout.write("\n")
