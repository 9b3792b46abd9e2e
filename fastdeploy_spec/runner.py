"""A small mirror of a FastDeploy-style model runner's speculative decode loop.

It drives the plugin the way a runner does: requests go into the share-inputs buffers
(``make_share_inputs``: upstream names, shapes and dtypes), and each decode step is

    proposer          ngram_match writes drafts into draft_tokens / seq_lens_this_time
    target model      scores, per slot, the last accepted token and the drafts
    verification      speculate_verify_greedy -> accept_tokens / accept_num
    update            speculate_step_update -> token_ids_all, step_idx, sequence lengths, stop flags

The proposer, verification and update run as plugin ops where the buffers live (CPU or GPU); no Paddle
kernel touches device data, only host<->device copies (``Tensor.copy_`` into the existing buffers and
``Tensor.numpy()``), so the loop also runs on a GPU for which the installed Paddle has no kernels.

The target model is any callable ``target(batch: VerifyBatch) -> int64 [S, K + 1]``: row b, column j is
its greedy token after input position j of slot b. It runs on the host here, and its tokens are copied
to the device once per step (one small host->device copy; a real model would leave its argmax on the
device, where ``speculate_verify_greedy`` reads it in place). ``OracleTarget`` is such a model that
knows each request's answer.

A slot's prompt is processed in one prefill step (no chunked prefill): the slot takes the target's
first token, then decodes. Host bookkeeping (which request sits in which slot) reads ``stop_flags``
once per step, as upstream's ``not_need_stop`` read does.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, Hashable, List, Optional, Sequence

import numpy as np
import paddle

from fastdeploy_spec.buffers import make_share_inputs, resolve_place
from fastdeploy_spec.config import SpecMethod, SpeculativeConfig
from fastdeploy_spec.ops import speculate_step_update, speculate_verify_greedy
from fastdeploy_spec.proposers import NgramProposer, Proposer

OP_NAMES = ("ngram_match", "speculate_verify_greedy", "speculate_step_update")


@dataclass(frozen=True)
class Request:
    """One generation request: prompt token ids and the most tokens it may generate."""

    request_id: Hashable
    prompt: Sequence[int]
    max_dec_len: int


@dataclass
class VerifyBatch:
    """What the target model is given in one step (host arrays, one row per slot).

    ``tokens[b, :num_tokens[b]]`` are the inputs to score for a decoding slot: column 0 the last
    accepted token, then the drafts. A prefill slot (``is_prefill``) scores its prompt and only
    column 0 of the result is used. Slots with ``request_ids[b] is None`` or ``num_tokens[b] == 0``
    are idle.
    """

    request_ids: List[Optional[Hashable]]
    tokens: np.ndarray       # int64 [S, K + 1]
    num_tokens: np.ndarray   # int32 [S]
    is_prefill: np.ndarray   # bool [S]
    step_idx: np.ndarray     # int64 [S]: tokens generated before this step


TargetModel = Callable[[VerifyBatch], np.ndarray]


@dataclass
class RunStats:
    """Counters of a run. Drafts count only decoding slot-steps; prefill steps are counted apart."""

    steps: int = 0                 # runner steps (one target-model call each)
    decode_slot_steps: int = 0     # (decoding slot, step) pairs
    prefill_slot_steps: int = 0
    drafts_proposed: int = 0
    drafts_accepted: int = 0
    tokens_generated: int = 0
    decode_tokens: int = 0         # tokens gained by decoding slot-steps
    op_seconds: Dict[str, float] = field(default_factory=lambda: dict.fromkeys(OP_NAMES, 0.0))

    @property
    def acceptance_rate(self) -> float:
        return self.drafts_accepted / self.drafts_proposed if self.drafts_proposed else 0.0

    @property
    def tokens_per_decode_step(self) -> float:
        """Mean tokens a decoding slot gains per step (1.0 for plain decoding)."""
        return self.decode_tokens / self.decode_slot_steps if self.decode_slot_steps else 0.0

    @property
    def op_seconds_per_step(self) -> float:
        return sum(self.op_seconds.values()) / self.steps if self.steps else 0.0


class OracleTarget:
    """A target model whose greedy output for each request is known in advance.

    At input position j of a slot it returns the request's next token if every input so far is the
    request's own output (column 0 the last accepted token, then the drafts), and otherwise a
    deterministic unrelated token, as a real model conditioned on a wrong draft would: a verifier that
    accepted past a rejected draft would then corrupt the output. After its last token the oracle
    emits ``end_token``.
    """

    def __init__(self, outputs: Dict[Hashable, Sequence[int]], vocab_size: int, end_token: int) -> None:
        self.outputs = {k: np.asarray(v, np.int64) for k, v in outputs.items()}
        self.vocab_size = int(vocab_size)
        self.end_token = int(end_token)

    def _token(self, out: np.ndarray, i: int) -> int:
        return int(out[i]) if i < len(out) else self.end_token

    def __call__(self, batch: VerifyBatch) -> np.ndarray:
        result = np.full(batch.tokens.shape, -1, np.int64)
        width = batch.tokens.shape[1]
        for b, rid in enumerate(batch.request_ids):
            n = min(int(batch.num_tokens[b]), width)
            if rid is None or n <= 0:
                continue
            out, s = self.outputs[rid], int(batch.step_idx[b])
            if batch.is_prefill[b]:
                result[b, 0] = self._token(out, 0)
                continue
            on_track = True
            for j in range(n):
                on_track = on_track and int(batch.tokens[b, j]) == self._token(out, s + j - 1)
                result[b, j] = self._token(out, s + j) if on_track else \
                    (s * 1000003 + j * 7919 + 17) % self.vocab_size
        return result


class SpecRunner:
    """Runs requests through the speculative decode loop on the plugin's ops.

    Parameters
    ----------
    config : SpeculativeConfig
        Method (``naive``: no drafts, ``ngram``; ``mtp`` needs ``proposer``) and K.
    target_model : callable
        ``target_model(VerifyBatch) -> int64 [S, K + 1]`` (see ``VerifyBatch``).
    max_num_seqs, max_model_len : int
        S slots; W, the width of ``token_ids_all`` (prompt plus output of a slot).
    end_tokens : sequence of int
        Tokens that end a request.
    place : 'cpu', 'gpu' or a Paddle place
        Where the buffers live and the ops run.
    proposer : Proposer, optional
        Overrides the proposer built from ``config`` (how an MTP proposer is plugged in).
    logprobs : bool
        Hook for the logprob path, not wired yet: it will run, between verification and update,
        ``speculate_get_accept_tokens_and_logits`` (accepted tokens' logits rows, from the target's
        logits and ``accept_num``), ``speculate_logprobs_topk`` / ``build_output_logprobs`` (their
        top-k logprobs) and ``speculate_save_output_topk`` (send them to the token processor). It
        needs a target model that returns logits, which ``VerifyBatch`` callables do not yet.
    timing : bool
        Accumulate the wall time of each plugin op in ``stats.op_seconds`` (synchronising the device
        around the ops on a GPU).

    Examples
    --------
    >>> from fastdeploy_spec.config import SpeculativeConfig
    >>> from fastdeploy_spec.runner import OracleTarget, Request, SpecRunner
    >>> cfg = SpeculativeConfig(method="ngram", num_speculative_tokens=3, max_ngram_size=2)
    >>> answer = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    >>> runner = SpecRunner(cfg, OracleTarget({"a": answer}, vocab_size=8, end_token=0),
    ...                     max_num_seqs=2, max_model_len=64, end_tokens=[0])
    >>> out = runner.run([Request("a", prompt=[5, 1, 2, 3, 4], max_dec_len=32)])
    >>> out["a"] == answer + [0], runner.stats.steps < len(answer) + 1
    (True, True)
    """

    def __init__(self, config: SpeculativeConfig, target_model: TargetModel, *, max_num_seqs: int,
                 max_model_len: int, end_tokens: Sequence[int], place="cpu",
                 proposer: Optional[Proposer] = None, logprobs: bool = False,
                 timing: bool = False) -> None:
        if logprobs:
            raise NotImplementedError(
                "logprobs: the logprob path (speculate_get_accept_tokens_and_logits, "
                "speculate_logprobs_topk, speculate_save_output_topk) is not wired into the runner yet")
        self.config = config
        self.target_model = target_model
        self.place = resolve_place(place)
        self.on_gpu = not isinstance(self.place, paddle.CPUPlace)
        self.timing = timing
        self.proposer = proposer if proposer is not None else self._default_proposer(config)
        self.buffers = make_share_inputs(max_num_seqs, max_model_len, config, self.place)
        self.buffers["target_tokens"] = self._device(
            np.full((max_num_seqs, config.draft_width), -1, np.int64))
        self.buffers["end_tokens"] = self._device(np.asarray(list(end_tokens), np.int64))
        self.max_model_len = max_model_len
        self.slots: List[Optional[Request]] = [None] * max_num_seqs
        self.pending: Deque[Request] = collections.deque()
        self.outputs: Dict[Hashable, List[int]] = {}
        self.stats = RunStats()

    @staticmethod
    def _default_proposer(config: SpeculativeConfig) -> Optional[Proposer]:
        if config.method == SpecMethod.NAIVE or config.num_speculative_tokens == 0:
            return None
        if config.method == SpecMethod.NGRAM:
            return NgramProposer(config)
        raise NotImplementedError(f"method {config.method.value!r}: pass its proposer to SpecRunner")

    # Host <-> device. Only copies: Tensor.copy_ is a memcpy into the existing allocation (a captured
    # CUDA graph keeps seeing the same buffers), Tensor.numpy() a copy back.
    def _device(self, host: np.ndarray) -> paddle.Tensor:
        return paddle.to_tensor(np.ascontiguousarray(host), place=self.place)

    def _write(self, name: str, host: np.ndarray) -> None:
        src = paddle.to_tensor(np.ascontiguousarray(host), place=paddle.CPUPlace())
        self.buffers[name].copy_(src, True)

    def _read(self, name: str) -> np.ndarray:
        return self.buffers[name].numpy()

    # Requests.
    def add_request(self, request: Request) -> None:
        prompt_len = len(request.prompt)
        if not 0 < prompt_len < self.max_model_len:
            raise ValueError(f"request {request.request_id!r}: prompt length {prompt_len} must be in "
                             f"[1, {self.max_model_len - 1}] (max_model_len {self.max_model_len})")
        self.pending.append(request)

    def has_work(self) -> bool:
        return bool(self.pending) or any(r is not None for r in self.slots)

    def _insert_pending(self) -> None:
        """Puts pending requests into free slots: prompt row, lengths, a cleared stop flag."""
        free = [b for b, r in enumerate(self.slots) if r is None]
        if not free or not self.pending:
            return
        names = ("token_ids_all", "prompt_lens", "step_idx", "max_dec_len", "seq_lens_this_time",
                 "seq_lens_encoder", "seq_lens_decoder", "stop_flags")
        host = {n: self._read(n) for n in names}
        for b in free:
            if not self.pending:
                break
            req = self.pending.popleft()
            P = len(req.prompt)
            host["token_ids_all"][b] = -1
            host["token_ids_all"][b, :P] = req.prompt
            host["prompt_lens"][b] = P
            host["step_idx"][b] = 0
            host["max_dec_len"][b] = req.max_dec_len
            host["seq_lens_this_time"][b] = P
            host["seq_lens_encoder"][b] = P
            host["seq_lens_decoder"][b] = 0
            host["stop_flags"][b] = False
            self.slots[b] = req
        for n in names:
            self._write(n, host[n])

    # The decode step.
    def _sync(self) -> None:
        if self.timing and self.on_gpu:
            paddle.device.cuda.synchronize()

    def _timed(self, name: str, fn: Callable[[], None]) -> None:
        if not self.timing:
            fn()
            return
        self._sync()
        t0 = time.perf_counter()
        fn()
        self._sync()
        self.stats.op_seconds[name] += time.perf_counter() - t0

    def step(self) -> List[Hashable]:
        """Runs one decode step; returns the ids of the requests that finished in it."""
        self._insert_pending()
        s = self.buffers
        if self.proposer is not None:
            self._timed("ngram_match", lambda: self.proposer.run(share_inputs=s))

        batch = VerifyBatch(
            request_ids=[r.request_id if r is not None else None for r in self.slots],
            tokens=self._read("draft_tokens"),
            num_tokens=self._read("seq_lens_this_time"),
            is_prefill=self._read("seq_lens_encoder") > 0,
            step_idx=self._read("step_idx").reshape(-1),
        )
        self._write("target_tokens", np.asarray(self.target_model(batch), np.int64))

        self._timed("speculate_verify_greedy", lambda: speculate_verify_greedy(
            s["target_tokens"], s["accept_tokens"], s["accept_num"], s["step_idx"], s["stop_flags"],
            s["seq_lens_encoder"], s["seq_lens_decoder"], s["draft_tokens"], s["seq_lens_this_time"],
            s["max_dec_len"], s["end_tokens"]))
        # The logprob path (see `logprobs`) goes here: it reads accept_tokens / accept_num before the
        # update moves the slots on.
        self._timed("speculate_step_update", lambda: speculate_step_update(
            s["accept_tokens"], s["accept_num"], s["token_ids_all"], s["prompt_lens"], s["step_idx"],
            s["max_dec_len"], s["end_tokens"], s["stop_flags"], s["seq_lens_this_time"],
            s["seq_lens_encoder"], s["seq_lens_decoder"], s["draft_tokens"]))
        return self._account(batch)

    def _account(self, batch: VerifyBatch) -> List[Hashable]:
        """Updates the counters and frees the slots whose request finished."""
        accept_num = self._read("accept_num")
        stop = self._read("stop_flags").reshape(-1)
        st = self.stats
        st.steps += 1
        for b, req in enumerate(self.slots):
            if req is None or batch.num_tokens[b] <= 0:
                continue
            st.tokens_generated += int(accept_num[b])
            if batch.is_prefill[b]:
                st.prefill_slot_steps += 1
            else:
                st.decode_slot_steps += 1
                st.decode_tokens += int(accept_num[b])
                st.drafts_proposed += int(batch.num_tokens[b]) - 1
                st.drafts_accepted += max(int(accept_num[b]) - 1, 0)
        finished = []
        if stop.any():
            ids, prompt_lens, step_idx = (self._read(n) for n in ("token_ids_all", "prompt_lens", "step_idx"))
            for b, req in enumerate(self.slots):
                if req is None or not stop[b]:
                    continue
                P, n = int(prompt_lens[b, 0]), int(step_idx[b, 0])
                self.outputs[req.request_id] = ids[b, P:P + n].tolist()
                self.slots[b] = None
                finished.append(req.request_id)
        return finished

    def run(self, requests: Sequence[Request] = (), progress: Optional[Callable[[int], None]] = None
            ) -> Dict[Hashable, List[int]]:
        """Adds ``requests`` and steps until every request has finished; returns the outputs by id.

        ``progress(k)`` is called after each step with the number of requests that finished in it.
        """
        for r in requests:
            self.add_request(r)
        while self.has_work():
            done = self.step()
            if progress is not None:
                progress(len(done))
        return self.outputs
