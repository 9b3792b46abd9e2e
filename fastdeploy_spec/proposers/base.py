"""The proposer interface shared by every speculative method."""

from __future__ import annotations

import abc
from typing import Any, Mapping, Sequence

from fastdeploy_spec.config import proposer_config
from fastdeploy_spec.ops._common import DRAFT_INPUTS


def draft_inputs(share_inputs: Mapping[str, Any]) -> tuple:
    """The nine tensors the n-gram/suffix ops take first (``DRAFT_INPUTS``, in their order) from a
    runner's share-inputs, where ``draft_token_num`` is named ``actual_draft_token_num``."""
    return tuple(
        share_inputs["actual_draft_token_num" if k == "draft_token_num" else k]
        for k in DRAFT_INPUTS
    )


class Proposer(abc.ABC):
    """Writes draft tokens for the next verification step into the runner's buffers.

    ``run(share_inputs, ...)`` (positional as FastDeploy calls it, or keyword) is what a runner calls
    once per decode step; subclasses implement ``_run_impl``. A proposer mutates ``draft_tokens`` and
    ``seq_lens_this_time`` of the share-inputs in place, on the place where they live.

    ``draft_length_policy`` (None by default): a :class:`fastdeploy_spec.policy.DraftLengthPolicy` run
    after each call, which cuts every slot's drafts to the number that pays (docs/contract/policy.md);
    not with ``pad_to_max``, whose captured shape verifies K + 1 tokens per slot whatever the drafts.

    ``config`` is a ``SpeculativeConfig``, a ``ProposerConfig`` or an object shaped like FastDeploy's
    ``FDConfig`` (see :func:`fastdeploy_spec.config.proposer_config`); the attributes below are
    FastDeploy's names. ``config`` keeps the typed ``SpeculativeConfig``.
    """

    def __init__(self, config: Any) -> None:
        setup = proposer_config(config)
        self.config = setup.speculative
        self.pad_to_max = setup.pad_to_max
        self.max_num_seqs = setup.max_num_seqs
        self.max_model_len = setup.max_model_len
        self.max_draft_token_num = self.config.num_speculative_tokens
        self.max_ngram_size = self.config.max_ngram_size
        self.min_ngram_size = self.config.min_ngram_size
        self.draft_length_policy = None

    def run(self, *args: Any, **kw: Any) -> None:
        self._run_impl(*args, **kw)
        if self.draft_length_policy is not None and not self.pad_to_max:
            self.draft_length_policy.apply(kw["share_inputs"] if "share_inputs" in kw else args[0])

    @abc.abstractmethod
    def _run_impl(self, *args: Any, **kw: Any) -> None:
        """Propose drafts for one step."""

    def reset(self, slots: Sequence[int]) -> None:
        """New requests start in ``slots``: forget what the proposer kept of them (nothing here)."""

    def accept(self, accept_tokens: Any, accept_num: Any) -> None:
        """The step's verified tokens (``accept_tokens`` [S, K + 1], ``accept_num`` [S]), called after
        verification; a proposer that keeps its own history updates it (nothing here)."""
