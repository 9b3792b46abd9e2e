"""The n-gram proposer: drafts copied from earlier occurrences of each slot's newest n-gram."""

from __future__ import annotations

from typing import Dict

import paddle

from fastdeploy_spec.ops import ngram_match
from fastdeploy_spec.proposers.base import Proposer, draft_inputs


class NgramProposer(Proposer):
    """Proposes drafts with ``ngram_match``, in place on the runner's share-inputs.

    No tensor is copied or created: the op runs where the buffers live (CPU or GPU) and, on the GPU,
    without host synchronisation. ``config``: a ``SpeculativeConfig``, or FastDeploy's ``FDConfig``
    (or any object of its shape), whose ``graph_opt_config.use_cudagraph`` turns on ``pad_to_max``:
    every decoding slot then verifies K drafts, as a target model captured in CUDA graphs needs.

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

    Built from a FastDeploy-shaped config with CUDA graphs on, and called as FastDeploy calls it:

    >>> from types import SimpleNamespace as NS
    >>> fd_config = NS(speculative_config=NS(method="ngram", num_speculative_tokens=2,
    ...                                      max_ngram_size=2, min_ngram_size=1),
    ...                graph_opt_config=NS(use_cudagraph=True), scheduler_config=NS(max_num_seqs=1),
    ...                model_config=NS(max_model_len=16))
    >>> copy_from_host(bufs["seq_lens_this_time"], np.array([1], np.int32))
    >>> copy_from_host(bufs["step_idx"], np.array([[1]], np.int64))  # newest token 7: no match
    >>> copy_from_host(bufs["draft_tokens"], np.array([[7, -1, -1]], np.int64))  # last accepted: 7
    >>> NgramProposer(fd_config).run(bufs)   # K + 1 = 3 tokens: 7 repeated as placeholder drafts
    >>> bufs["draft_tokens"].numpy()[0].tolist(), int(bufs["seq_lens_this_time"].numpy()[0])
    ([7, 7, 7], 3)
    """

    def __init__(self, config) -> None:
        super().__init__(config)
        self.threshold = self.config.ngram_threshold

    def _run_impl(self, share_inputs: Dict[str, paddle.Tensor], **_: object) -> None:
        ngram_match(
            *draft_inputs(share_inputs),
            self.max_ngram_size,
            self.max_draft_token_num,
            self.pad_to_max,
            threshold=self.threshold,
        )
