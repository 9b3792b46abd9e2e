"""The MTP proposer: greedy drafts from a draft model, optionally extended by n-gram matches."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np
import paddle

from fastdeploy_spec.buffers import copy_from_host, resolve_place
from fastdeploy_spec.ops import hybrid_mtp_ngram
from fastdeploy_spec.proposers.base import Proposer

DraftModel = Callable[..., Any]


class MTPProposer(Proposer):
    """Proposes drafts with a draft (MTP) model, then extends them with ``hybrid_mtp_ngram``.

    The proposer owns the draft model's inputs: ``pre_ids`` [S, D] int64 (row b: -1 at index 0, then
    the slot's generated tokens, newest at ``step_idx[b]``) and ``step_idx`` [S, 1] int64, which is
    also the slot's sequence length in ``pre_ids``. Per decode step, for every decoding slot
    (``seq_lens_encoder == 0`` and ``seq_lens_decoder > 0``):

    1. ``num_model_steps`` greedy steps: the draft model maps the newest token of each slot to logits,
       the argmax becomes draft ``i`` (``draft_tokens[b, 1 + i]``) and is appended to ``pre_ids``;
       ``seq_lens_this_time[b] = 1 + drafts``. Column 0 (the last accepted token) is the runner's.
    2. With ``mtp_strategy == "with_ngram"`` and K > ``num_model_steps``: ``hybrid_mtp_ngram``
       appends n-gram continuations of the newest tokens of ``pre_ids`` (the MTP drafts included),
       up to K drafts in all, in place on the share-inputs.

    After verification the runner calls :meth:`accept`, which drops the step's MTP drafts from
    ``pre_ids`` and appends the accepted tokens; :meth:`reset` clears slots that start a request.

    The bookkeeping runs on the host in NumPy (a device->host copy of the logits and of the touched
    buffers, then host->device copies back into the same allocations): correct wherever the buffers
    live, but not free of host synchronisation on a GPU; a device-side argmax and draft write is
    future work. No Paddle kernel touches the buffers (copies and ``hybrid_mtp_ngram`` only); the
    only Paddle kernels are the draft model's own, on ``draft_place``. Slots are told
    apart only by ``seq_lens_this_time`` inside ``hybrid_mtp_ngram`` (as upstream): a prefill chunk of
    at most K tokens in the same batch would be extended too.

    Parameters
    ----------
    config : SpeculativeConfig or FDConfig-shaped
        K = ``num_speculative_tokens``, ``num_model_steps``, ``mtp_strategy``, n-gram sizes and
        ``hybrid_threshold``; from an ``FDConfig``, also ``max_num_seqs`` / ``max_model_len`` and
        ``pad_to_max`` (``graph_opt_config.use_cudagraph``, passed to ``hybrid_mtp_ngram``).
    draft_model : callable
        ``draft_model(input_ids, hidden_states)`` with ``input_ids`` int64 [S, 1] (each slot's newest
        token; rows of other slots hold 0 and are ignored) returns logits [S, V], or
        ``(logits, hidden)``. Step 0 gets the ``hidden_states`` given to :meth:`run` (None if none),
        later steps the ``hidden`` the model returned (None if it returned logits only).
    max_num_seqs : int, optional
        S, the slots (default: the config's ``scheduler_config.max_num_seqs``).
    max_model_len : int, optional
        Default width D of ``pre_ids`` (a slot stops drafting once its row is full); default: the
        config's ``model_config.max_model_len``.
    place : str or Paddle place, optional
        Where ``pre_ids`` and ``step_idx`` live: the place of the share-inputs ('cpu' by default).
    draft_place : str or Paddle place, optional
        Where the draft model's ``input_ids`` are put, hence where a Paddle draft model runs (default:
        ``place``). 'cpu' runs the draft model on the host while the buffers stay on the GPU: the
        setting for a GPU whose architecture the installed Paddle has no kernels for (Paddle 2.6 on an
        H100), where a Paddle model on the GPU silently computes garbage.

    Examples
    --------
    A draft model that always predicts ``token + 1`` drafts ``4 5`` after ``3``:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.buffers import copy_from_host, make_share_inputs
    >>> from fastdeploy_spec.config import SpeculativeConfig
    >>> from fastdeploy_spec.proposers import MTPProposer
    >>> cfg = SpeculativeConfig(method="mtp", num_speculative_tokens=2, num_model_steps=2)
    >>> plus_one = lambda ids, hidden: paddle.nn.functional.one_hot((ids[:, 0] + 1) % 8, 8)
    >>> bufs = make_share_inputs(1, 16, cfg)
    >>> copy_from_host(bufs["seq_lens_decoder"], np.array([4], np.int32))
    >>> copy_from_host(bufs["max_dec_len"], np.array([[100]], np.int64))
    >>> mtp = MTPProposer(cfg, plus_one, max_num_seqs=1, max_model_len=16)
    >>> mtp.accept(np.array([[3, -1, -1]]), np.array([1]))  # the first generated token
    >>> mtp.run(share_inputs=bufs)
    >>> bufs["draft_tokens"].numpy()[0, 1:].tolist(), bufs["seq_lens_this_time"].numpy().tolist()
    ([4, 5], [3])
    """

    def __init__(self, config, draft_model: DraftModel, max_num_seqs: Optional[int] = None,
                 max_model_len: Optional[int] = None, *, place=None, draft_place=None) -> None:
        super().__init__(config)  # also an FDConfig-shaped object (proposers/base.py)
        max_num_seqs = self.max_num_seqs if max_num_seqs is None else max_num_seqs
        max_model_len = self.max_model_len if max_model_len is None else max_model_len
        if max_num_seqs is None or max_model_len is None:
            raise ValueError("MTPProposer needs max_num_seqs and max_model_len (arguments, or the "
                             "config's scheduler_config / model_config)")
        self.max_num_seqs, self.max_model_len = max_num_seqs, max_model_len
        config = self.config
        if not callable(draft_model):
            raise TypeError(f"draft_model must be callable, got {type(draft_model).__name__}")
        if max_num_seqs < 0 or max_model_len < 2:
            raise ValueError(f"need max_num_seqs >= 0 and max_model_len >= 2, got {max_num_seqs}, "
                             f"{max_model_len}")
        self.draft_model = draft_model
        self.num_model_steps = min(config.num_model_steps, config.num_speculative_tokens)
        self.extend_with_ngram = (config.mtp_strategy == "with_ngram"
                                  and config.num_speculative_tokens > config.num_model_steps)
        self.place = resolve_place(place)
        self.draft_place = self.place if draft_place is None else resolve_place(draft_place)
        self.pre_ids = paddle.to_tensor(np.full((max_num_seqs, max_model_len), -1, np.int64),
                                        place=self.place)
        self.step_idx = paddle.to_tensor(np.zeros((max_num_seqs, 1), np.int64), place=self.place)
        # MTP drafts appended to pre_ids by the last run, dropped again by accept().
        self._drafted = np.zeros(max_num_seqs, np.int64)

    def reset(self, slots: Sequence[int]) -> None:
        """Forget the tokens of ``slots`` (a new request starts there)."""
        idx = np.asarray(slots, np.int64)
        pre, step = self.pre_ids.numpy(), self.step_idx.numpy()
        pre[idx] = -1
        step[idx] = 0
        self._drafted[idx] = 0
        copy_from_host(self.pre_ids, pre)
        copy_from_host(self.step_idx, step)

    def accept(self, accept_tokens, accept_num) -> None:
        """Replace the last run's MTP drafts in ``pre_ids`` by the verified tokens.

        Parameters
        ----------
        accept_tokens : int64 [S, K + 1] (Paddle tensor or NumPy array)
            Row b: the ``accept_num[b]`` tokens the target accepted (first token after prefill too).
        accept_num : int32 [S]
            Tokens accepted per slot; 0 leaves the slot's accepted history as it was.
        """
        tokens = _host(accept_tokens).astype(np.int64)
        num = _host(accept_num).reshape(-1)
        pre, step = self.pre_ids.numpy(), self.step_idx.numpy()
        D = pre.shape[1]
        for b in range(pre.shape[0]):
            s = int(step[b, 0]) - int(self._drafted[b])
            n = int(np.clip(num[b], 0, min(tokens.shape[1], D - 1 - s)))
            pre[b, s + 1:s + 1 + n] = tokens[b, :n]
            step[b, 0] = s + n
        self._drafted[:] = 0
        copy_from_host(self.pre_ids, pre)
        copy_from_host(self.step_idx, step)

    def _run_impl(self, share_inputs: Dict[str, paddle.Tensor],
                  hidden_states: Optional[paddle.Tensor] = None, **_: object) -> None:
        s = share_inputs
        enc = s["seq_lens_encoder"].numpy().reshape(-1)
        dec = s["seq_lens_decoder"].numpy().reshape(-1)
        active = (enc == 0) & (dec > 0)
        pre, step = self.pre_ids.numpy(), self.step_idx.numpy()
        drafts, slt = s["draft_tokens"].numpy(), s["seq_lens_this_time"].numpy()
        rows = np.arange(pre.shape[0])
        drafted = np.zeros(pre.shape[0], np.int64)

        hidden = hidden_states
        for i in range(self.num_model_steps):
            # Other slots get token 0, not their row's -1 fill: an embedding lookup of -1 reads
            # outside the table (Paddle's CPU embedding does not check; found by ASan).
            newest = np.where(active, pre[rows, step[:, 0]], 0).reshape(-1, 1)
            out = self.draft_model(paddle.to_tensor(newest, place=self.draft_place), hidden)
            logits, hidden = out if isinstance(out, tuple) else (out, None)
            token = np.argmax(_host(logits).reshape(len(rows), -1), axis=-1)
            room = active & (step[:, 0] + 1 < pre.shape[1]) & (drafted == i)
            step[room, 0] += 1
            pre[rows[room], step[room, 0]] = token[room]
            drafts[room, 1 + i] = token[room]
            drafted[room] += 1
        slt[active] = 1 + drafted[active]

        self._drafted = drafted
        copy_from_host(self.pre_ids, pre)
        copy_from_host(self.step_idx, step)
        copy_from_host(s["draft_tokens"], drafts)
        copy_from_host(s["seq_lens_this_time"], slt)
        if self.extend_with_ngram:
            cfg = self.config
            hybrid_mtp_ngram(
                s["token_ids_all"], s["prompt_lens"], self.pre_ids, self.step_idx,
                s["actual_draft_token_num"], s["draft_tokens"], s["seq_lens_this_time"],
                s["seq_lens_decoder"], s["max_dec_len"], cfg.max_ngram_size, cfg.min_ngram_size,
                cfg.num_speculative_tokens, self.pad_to_max, threshold=cfg.hybrid_threshold)


def _host(x) -> np.ndarray:
    return x.numpy() if isinstance(x, paddle.Tensor) else np.asarray(x)
