"""Draft proposers: ``NgramProposer``, ``SuffixProposer`` and ``MTPProposer``, built by ``create_proposer``."""

from __future__ import annotations

from typing import Optional

from fastdeploy_spec.config import SpecMethod, proposer_config
from fastdeploy_spec.proposers.base import Proposer
from fastdeploy_spec.proposers.mtp import DraftModel, MTPProposer, last_input_tokens
from fastdeploy_spec.proposers.ngram import NgramProposer
from fastdeploy_spec.proposers.suffix import SuffixProposer

__all__ = [
    "MTPProposer",
    "NgramProposer",
    "Proposer",
    "SuffixProposer",
    "create_proposer",
    "last_input_tokens",
]


def create_proposer(
    config,
    *,
    draft_model: Optional[DraftModel] = None,
    max_num_seqs: Optional[int] = None,
    max_model_len: Optional[int] = None,
    place=None,
    mtp_ops: str = "fused",
) -> Optional[Proposer]:
    """The proposer of ``config.method``.

    ``naive`` returns None: the runner proposes nothing and verifies one token per slot, so it skips
    the proposer call instead of calling a no-op. ``ngram`` returns an :class:`NgramProposer`;
    ``suffix`` a :class:`SuffixProposer`;
    ``mtp`` an :class:`MTPProposer`, which needs ``draft_model``, ``max_num_seqs`` and
    ``max_model_len`` (``place``: where its buffers live, that of the share-inputs; the draft model
    returns its logits there; ``mtp_ops``: its ``ops``, "fused" or FastDeploy's "upstream" sequence). ``config`` may also be a ``ProposerConfig`` or an ``FDConfig``-shaped
    object (``fastdeploy_spec.config.proposer_config``), which then supplies ``max_num_seqs``,
    ``max_model_len`` and ``pad_to_max``.

    Examples
    --------
    >>> from fastdeploy_spec.config import SpeculativeConfig
    >>> from fastdeploy_spec.proposers import create_proposer
    >>> type(create_proposer(SpeculativeConfig(method="ngram_match"))).__name__
    'NgramProposer'
    >>> create_proposer(SpeculativeConfig(method="naive")) is None
    True
    """
    setup = proposer_config(config)
    max_num_seqs = setup.max_num_seqs if max_num_seqs is None else max_num_seqs
    max_model_len = setup.max_model_len if max_model_len is None else max_model_len
    method = setup.speculative.method
    if method is SpecMethod.NAIVE:
        return None
    if method is SpecMethod.NGRAM:
        return NgramProposer(setup)
    if method is SpecMethod.SUFFIX:
        return SuffixProposer(setup)
    if method is SpecMethod.MTP:
        missing = [
            name
            for name, v in (
                ("draft_model", draft_model),
                ("max_num_seqs", max_num_seqs),
                ("max_model_len", max_model_len),
            )
            if v is None
        ]
        if missing:
            raise ValueError(f"method 'mtp' needs {', '.join(missing)}")
        return MTPProposer(
            setup, draft_model, max_num_seqs, max_model_len, place=place, ops=mtp_ops
        )
    raise ValueError(f"no proposer for speculative method {method!r}")
