"""The suffix-decoding proposer: drafts from the continuation counts of each slot's own history."""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import paddle

from fastdeploy_spec.ops import suffix_match
from fastdeploy_spec.proposers.base import Proposer


class SuffixProposer(Proposer):
    """Proposes drafts with ``suffix_match``, in place on the runner's share-inputs.

    FastDeploy's ``SUFFIX`` method on the device: per decode step one op call reads each slot's
    history from ``token_ids_all`` (prompt then generated tokens), so there is no per-request state
    to insert at prefill or to free at the end, and no host copy. The proposer's own buffers, the
    draft of every decoding slot before the batch budget, are allocated once (at the first call, on
    the place and with the slot count of the share-inputs):

    * ``suffix_tokens`` int64 [S, K] and ``suffix_probs`` float32 [S, K]: the draft and each
      token's estimated probability;
    * ``suffix_meta`` int32 [S, 2]: the draft's length and its match length.

    Examples
    --------
    The history ``1 2 3 4 5 1 2 3 6 7 1 2`` has seen ``1 2`` followed by ``3`` twice, then ``4`` and
    ``6`` once each (the earliest, ``4``, wins the tie):

    >>> import numpy as np
    >>> from fastdeploy_spec.buffers import copy_from_host, make_share_inputs
    >>> from fastdeploy_spec.config import SpeculativeConfig
    >>> from fastdeploy_spec.proposers import SuffixProposer
    >>> cfg = SpeculativeConfig(method="suffix", num_speculative_tokens=5)
    >>> bufs = make_share_inputs(1, 16, cfg)
    >>> row = np.full((1, 16), -1, np.int64); row[0, :12] = [1, 2, 3, 4, 5, 1, 2, 3, 6, 7, 1, 2]
    >>> copy_from_host(bufs["token_ids_all"], row)
    >>> copy_from_host(bufs["prompt_lens"], np.array([[10]], np.int64))
    >>> copy_from_host(bufs["step_idx"], np.array([[2]], np.int64))
    >>> copy_from_host(bufs["max_dec_len"], np.array([[100]], np.int64))
    >>> copy_from_host(bufs["seq_lens_decoder"], np.array([12], np.int32))
    >>> proposer = SuffixProposer(cfg)
    >>> proposer.run(share_inputs=bufs)
    >>> bufs["draft_tokens"].numpy()[0, 1:3].tolist(), proposer.suffix_meta.numpy()[0].tolist()
    ([3, 4], [2, 2])
    """

    def __init__(self, config) -> None:
        super().__init__(config)  # a SpeculativeConfig, ProposerConfig or FDConfig-shaped object
        config = self.config
        self.max_tree_depth = config.suffix_decoding_max_tree_depth
        self.max_spec_factor = config.suffix_decoding_max_spec_factor
        self.max_spec_offset = config.suffix_decoding_max_spec_offset
        self.min_token_prob = config.suffix_decoding_min_token_prob
        self.threshold = config.ngram_threshold
        self.suffix_tokens: Optional[paddle.Tensor] = None
        self.suffix_probs: Optional[paddle.Tensor] = None
        self.suffix_meta: Optional[paddle.Tensor] = None

    def _allocate(self, draft_tokens: paddle.Tensor) -> None:
        S, K = draft_tokens.shape[0], draft_tokens.shape[1] - 1
        place = draft_tokens.place
        self.suffix_tokens = paddle.to_tensor(np.full((S, K), -1, np.int64), place=place)
        self.suffix_probs = paddle.to_tensor(np.zeros((S, K), np.float32), place=place)
        self.suffix_meta = paddle.to_tensor(np.zeros((S, 2), np.int32), place=place)

    def _run_impl(self, share_inputs: Dict[str, paddle.Tensor], **_: object) -> None:
        s = share_inputs
        if self.suffix_tokens is None:
            self._allocate(s["draft_tokens"])
        suffix_match(
            s["token_ids_all"], s["prompt_lens"], s["step_idx"], s["actual_draft_token_num"],
            s["draft_tokens"], s["seq_lens_this_time"], s["seq_lens_encoder"],
            s["seq_lens_decoder"], s["max_dec_len"], self.suffix_tokens, self.suffix_probs,
            self.suffix_meta, max_tree_depth=self.max_tree_depth,
            max_spec_factor=self.max_spec_factor, max_spec_offset=self.max_spec_offset,
            min_token_prob=self.min_token_prob, max_draft_tokens=self.max_draft_token_num,
            pad_to_max=self.pad_to_max, threshold=self.threshold)
