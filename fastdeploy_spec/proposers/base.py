"""The proposer interface shared by every speculative method."""

from __future__ import annotations

import abc
from typing import Any

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
