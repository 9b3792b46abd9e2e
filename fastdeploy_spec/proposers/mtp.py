"""The MTP proposer: greedy drafts from a draft model, optionally extended by n-gram matches."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np
import paddle

from fastdeploy_spec.buffers import copy_from_host, resolve_place
from fastdeploy_spec.config import SpeculativeConfig
from fastdeploy_spec.ops import (
    draft_model_accept,
    draft_model_accept_preprocess,
    draft_model_greedy_preprocess,
    draft_model_greedy_update,
    draft_model_postprocess,
    draft_model_preprocess,
    draft_model_update,
    eagle_get_hidden_states,
    hybrid_mtp_ngram,
    speculate_sample_tokens,
)
from fastdeploy_spec.proposers.base import Proposer

DraftModel = Callable[..., Any]

OPS_SEQUENCES = ("fused", "upstream")


def last_input_tokens(model_inputs: Dict[str, paddle.Tensor]) -> np.ndarray:
    """The newest input token of each slot the upstream-ops step feeds to the draft model, packed as
    its logits are: int64 [S, 1], row i for the i-th slot with ``seq_lens_this_time > 0``
    (``input_ids[b, seq_lens_encoder - 1]`` in the draft's prefill, else
    ``draft_tokens[b, seq_lens_this_time - 1]``), -1 past them. Host code (it reads the buffers),
    for draft models that run on the host and see one token, as the demo's does.
    """
    slt, enc = (
        model_inputs[n].numpy().reshape(-1) for n in ("seq_lens_this_time", "seq_lens_encoder")
    )
    active = np.flatnonzero(slt > 0)
    out = np.full((len(slt), 1), -1, np.int64)
    prefill, decode = active[enc[active] > 0], active[enc[active] <= 0]
    last = np.empty(len(slt), np.int64)
    last[prefill] = model_inputs["input_ids"].numpy()[prefill, enc[prefill] - 1]
    last[decode] = model_inputs["draft_tokens"].numpy()[decode, slt[decode] - 1]
    out[: len(active), 0] = last[active]
    return out


def extend_drafts_with_ngram(
    cfg: SpeculativeConfig,
    s: Dict[str, paddle.Tensor],
    pre_ids: paddle.Tensor,
    step_idx: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    max_dec_len: paddle.Tensor,
    pad_to_max: bool = False,
) -> None:
    """The ``with_ngram`` strategy's last step: ``hybrid_mtp_ngram`` extends the drafts in the
    runner's share-inputs ``s`` past the draft model's tokens, matching the draft side's ``pre_ids``
    (newest at ``step_idx``) in each slot's prompt."""
    hybrid_mtp_ngram(
        s["token_ids_all"],
        s["prompt_lens"],
        pre_ids,
        step_idx,
        s["actual_draft_token_num"],
        s["draft_tokens"],
        s["seq_lens_this_time"],
        seq_lens_decoder,
        max_dec_len,
        cfg.max_ngram_size,
        cfg.min_ngram_size,
        cfg.num_speculative_tokens,
        pad_to_max,
        threshold=cfg.hybrid_threshold,
    )


