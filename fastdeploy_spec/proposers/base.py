"""The proposer interface shared by every speculative method."""

from __future__ import annotations

import abc
from typing import Any, Sequence

from fastdeploy_spec.config import SpeculativeConfig


class Proposer(abc.ABC):
    """Writes draft tokens for the next verification step into the runner's buffers.

    ``run(**kw)`` is what a runner calls once per decode step; subclasses implement ``_run_impl``.
    A proposer mutates ``draft_tokens`` and ``seq_lens_this_time`` of the share-inputs in place, on
    the place where they live.
    """

    def __init__(self, config: SpeculativeConfig) -> None:
        self.config = config
        self.max_draft_token_num = config.num_speculative_tokens

    def run(self, **kw: Any) -> None:
        self._run_impl(**kw)

    @abc.abstractmethod
    def _run_impl(self, **kw: Any) -> None:
        """Propose drafts for one step."""

    def reset(self, slots: Sequence[int]) -> None:
        """New requests start in ``slots``: forget what the proposer kept of them (nothing here)."""

    def accept(self, accept_tokens: Any, accept_num: Any) -> None:
        """The step's verified tokens (``accept_tokens`` [S, K + 1], ``accept_num`` [S]), called after
        verification; a proposer that keeps its own history updates it (nothing here)."""
