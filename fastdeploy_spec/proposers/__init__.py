"""Draft proposers: ``NgramProposer`` (and ``MTPProposer``), built by ``create_proposer``."""

from fastdeploy_spec.proposers.base import Proposer
from fastdeploy_spec.proposers.ngram import NgramProposer

__all__ = ["NgramProposer", "Proposer"]
