"""The n-gram proposer: drafts copied from earlier occurrences of each slot's newest n-gram."""

from __future__ import annotations

from typing import Dict

import paddle

from fastdeploy_spec.config import SpeculativeConfig
from fastdeploy_spec.ops import ngram_match
from fastdeploy_spec.proposers.base import Proposer


class NgramProposer(Proposer):
    """Proposes drafts with ``ngram_match``, in place on the runner's share-inputs.

    No tensor is copied or created: the op runs where the buffers live (CPU or GPU) and, on the GPU,
    without host synchronisation.

    Examples
    --------
    A slot with prompt ``1 2 3 4`` has generated ``7 1 2``: its newest 2-gram ``1 2`` opens the
    prompt, so ``3 4`` (what followed it there) become the drafts:

    >>> import numpy as np
    >>> from fastdeploy_spec.buffers import copy_from_host, make_share_inputs
    >>> from fastdeploy_spec.config import SpeculativeConfig
    >>> from fastdeploy_spec.proposers import NgramProposer
    >>> cfg = SpeculativeConfig(method="ngram", num_speculative_tokens=2, max_ngram_size=2)
    >>> bufs = make_share_inputs(1, 16, cfg)
    >>> row = np.full((1, 16), -1, np.int64); row[0, :7] = [1, 2, 3, 4, 7, 1, 2]
    >>> copy_from_host(bufs["token_ids_all"], row)
    >>> copy_from_host(bufs["prompt_lens"], np.array([[4]], np.int64))
    >>> copy_from_host(bufs["step_idx"], np.array([[3]], np.int64))
    >>> copy_from_host(bufs["max_dec_len"], np.array([[100]], np.int64))
    >>> copy_from_host(bufs["seq_lens_decoder"], np.array([7], np.int32))
    >>> NgramProposer(cfg).run(share_inputs=bufs)
    >>> bufs["draft_tokens"].numpy()[0, 1:].tolist(), int(bufs["seq_lens_this_time"].numpy()[0])
    ([3, 4], 3)
    """

    def __init__(self, config: SpeculativeConfig) -> None:
        super().__init__(config)
        self.max_ngram_size = config.max_ngram_size
        self.threshold = config.ngram_threshold

    def _run_impl(self, share_inputs: Dict[str, paddle.Tensor], **_: object) -> None:
        s = share_inputs
        ngram_match(
            s["token_ids_all"], s["prompt_lens"], s["step_idx"], s["actual_draft_token_num"],
            s["draft_tokens"], s["seq_lens_this_time"], s["seq_lens_encoder"],
            s["seq_lens_decoder"], s["max_dec_len"], self.max_ngram_size, self.max_draft_token_num,
            threshold=self.threshold)
