"""Speculative-decoding configuration: the method and its knobs (SPEC §5)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SpecMethod(str, enum.Enum):
    """How draft tokens are proposed. ``"ngram_match"`` is accepted as an alias of ``NGRAM``."""

    NAIVE = "naive"
    NGRAM = "ngram"
    MTP = "mtp"
    SUFFIX = "suffix"

    @classmethod
    def parse(cls, value: "SpecMethod | str | None") -> "SpecMethod":
        if value is None:
            return cls.NAIVE
        if isinstance(value, cls):
            return value
        name = str(value).lower()
        if name == "ngram_match":
            return cls.NGRAM
        try:
            return cls(name)
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown speculative method {value!r}; expected one of {choices} "
                             f"(or 'ngram_match')") from None


MTP_STRATEGIES = ("default", "with_ngram")


@dataclass(frozen=True)
class SpeculativeConfig:
    """Typed speculative config, with upstream field names and defaults.

    Parameters
    ----------
    method : SpecMethod or str
        ``naive`` (no drafts), ``ngram`` or ``mtp``.
    num_speculative_tokens : int
        K, the most drafts per slot and step; the draft buffers have K + 1 columns.
    max_ngram_size, min_ngram_size : int
        Largest and smallest n-gram tried by the matchers (``min`` is used by ``hybrid_mtp_ngram``).
    num_model_steps : int
        Greedy steps of the MTP draft model per decode step.
    mtp_strategy : str
        ``"default"`` or ``"with_ngram"`` (extend MTP drafts with n-gram matches up to K).
    ngram_threshold, hybrid_threshold : int or None
        Batch token budgets of ``ngram_match`` / ``hybrid_mtp_ngram``; None reads the environment
        (``INFER_WITH_REFERENCE_TOKENUM_THRESHOLD``, ``SPEC_TOKENUM_THRESHOLD``) on every call.
        ``suffix_match`` applies ``ngram_threshold``, as ``ngram_match`` does.
    suffix_decoding_max_tree_depth : int
        Suffix decoding (``method="suffix"``): context length and deepest string counted, 1 .. 256.
    suffix_decoding_max_spec_factor, suffix_decoding_max_spec_offset : float
        A draft after a match of length L has at most ``L * factor + offset`` tokens.
    suffix_decoding_min_token_prob : float
        A token is drafted only while its estimated probability is at least this.
    """

    method: SpecMethod | str = SpecMethod.NGRAM
    num_speculative_tokens: int = 5
    max_ngram_size: int = 5
    min_ngram_size: int = 2
    num_model_steps: int = 1
    mtp_strategy: str = "default"
    ngram_threshold: int | None = None
    hybrid_threshold: int | None = None
    suffix_decoding_max_tree_depth: int = 64
    suffix_decoding_max_spec_factor: float = 1.0
    suffix_decoding_max_spec_offset: float = 0.0
    suffix_decoding_min_token_prob: float = 0.1

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", SpecMethod.parse(self.method))
        if self.num_speculative_tokens < 0:
            raise ValueError(f"num_speculative_tokens must be >= 0, got {self.num_speculative_tokens}")
        if not 1 <= self.min_ngram_size <= self.max_ngram_size:
            raise ValueError(f"need 1 <= min_ngram_size <= max_ngram_size, got "
                             f"{self.min_ngram_size} and {self.max_ngram_size}")
        if self.num_model_steps < 1:
            raise ValueError(f"num_model_steps must be >= 1, got {self.num_model_steps}")
        if not 1 <= self.suffix_decoding_max_tree_depth <= 256:
            raise ValueError(f"suffix_decoding_max_tree_depth must be in [1, 256], got "
                             f"{self.suffix_decoding_max_tree_depth}")
        if self.mtp_strategy not in MTP_STRATEGIES:
            raise ValueError(f"mtp_strategy must be one of {MTP_STRATEGIES}, got {self.mtp_strategy!r}")

    @property
    def draft_width(self) -> int:
        """K + 1: columns of ``draft_tokens`` and ``accept_tokens``."""
        return self.num_speculative_tokens + 1
