"""Argument helpers shared by the op wrappers."""

from __future__ import annotations

# Negative threshold attribute: "not given", the binding reads the environment variable on every call.
THRESHOLD_FROM_ENV = -1


def threshold_attr(threshold: int | None) -> int:
    """Maps the keyword ``threshold`` to the op attribute (None: the environment, then the default)."""
    if threshold is None:
        return THRESHOLD_FROM_ENV
    threshold = int(threshold)
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    return threshold