class MTPProposer(Proposer):
    """Proposes drafts with a draft (MTP) model, then extends them with ``hybrid_mtp_ngram``.

    The proposer owns the draft side's buffers, allocated once on ``place`` (that of the runner's
    share-inputs): ``pre_ids`` [S, D] int64 (row b: -1 at index 0, then the slot's generated tokens,
    newest at ``step_idx[b]``), ``step_idx`` and ``max_dec_len`` [S, 1] int64, ``seq_lens_decoder``
    [S] int32, ``input_ids`` [S, 1] int64 (the draft model's input) and ``mtp_draft_num`` [S] int32
    (MTP drafts not verified yet). A decode step runs only plugin ops and the draft model, with no
    host synchronisation and no allocation, so it can be captured in a CUDA graph:

    1. ``draft_model_accept_preprocess`` (``draft_model_greedy_preprocess`` before any :meth:`accept`, or
       after one that was applied at once): applies the last verification (the step's MTP drafts
       leave ``pre_ids``, the accepted tokens join it), drops drafts never verified, clears the slots
       that start a request (``seq_lens_encoder > 0``), gives each decoding slot's newest token to
       ``input_ids`` (other slots 0) and sets its ``seq_lens_this_time`` to 1.
    2. ``num_model_steps`` times: ``logits = draft_model(input_ids, hidden)``, then
       ``draft_model_greedy_update`` takes the greedy token of each decoding slot (argmax, ties to the
       lowest id) and appends it to ``draft_tokens``, ``pre_ids``, ``step_idx`` and
       ``seq_lens_this_time``, and makes it the next ``input_ids``.
    3. With ``mtp_strategy == "with_ngram"`` and K > ``num_model_steps``: ``hybrid_mtp_ngram``
       appends n-gram continuations of the newest tokens of ``pre_ids`` (MTP drafts included), up to
       K drafts in all, called as upstream calls it: the draft side's ``pre_ids``, ``step_idx``,
       ``seq_lens_decoder`` and ``max_dec_len``, the target's drafts and lengths.

    After verification the runner calls :meth:`accept`, which keeps the two tensors for step 1 of the
    next :meth:`run`, as upstream's ``draft_model_preprocess`` takes the accepted tokens (with
    ``defer_accept=False`` it runs ``draft_model_accept`` at once). Step 1 also clears the slots that
    start a request when it sees them in prefill, as upstream's does, so :meth:`reset` has nothing
    to do. Column 0 of ``draft_tokens`` (the last accepted token) is the
    runner's. Slots are told apart only by ``seq_lens_this_time`` inside ``hybrid_mtp_ngram`` (as
    upstream): a prefill chunk of at most K tokens in the same batch would be extended too.

    Parameters
    ----------
    config : SpeculativeConfig or FDConfig-shaped
        K = ``num_speculative_tokens``, ``num_model_steps``, ``mtp_strategy``, n-gram sizes and
        ``hybrid_threshold``; from an ``FDConfig``, also ``max_num_seqs`` / ``max_model_len`` and
        ``pad_to_max`` (``graph_opt_config.use_cudagraph``, passed to ``hybrid_mtp_ngram``).
    draft_model : callable
        ``draft_model(input_ids, hidden_states)`` with ``input_ids`` int64 [S, 1] on ``place`` (each
        decoding slot's newest token; other rows hold 0 and their logits are not used) returns
        logits [S, V] (float32, float16 or bfloat16) on ``place``, or ``(logits, hidden)``. It must
        not write ``input_ids``. Step 0 gets the ``hidden_states`` given to :meth:`run` (None if
        none), later steps the ``hidden`` the model returned (None if it returned logits only). A
        model that runs elsewhere (on the host, say) is wrapped by the caller, who copies its input
        out and its logits into a buffer on ``place``: that copy is the caller's, outside the
        proposer.
    max_num_seqs : int, optional
        S, the slots (default: the config's ``scheduler_config.max_num_seqs``).
    max_model_len : int, optional
        Default width D of ``pre_ids`` (a slot stops drafting once its row is full); default: the
        config's ``model_config.max_model_len``.
    place : str or Paddle place, optional
        Where the buffers live: the place of the share-inputs ('cpu' by default).
    defer_accept : bool, optional
        True (default): :meth:`accept` keeps the two tensors and the next :meth:`run` starts with
        ``draft_model_accept_preprocess`` (the accept and the preprocess in one kernel, as upstream's
        ``draft_model_preprocess`` takes the accepted tokens: one launch less per step). The drafts and the state after every ``run`` are the same as with False, but
        between ``accept`` and ``run`` the draft side's state lacks the accepted tokens, the tensors
        given to ``accept`` must keep their values (a runner's ``accept_tokens`` / ``accept_num``
        do: only verification writes them), and a CUDA graph of a step holds the fused op reading
        them, so capture it after a first ``accept``. False: :meth:`accept` runs
        ``draft_model_accept`` at once and the state is final at the end of each step.

    ops : {"fused", "upstream"}, optional
        "fused" (default): the step above, through our own fused ops (the greedy choice inside
        ``draft_model_greedy_update``; the fastest). "upstream": FastDeploy's op sequence on
        FastDeploy's buffers, call for call as ``MTPProposerCUDA`` makes it
        (``fastdeploy/spec_decode/mtp_cuda.py``; docs/design/mtp_proposer.md):
        ``draft_model_preprocess`` (the accepted tokens read from the share-inputs),
        ``eagle_get_hidden_states`` (when ``hidden_states`` are given), then ``num_model_steps`` x
        (draft model, sampler ``speculate_sample_tokens``, ``draft_model_update``), then
        ``draft_model_postprocess`` and ``hybrid_mtp_ngram``. Its buffers are ``model_inputs`` (the
        draft side, upstream's names) and ``target_model_inputs`` (the share-inputs given to
        :meth:`run`). Its draft model is called ``draft_model(model_inputs, hidden_states)`` and
        returns logits [S, V] whose row i belongs to the i-th slot with ``seq_lens_this_time > 0``
        (upstream's packed rows, padded to S for graph capture); the slot's input tokens are
        upstream's (``input_ids[b, :seq_lens_encoder]`` in the draft's prefill,
        ``draft_tokens[b, :seq_lens_this_time]`` in decode; :func:`last_input_tokens` gives each
        active slot's newest one, for host models). Drafts are greedy (temperature 0 in the
        sampler). :meth:`reset` and :meth:`accept` stand for upstream's task insertion (host
        writes, outside the captured step): this runner calls the proposer before the target, so a
        slot that starts a request is skipped until its prefill step has verified, then gets the
        draft model's prefill rows (the prompt shifted by one) as upstream's
        ``insert_prefill_inputs`` writes them. ``defer_accept`` does not apply.

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
    >>> copy_from_host(bufs["stop_flags"], np.array([[False]]))
    >>> copy_from_host(bufs["max_dec_len"], np.array([[100]], np.int64))
    >>> mtp = MTPProposer(cfg, plus_one, max_num_seqs=1, max_model_len=16)
    >>> copy_from_host(bufs["accept_tokens"], np.array([[3, -1, -1]], np.int64))
    >>> copy_from_host(bufs["accept_num"], np.array([1], np.int32))
    >>> mtp.accept(bufs["accept_tokens"], bufs["accept_num"])  # the first generated token
    >>> mtp.run(share_inputs=bufs)
    >>> bufs["draft_tokens"].numpy()[0, 1:].tolist(), bufs["seq_lens_this_time"].numpy().tolist()
    ([4, 5], [3])
    """

    def __init__(
        self,
        config,
        draft_model: DraftModel,
        max_num_seqs: Optional[int] = None,
        max_model_len: Optional[int] = None,
        *,
        place=None,
        defer_accept: bool = True,
        ops: str = "fused",
    ) -> None:
        super().__init__(config)  # also an FDConfig-shaped object (proposers/base.py)
        max_num_seqs = self.max_num_seqs if max_num_seqs is None else max_num_seqs
        max_model_len = self.max_model_len if max_model_len is None else max_model_len
        if max_num_seqs is None or max_model_len is None:
            raise ValueError(
                "MTPProposer needs max_num_seqs and max_model_len (arguments, or the "
                "config's scheduler_config / model_config)"
            )
        self.max_num_seqs, self.max_model_len = max_num_seqs, max_model_len
        config = self.config
        if not callable(draft_model):
            raise TypeError(f"draft_model must be callable, got {type(draft_model).__name__}")
        if max_num_seqs < 0 or max_model_len < 2:
            raise ValueError(
                f"need max_num_seqs >= 0 and max_model_len >= 2, got {max_num_seqs}, "
                f"{max_model_len}"
            )
        self.draft_model = draft_model
        self.num_model_steps = min(config.num_model_steps, config.num_speculative_tokens)
        self.extend_with_ngram = (
            config.mtp_strategy == "with_ngram"
            and config.num_speculative_tokens > config.num_model_steps
        )
        self.place = resolve_place(place)
        S, D = max_num_seqs, max_model_len

        def buffer(shape, fill, dtype):  # made on the host, copied to the place once
            return paddle.to_tensor(np.full(shape, fill, dtype), place=self.place)

        if ops not in OPS_SEQUENCES:
            raise ValueError(f"ops must be one of {OPS_SEQUENCES}, got {ops!r}")
        self.ops = ops
        self.defer_accept = bool(defer_accept) and ops == "fused"
        self._accepted = None  # (accept_tokens, accept_num) kept for the next run (defer_accept)
        if ops == "upstream":
            self._init_model_inputs(buffer, S, D, config.num_speculative_tokens + 1)
            return
        self.pre_ids = buffer((S, D), -1, np.int64)
        self.step_idx = buffer((S, 1), 0, np.int64)
        self.seq_lens_decoder = buffer((S,), 0, np.int32)
        self.max_dec_len = buffer((S, 1), 0, np.int64)
        self.input_ids = buffer((S, 1), 0, np.int64)
        self.mtp_draft_num = buffer((S,), 0, np.int32)

    def _init_model_inputs(self, buffer, S: int, D: int, K1: int) -> None:
        """The draft side's buffers under upstream's ``model_inputs`` names (``not_need_stop`` is
        upstream's ``not_need_stop_device``), and the greedy sampler's parameters."""
        self.model_inputs = mi = {
            "input_ids": buffer((S, D), 0, np.int64),
            "draft_tokens": buffer((S, K1), -1, np.int64),
            "pre_ids": buffer((S, D), -1, np.int64),
            "step_idx": buffer((S, 1), 0, np.int64),
            "seq_lens_this_time": buffer((S,), 0, np.int32),
            "seq_lens_encoder": buffer((S,), 0, np.int32),
            "seq_lens_decoder": buffer((S,), 0, np.int32),
            "stop_flags": buffer((S, 1), True, np.bool_),
            "not_need_stop": buffer((1,), False, np.bool_),
            "max_dec_len": buffer((S, 1), 0, np.int64),
            "cu_seqlens_q_output": buffer((S + 1,), 0, np.int32),
            "eos_token_id": buffer((1,), 0, np.int64),
            "sampled_token_ids": buffer((S,), -1, np.int64),
        }
        # Greedy drafts: row r of the packed logits is its own "slot" for the sampler.
        self._sampler = (
            paddle.to_tensor(np.arange(S + 1, dtype=np.int32), place=self.place),
            buffer((S,), 0, np.int64),  # step_idx (no draw at temperature 0)
            buffer((S,), 0, np.int64),  # seed
            buffer((S,), 0.0, np.float32),  # temperature
            buffer((S,), 1.0, np.float32),  # top_p
            buffer((S,), 0, np.int64),  # top_k
        )
        for name in ("pre_ids", "step_idx", "seq_lens_decoder", "max_dec_len", "input_ids"):
            setattr(self, name, mi[name])  # the names hybrid_mtp_ngram's call shares
        self.target_model_inputs: Optional[Dict[str, paddle.Tensor]] = None
        self._inserting: list = []  # slots whose request starts: prefill rows after its prefill

    def reset(self, slots: Sequence[int]) -> None:
        """Fused ops: nothing to do (``run`` clears a slot when it sees it start a request). Upstream
        ops: the slots are skipped by this step's ``draft_model_preprocess`` (the draft side's
        ``max_dec_len`` 0) and get their prefill rows at :meth:`accept`; a host write."""
        if self.ops != "upstream" or not len(slots):
            return
        slots = list(slots)
        mi = self.model_inputs
        host = mi["max_dec_len"].numpy()
        host[slots] = 0
        copy_from_host(mi["max_dec_len"], host)
        self._inserting.extend(slots)

    def _insert_prefill_inputs(self, s: Dict[str, paddle.Tensor]) -> None:
        """Upstream's ``insert_prefill_inputs`` for the slots reset this step, once the target has
        prefilled them: ``input_ids[b, :P - 1]`` = the prompt without its first token (the
        preprocess appends the target's first token), ``seq_lens_encoder = P``, the target's
        ``max_dec_len``. Host writes (a read of the prompts), as upstream's."""
        slots, self._inserting = self._inserting, []
        mi = self.model_inputs
        prompts, lens, max_dec = (
            s[n].numpy() for n in ("token_ids_all", "prompt_lens", "max_dec_len")
        )
        host = {
            n: mi[n].numpy()
            for n in ("input_ids", "seq_lens_encoder", "seq_lens_decoder", "max_dec_len")
        }
        for b in slots:
            P = int(lens[b].reshape(-1)[0])
            host["input_ids"][b, : P - 1] = prompts[b, 1:P]
            host["seq_lens_encoder"][b] = P
            host["seq_lens_decoder"][b] = 0
            host["max_dec_len"][b] = max_dec[b]
        for name, value in host.items():
            copy_from_host(mi[name], value)

    def accept(self, accept_tokens: paddle.Tensor, accept_num: paddle.Tensor) -> None:
        """Replace the last run's MTP drafts in ``pre_ids`` by the verified tokens: kept for the next
        :meth:`run`, which applies them first (``defer_accept``), or at once (one op).

        Parameters
        ----------
        accept_tokens : int64 [S, K + 1] Paddle tensor on the proposer's place
            Row b: the ``accept_num[b]`` tokens the target accepted (first token after prefill too).
        accept_num : int32 [S] Paddle tensor on the proposer's place
            Tokens accepted per slot; 0 only drops the drafts.
        """
        for name, t in (("accept_tokens", accept_tokens), ("accept_num", accept_num)):
            if not isinstance(t, paddle.Tensor):
                raise TypeError(
                    f"MTPProposer.accept: {name} must be a Paddle tensor on the proposer's "
                    f"place, got {type(t).__name__}"
                )
        if self.ops == "upstream":  # draft_model_preprocess reads them from the share-inputs
            if self._inserting and self.target_model_inputs is not None:
                self._insert_prefill_inputs(self.target_model_inputs)
        elif self.defer_accept:
            self._accepted = (accept_tokens, accept_num)
        else:
            draft_model_accept(
                accept_tokens, accept_num, self.step_idx, self.pre_ids, self.mtp_draft_num
            )

    def _run_impl(
        self,
        share_inputs: Dict[str, paddle.Tensor],
        hidden_states: Optional[paddle.Tensor] = None,
        **_: object,
    ) -> None:
        if self.ops == "upstream":
            self._run_upstream(share_inputs, hidden_states)
            return
        self._fused_prepare_inputs(share_inputs)
        self._fused_propose(share_inputs, hidden_states)
        if self.extend_with_ngram:
            self._extend_draft_token_with_ngram_match(share_inputs)

    # FastDeploy's MTPProposer._run_impl and MTPProposerCUDA's methods (fastdeploy/spec_decode/
    # mtp.py, mtp_cuda.py), name for name: the same ops on the same buffers, in the same order.
    def _run_upstream(
        self, share_inputs: Dict[str, paddle.Tensor], full_hidden_states: Optional[paddle.Tensor]
    ) -> None:
        self.target_model_inputs = share_inputs
        target_hidden_states = self._prepare_inputs(full_hidden_states)
        self._propose(target_hidden_states)
        self._update_status()
        if self.extend_with_ngram:
            self._extend_draft_token_with_ngram_match(share_inputs)

    def _prepare_inputs(
        self, full_hidden_states: Optional[paddle.Tensor]
    ) -> Optional[paddle.Tensor]:
        mi, t = self.model_inputs, self.target_model_inputs
        draft_model_preprocess(
            mi["draft_tokens"],
            mi["input_ids"],
            mi["stop_flags"],
            mi["seq_lens_this_time"],
            mi["seq_lens_encoder"],
            mi["seq_lens_decoder"],
            mi["step_idx"],
            mi["not_need_stop"],
            mi["pre_ids"],
            t["accept_tokens"],
            t["accept_num"],
            t["seq_lens_encoder"],
            t["seq_lens_decoder"],
            t["step_idx"],
            t["stop_flags"],
            mi["max_dec_len"],
            t["draft_tokens"],
            self.num_model_steps,
            False,  # is_splitwise_prefill: no prefill-only role here
        )
        if full_hidden_states is None:
            return None
        target_hidden_states, _ = eagle_get_hidden_states(
            full_hidden_states,
            mi["seq_lens_this_time"],
            mi["seq_lens_encoder"],
            mi["seq_lens_decoder"],
            mi["stop_flags"],
            t["accept_num"],
            t["seq_lens_this_time"],
            t["seq_lens_encoder"],
            self.num_model_steps,
        )
        return target_hidden_states

    def _propose(self, target_hidden_states: Optional[paddle.Tensor]) -> None:
        """num_model_steps x (draft model, sampler, draft_model_update)."""
        mi = self.model_inputs
        hidden = target_hidden_states
        for substep in range(self.num_model_steps):
            logits, hidden = self._draft_logits(self.draft_model(mi, hidden))
            cu, step_idx, seed, temperature, top_p, top_k = self._sampler
            speculate_sample_tokens(
                logits, cu, step_idx, seed, temperature, top_p, top_k, mi["sampled_token_ids"]
            )
            self._post_process(mi["sampled_token_ids"], substep)

    def _post_process(self, sampled_token_ids: paddle.Tensor, substep: int) -> None:
        mi = self.model_inputs
        draft_model_update(
            sampled_token_ids,
            mi["draft_tokens"],
            mi["pre_ids"],
            mi["seq_lens_this_time"],
            mi["seq_lens_encoder"],
            mi["seq_lens_decoder"],
            mi["step_idx"],
            mi["cu_seqlens_q_output"],
            mi["stop_flags"],
            mi["not_need_stop"],
            mi["max_dec_len"],
            mi["eos_token_id"],
            self.target_model_inputs["draft_tokens"],
            self.max_model_len,
            substep,
        )

    def _update_status(self) -> None:
        """The target's seq_lens_this_time for its next step (``mtp_step_paddle``, upstream's block
        allocation without its V1 KV-cache scheduler, has no counterpart: docs/contract/mtp_state.md)."""
        t = self.target_model_inputs
        draft_model_postprocess(
            t["draft_tokens"], t["seq_lens_this_time"], t["seq_lens_encoder"], t["stop_flags"]
        )

    @staticmethod
    def _draft_logits(out) -> tuple:
        logits, hidden = out if isinstance(out, tuple) else (out, None)
        if not isinstance(logits, paddle.Tensor):
            raise TypeError(
                f"the draft model must return its logits as a Paddle tensor on the "
                f"proposer's place, got {type(logits).__name__}"
            )
        return logits, hidden

    # The fused step: the same idea through our own ops, where the greedy choice sits inside
    # draft_model_greedy_update (docs/contract/draft_model.md).
    def _fused_prepare_inputs(self, s: Dict[str, paddle.Tensor]) -> None:
        """The draft side from the target's state (the last verification applied first when it was
        deferred)."""
        draft = (
            self.input_ids,
            self.seq_lens_decoder,
            self.step_idx,
            self.pre_ids,
            self.mtp_draft_num,
            self.max_dec_len,
        )
        base = (
            s["seq_lens_this_time"],
            s["seq_lens_encoder"],
            s["seq_lens_decoder"],
            s["stop_flags"],
            s["max_dec_len"],
        )
        if self._accepted is not None:
            draft_model_accept_preprocess(*draft, *self._accepted, *base)
            self._accepted = None
        else:
            draft_model_greedy_preprocess(*draft, *base)

    def _fused_propose(
        self, s: Dict[str, paddle.Tensor], hidden_states: Optional[paddle.Tensor]
    ) -> None:
        """num_model_steps x (draft model, greedy choice + draft_model_update's writes, fused)."""
        hidden = hidden_states
        for substep in range(self.num_model_steps):
            logits, hidden = self._draft_logits(self.draft_model(self.input_ids, hidden))
            draft_model_greedy_update(
                logits,
                self.input_ids,
                self.seq_lens_decoder,
                self.step_idx,
                self.pre_ids,
                self.mtp_draft_num,
                s["draft_tokens"],
                s["seq_lens_this_time"],
                substep,
            )

    def _draft_step_caps(self) -> Optional[paddle.Tensor]:
        """The draft-length policy's hook into the draft model's steps: None without a policy (or
        under ``pad_to_max``), else int32 [S] on the place, last step's k per slot, so that a slot
        drafts at substep j only while j <= caps[b] (k + 1 draft-model steps at most). Its consumer
        is the per-slot draft condition of the substep update (a ``draft_cap`` input of
        ``draft_model_greedy_update`` / ``draft_model_update``; not there yet: until then the policy
        cuts what the target verifies, not the draft model's steps)."""
        if self.draft_length_policy is None or self.pad_to_max:
            return None
        return self.draft_length_policy.draft_step_caps()

    def _extend_draft_token_with_ngram_match(self, s: Dict[str, paddle.Tensor]) -> None:
        extend_drafts_with_ngram(
            self.config,
            s,
            self.pre_ids,
            self.step_idx,
            self.seq_lens_decoder,
            self.max_dec_len,
            self.pad_to_max,
        )
