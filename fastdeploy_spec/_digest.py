"""The digest of the C++/CUDA sources: written into the build by ``setup_ops.py``, compared by the
loader to refuse a library older than its sources. Imports nothing of the package."""

from __future__ import annotations

import hashlib
from pathlib import Path


def source_digest(root: Path) -> str:
    """SHA-256 over every file under ``root``: its path relative to ``root``, then its bytes."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()
