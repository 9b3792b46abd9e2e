"""The suffix-decoding proposer: drafts from the continuation counts of each slot's own history and,
with the global cache, of the responses of earlier (and concurrent) requests."""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import paddle

from fastdeploy_spec.ops import suffix_match
from fastdeploy_spec.ops.suffix_cache import (
    SuffixCache,
    suffix_cache_finish,
    suffix_cache_insert,
    suffix_cache_step,
)
from fastdeploy_spec.proposers.base import Proposer, draft_inputs


class SuffixProposer(Proposer):
    """Proposes drafts with ``suffix_match``, in place on the runner's share-inputs.

    FastDeploy's ``SUFFIX`` method on the device: per decode step one op call reads each slot's
    history from ``token_ids_all`` (prompt then generated tokens), so there is no per-request state
    to insert at prefill or to free at the end, and no host copy. The proposer's own buffers, the
    draft of every decoding slot before the batch budget, are allocated once (at the first call, on
    the place and with the slot count of the share-inputs):

    * ``suffix_tokens`` int64 [S, K] and ``suffix_probs`` float32 [S, K]: the draft and each
      token's estimated probability;
    * ``suffix_meta`` int32 [S, 2]: the draft's length and its match length;
    * ``suffix_source`` int32 [S]: which draft won, 0 the slot's own history, 1 the global cache.

    With ``suffix_decoding_max_cached_requests != 0`` (FastDeploy's default is 10000) the proposer
    also owns the global cache (:class:`~fastdeploy_spec.ops.suffix_cache.SuffixCache`, allocated
    once): each step ``suffix_cache_step`` adds the slots' accepted tokens to their cached
    responses (the insert) and drafts from both sources (the query). A request's response stays cached
    after it finishes, until the ring evicts it. The tokens accepted at a request's last step reach
    its response when its slot is next seen empty (the next step's insert), or in :meth:`reset`,
    before the runner writes a new request into the slot.

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
        self.suffix_source: Optional[paddle.Tensor] = None
        self.cache: Optional[SuffixCache] = None
        self.max_cached_requests = config.suffix_decoding_max_cached_requests
        self._share_inputs: Optional[Dict[str, paddle.Tensor]] = None

    def _allocate(self, draft_tokens: paddle.Tensor) -> None:
        S, K = draft_tokens.shape[0], draft_tokens.shape[1] - 1
        place = draft_tokens.place
        self.suffix_tokens = paddle.to_tensor(np.full((S, K), -1, np.int64), place=place)
        self.suffix_probs = paddle.to_tensor(np.zeros((S, K), np.float32), place=place)
        self.suffix_meta = paddle.to_tensor(np.zeros((S, 2), np.int32), place=place)
        self.suffix_source = paddle.to_tensor(np.zeros(S, np.int32), place=place)
        if self.max_cached_requests != 0:
            c = self.config
            self.cache = SuffixCache.from_config(
                self.max_cached_requests,
                c.suffix_decoding_cached_response_len,
                c.suffix_decoding_max_cached_tokens,
                S,
                key_len=c.suffix_decoding_global_min_match,
                max_occurrences=c.suffix_decoding_global_max_occurrences,
                place=place,
            )

    def _run_impl(self, share_inputs: Dict[str, paddle.Tensor], **_: object) -> None:
        s = share_inputs
        if self.suffix_tokens is None:
            self._allocate(s["draft_tokens"])
        self._share_inputs = s
        args = (
            *draft_inputs(s),
            self.suffix_tokens,
            self.suffix_probs,
            self.suffix_meta,
        )
        kw = dict(
            max_tree_depth=self.max_tree_depth,
            max_spec_factor=self.max_spec_factor,
            max_spec_offset=self.max_spec_offset,
            min_token_prob=self.min_token_prob,
            max_draft_tokens=self.max_draft_token_num,
            pad_to_max=self.pad_to_max,
            threshold=self.threshold,
        )
        if self.cache is None:
            suffix_match(*args, **kw)
            return
        suffix_cache_step(*args, self.suffix_source, self.cache, **kw)

    def _insert(self, s: Dict[str, paddle.Tensor]) -> None:
        suffix_cache_insert(
            s["token_ids_all"],
            s["prompt_lens"],
            s["step_idx"],
            s["seq_lens_encoder"],
            s["seq_lens_decoder"],
            self.cache,
        )

    def reset(self, slots) -> None:
        """New requests are about to be written into ``slots``: an insert first, while their rows
        still hold the requests that finished there (empty after the update, so the op adds their
        last accepted tokens and frees the slots). Nothing to do without the global cache."""
        if self.cache is not None and self._share_inputs is not None and len(slots):
            self._insert(self._share_inputs)

    def finish(self, finished: paddle.Tensor) -> None:
        """Requests that finished (int32 [S] mask, on the state's place): their responses stay in the
        global cache, nothing more is added to them. Optional: a slot that prefills a new request or
        empties is detached by the next step anyway."""
        if self.cache is not None:
            suffix_cache_finish(finished, self.cache)
