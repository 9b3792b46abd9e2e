"""Speculative-decoding configuration: the method and its knobs (docs/contract/runner.md)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Optional


class SpecMethod(str, enum.Enum):
    """How draft tokens are proposed. ``"ngram_match"`` is accepted as an alias of ``NGRAM``."""

    NAIVE = "naive"
    NGRAM = "ngram"
    MTP = "mtp"
    SUFFIX = "suffix"

    @classmethod
    def parse(cls, value: SpecMethod | str | None) -> SpecMethod:
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
            raise ValueError(
                f"unknown speculative method {value!r}; expected one of {choices} "
                f"(or 'ngram_match')"
            ) from None


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
    suffix_decoding_max_cached_requests : int
        The global cache (FastDeploy's key and default): responses of this many requests are kept
        and drafted from across requests (first in, first out); 0 disables it; -1 keeps as many as
        ``suffix_decoding_max_cached_tokens`` positions hold.
    suffix_decoding_max_cached_tokens : int
        With ``max_cached_requests = -1``: the cache's size in token positions.
    suffix_decoding_cached_response_len : int
        The most tokens of one response the cache keeps (its row width), 1 .. 65536. Memory: 20 bytes
        per position, ``max_cached_requests * cached_response_len * 20`` bytes (the token and its key,
        12, and the line filter, 8), plus 5 MiB of token and token-pair counts (one-token keys) and
        the query scratch (``SuffixCache``).
    suffix_decoding_global_min_match : int
        The shortest match length searched in the global cache (1 .. 8; the index keys this many tokens).
    suffix_decoding_global_max_occurrences : int
        A global match length whose suffix occurs more than this many times (32 .. 1024) is skipped.
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
    suffix_decoding_max_cached_requests: int = 10000
    suffix_decoding_max_cached_tokens: int = 1 << 22
    suffix_decoding_cached_response_len: int = 512
    suffix_decoding_global_min_match: int = 1
    suffix_decoding_global_max_occurrences: int = 1024

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", SpecMethod.parse(self.method))
        if self.num_speculative_tokens < 0:
            raise ValueError(
                f"num_speculative_tokens must be >= 0, got {self.num_speculative_tokens}"
            )
        if not 1 <= self.min_ngram_size <= self.max_ngram_size:
            raise ValueError(
                f"need 1 <= min_ngram_size <= max_ngram_size, got "
                f"{self.min_ngram_size} and {self.max_ngram_size}"
            )
        if self.num_model_steps < 1:
            raise ValueError(f"num_model_steps must be >= 1, got {self.num_model_steps}")
        if not 1 <= self.suffix_decoding_max_tree_depth <= 256:
            raise ValueError(
                f"suffix_decoding_max_tree_depth must be in [1, 256], got "
                f"{self.suffix_decoding_max_tree_depth}"
            )
        if self.suffix_decoding_max_cached_requests < -1:
            raise ValueError(
                f"suffix_decoding_max_cached_requests must be -1, 0 or positive, got "
                f"{self.suffix_decoding_max_cached_requests}"
            )
        if not 1 <= self.suffix_decoding_cached_response_len <= 1 << 16:
            raise ValueError(
                f"suffix_decoding_cached_response_len must be in [1, 65536], got "
                f"{self.suffix_decoding_cached_response_len}"
            )
        if not 1 <= self.suffix_decoding_global_min_match <= 8:
            raise ValueError(
                f"suffix_decoding_global_min_match must be in [1, 8], got "
                f"{self.suffix_decoding_global_min_match}"
            )
        if not 32 <= self.suffix_decoding_global_max_occurrences <= 1024:
            raise ValueError(
                f"suffix_decoding_global_max_occurrences must be in [32, 1024], got "
                f"{self.suffix_decoding_global_max_occurrences}"
            )
        if self.mtp_strategy not in MTP_STRATEGIES:
            raise ValueError(
                f"mtp_strategy must be one of {MTP_STRATEGIES}, got {self.mtp_strategy!r}"
            )

    @property
    def draft_width(self) -> int:
        """K + 1: columns of ``draft_tokens`` and ``accept_tokens``."""
        return self.num_speculative_tokens + 1


@dataclass(frozen=True)
class ProposerConfig:
    """What a proposer reads of its configuration, whichever form it was given in.

    Parameters
    ----------
    speculative : SpeculativeConfig
    pad_to_max : bool
        Graph mode of the n-gram ops (the target model runs in CUDA graphs): every scheduled slot
        verifies K drafts. FastDeploy's ``graph_opt_config.use_cudagraph``.
    max_num_seqs, max_model_len : int, optional
        Slots and row width, for proposers that own buffers (``MTPProposer``). FastDeploy's
        ``scheduler_config.max_num_seqs`` and ``model_config.max_model_len``.
    """

    speculative: SpeculativeConfig
    pad_to_max: bool = False
    max_num_seqs: Optional[int] = None
    max_model_len: Optional[int] = None


def proposer_config(config: Any) -> ProposerConfig:
    """A :class:`ProposerConfig` from a ``ProposerConfig``, a :class:`SpeculativeConfig`, or an object
    shaped like FastDeploy's ``FDConfig``.

    From an ``FDConfig``-shaped object it reads ``speculative_config.method``,
    ``num_speculative_tokens``, ``max_ngram_size``, ``min_ngram_size``, ``num_model_steps`` and
    ``mtp_strategy`` and the ``suffix_decoding_*`` keys (a missing field takes :class:`SpeculativeConfig`'s default; a method given as an
    enum is read by its ``value``), ``graph_opt_config.use_cudagraph`` (as ``pad_to_max``),
    ``scheduler_config.max_num_seqs`` and ``model_config.max_model_len``. The thresholds stay None
    (read from the environment on every call, as upstream does).

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> from fastdeploy_spec.config import proposer_config
    >>> fd_config = NS(speculative_config=NS(method="ngram", num_speculative_tokens=5,
    ...                                      max_ngram_size=3, min_ngram_size=1),
    ...                graph_opt_config=NS(use_cudagraph=True),
    ...                scheduler_config=NS(max_num_seqs=2), model_config=NS(max_model_len=256))
    >>> pc = proposer_config(fd_config)
    >>> pc.speculative.num_speculative_tokens, pc.pad_to_max, pc.max_num_seqs, pc.max_model_len
    (5, True, 2, 256)
    """
    if isinstance(config, ProposerConfig):
        return config
    if isinstance(config, SpeculativeConfig):
        return ProposerConfig(config)
    sc = getattr(config, "speculative_config", None)
    if sc is None:
        raise TypeError(
            f"expected a SpeculativeConfig, a ProposerConfig or an FDConfig-shaped object "
            f"(with speculative_config), got {type(config).__name__}"
        )
    defaults = SpeculativeConfig()
    fields = {}
    for name in (
        "num_speculative_tokens",
        "max_ngram_size",
        "min_ngram_size",
        "num_model_steps",
        "mtp_strategy",
        "suffix_decoding_max_tree_depth",
        "suffix_decoding_max_spec_factor",
        "suffix_decoding_max_spec_offset",
        "suffix_decoding_min_token_prob",
        "suffix_decoding_max_cached_requests",
        "suffix_decoding_max_cached_tokens",
        "suffix_decoding_cached_response_len",
        "suffix_decoding_global_min_match",
        "suffix_decoding_global_max_occurrences",
    ):
        value = getattr(sc, name, None)
        fields[name] = getattr(defaults, name) if value is None else value
    method = getattr(sc, "method", None)
    method = getattr(method, "value", method)  # an enum member: its value
    spec = SpeculativeConfig(method=method, **fields)
    graph = getattr(config, "graph_opt_config", None)
    scheduler = getattr(config, "scheduler_config", None)
    model = getattr(config, "model_config", None)
    return ProposerConfig(
        spec,
        pad_to_max=bool(getattr(graph, "use_cudagraph", False)),
        max_num_seqs=getattr(scheduler, "max_num_seqs", None),
        max_model_len=getattr(model, "max_model_len", None),
    )
