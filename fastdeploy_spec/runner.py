"""A small mirror of a FastDeploy-style model runner's speculative decode loop.

It drives the plugin the way a runner does: requests go into the share-inputs buffers
(``make_share_inputs``: upstream names, shapes and dtypes), and each decode step is

    proposer          ngram_match (or the MTP proposer) writes drafts into draft_tokens /
                      seq_lens_this_time
    target model      scores, per slot, the last accepted token and the drafts
    verification      speculate_verify_greedy -> accept_tokens / accept_num (then the proposer's
                      ``accept`` hook: the MTP proposer keeps its own history)
    logprobs          (optional) speculate_get_accept_tokens_and_logits + speculate_logprobs_topk
                      (``build_output_logprobs``): the accepted tokens' logprobs, ranks and top-k
    update            speculate_step_update -> token_ids_all, step_idx, sequence lengths, stop flags
    send              (optional) speculate_save_output_topk: the step's message to the token
                      processor, a second process (``fastdeploy_spec.token_processor``)

The proposer, verification and update run as plugin ops where the buffers live (CPU or GPU); no Paddle
kernel touches device data, only host<->device copies (``Tensor.copy_`` into the existing buffers and
``Tensor.numpy()``), so the loop also runs on a GPU for which the installed Paddle has no kernels.

The target model is any callable ``target(batch: VerifyBatch) -> int64 [S, K + 1]``: row b, column j is
its greedy token after input position j of slot b. It runs on the host here, and its tokens are copied
to the device once per step (one small host->device copy; a real model would leave its argmax on the
device, where ``speculate_verify_greedy`` reads it in place). ``OracleTarget`` is such a model that
knows each request's answer. For logprobs the target also gives its logits rows
(``target.logits(batch, tokens)``, rows packed as ``VerifyBatch.output_rows`` says), copied to the
device in one padded [S * (K + 1), V] buffer.

A slot's prompt is processed in one prefill step (no chunked prefill): the slot takes the target's
first token, then decodes. Host bookkeeping (which request sits in which slot) reads ``stop_flags``
once per step, as upstream's ``not_need_stop`` read does.
"""

from __future__ import annotations

import collections
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np
import paddle

from fastdeploy_spec.buffers import copy_from_host, make_share_inputs, resolve_place
from fastdeploy_spec.config import SpecMethod, SpeculativeConfig
from fastdeploy_spec.logprobs import MAX_NUM_LOGPROBS, LogprobsBuffers, build_output_logprobs
from fastdeploy_spec.msg_queue import layout
from fastdeploy_spec.ops import speculate_save_output_topk, speculate_step_update, speculate_verify_greedy
from fastdeploy_spec.output import LogprobMessage
from fastdeploy_spec.proposers import NgramProposer, Proposer, SuffixProposer
from fastdeploy_spec.stats import AcceptanceStats
from fastdeploy_spec.token_processor import LogprobReceiver, free_queue_id, queue_env

# Timed phases of a step: the proposer (the ngram_match op; for MTP also the draft model and its host
# bookkeeping), the two verification ops, and on the logprob path the two logprob ops
# (build_output_logprobs) and the send.
OP_NAMES = ("proposer", "speculate_verify_greedy", "speculate_step_update")
LOGPROB_OP_NAMES = ("build_output_logprobs", "speculate_save_output_topk")
MESSAGE_FLAG_TARGET = 3  # speculate_save_output_topk's message_flag of target-model tokens (upstream)


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

    def output_rows(self) -> np.ndarray:
        """int32 [S]: logits rows of each slot, packed slot after slot in the target's logits: one for
        a prefill slot (after its last prompt token), ``num_tokens`` for a decoding slot, 0 if idle."""
        busy = np.array([r is not None for r in self.request_ids], bool) & (self.num_tokens > 0)
        rows = np.where(self.is_prefill, 1, np.minimum(self.num_tokens, self.tokens.shape[1]))
        return np.where(busy, rows, 0).astype(np.int32)


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
    logprob_messages_sent: int = 0
    logprob_messages_received: int = 0
    logprob_tokens_received: int = 0   # accepted tokens that arrived with their logprob row
    logprob_tokens_verified: int = 0   # ... whose row equals, bit for bit, what the device computed
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


# Below this vocabulary size oracle_logits' hash is injective in the token id (a prime modulus).
ORACLE_HASH_MODULUS = 65521


def oracle_logits(tokens: np.ndarray, positions: np.ndarray, vocab_size: int) -> np.ndarray:
    """The oracle's logits: float32 [R, V], row r peaked at ``tokens[r]`` (its unique argmax).

    Entry v of row r is ``u = ((v * 40503 + positions[r] * 7919) mod 65521) / 65521`` in [0, 1), a
    pseudo-random spread without ties (injective in v for V <= 65521, so ranks and top-k are well
    defined), except at the row's token, which gets ``1 + ln V``: that token holds about
    ``e / (2e - 1)`` = 61 % of the probability, the rest is spread over the vocabulary. Deterministic
    in (token, position), so a test recomputes any row.
    """
    if not 0 < vocab_size <= ORACLE_HASH_MODULUS:
        raise ValueError(f"vocab_size must be in [1, {ORACLE_HASH_MODULUS}], got {vocab_size}")
    tokens = np.asarray(tokens, np.int64).reshape(-1)
    positions = np.asarray(positions, np.int64).reshape(-1)
    v = np.arange(vocab_size, dtype=np.int64)
    u = (v[None, :] * 40503 + positions[:, None] * 7919) % ORACLE_HASH_MODULUS
    logits = (u / ORACLE_HASH_MODULUS).astype(np.float32)
    logits[np.arange(len(tokens)), tokens] = np.float32(1.0 + math.log(vocab_size))
    return logits


class OracleTarget:
    """A target model whose greedy output for each request is known in advance.

    At input position j of a slot it returns the request's next token if every input so far is the
    request's own output (column 0 the last accepted token, then the drafts), and otherwise a
    deterministic unrelated token, as a real model conditioned on a wrong draft would: a verifier that
    accepted past a rejected draft would then corrupt the output. After its last token the oracle
    emits ``end_token``. Its logits (``logits``) are ``oracle_logits`` of its tokens: the greedy
    token of every row is the argmax.
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

    def logits(self, batch: VerifyBatch, tokens: np.ndarray) -> np.ndarray:
        """float32 [R, V]: the logits rows of ``batch`` (``batch.output_rows()`` per slot, packed),
        given ``tokens = self(batch)``; the row of input position j of slot b generates token
        ``step_idx[b] + j`` of its request."""
        rows = batch.output_rows()
        slot = np.repeat(np.arange(len(rows)), rows)
        col = np.arange(int(rows.sum())) - np.repeat(np.cumsum(rows) - rows, rows)
        return oracle_logits(tokens[slot, col], batch.step_idx[slot] + col, self.vocab_size)


class SpecRunner:
    """Runs requests through the speculative decode loop on the plugin's ops.

    Parameters
    ----------
    config : SpeculativeConfig
        Method (``naive``: no drafts, ``ngram``, ``suffix``; ``mtp`` needs ``proposer``) and K.
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
    logprobs : int, optional
        k (0 .. 20) turns the logprob path on. Every step, between verification and update,
        ``build_output_logprobs`` (``speculate_get_accept_tokens_and_logits`` then
        ``speculate_logprobs_topk``) computes each accepted token's logprob, rank and top-k from the
        target's logits; after the update ``speculate_save_output_topk`` sends them to a token
        processor in a second process (``LogprobReceiver``, on a free queue id of its own that
        :meth:`close` removes). Each message that comes back is checked against what the device
        computed, and the tokens' logprobs are kept in ``self.logprobs`` (request id -> list of
        ``TokenLogprob``). Needs ``target_model.logits`` and ``target_model.vocab_size`` (as
        ``OracleTarget`` has) and K + 1 <= 6 (a message carries at most 6 tokens per slot).
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
                 proposer: Optional[Proposer] = None, logprobs: Optional[int] = None,
                 timing: bool = False) -> None:
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
        self.acceptance = AcceptanceStats(config.num_speculative_tokens)  # per request
        self.logprobs: Dict[Hashable, List[TokenLogprob]] = {}
        self._logprob_path = None if logprobs is None else _LogprobPath(self, int(logprobs))
        if self._logprob_path is not None:
            self.stats.op_seconds.update(dict.fromkeys(LOGPROB_OP_NAMES, 0.0))

    @staticmethod
    def _default_proposer(config: SpeculativeConfig) -> Optional[Proposer]:
        if config.method == SpecMethod.NAIVE or config.num_speculative_tokens == 0:
            return None
        if config.method == SpecMethod.NGRAM:
            return NgramProposer(config)
        if config.method == SpecMethod.SUFFIX:
            return SuffixProposer(config)
        raise NotImplementedError(f"method {config.method.value!r}: pass its proposer to SpecRunner")

    # Host <-> device. Only copies: copy_from_host is a memcpy into the existing allocation (a captured
    # CUDA graph keeps seeing the same buffers), Tensor.numpy() a copy back.
    def _device(self, host: np.ndarray) -> paddle.Tensor:
        return paddle.to_tensor(np.ascontiguousarray(host), place=self.place)

    def _write(self, name: str, host: np.ndarray) -> None:
        copy_from_host(self.buffers[name], host)

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
        free = free[:len(self.pending)]
        if self.proposer is not None:
            self.proposer.reset(free)
        names = ("token_ids_all", "prompt_lens", "step_idx", "max_dec_len", "seq_lens_this_time",
                 "seq_lens_encoder", "seq_lens_decoder", "stop_flags")
        host = {n: self._read(n) for n in names}
        for b in free:
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
        s, lp = self.buffers, self._logprob_path
        if self.proposer is not None:
            self._timed("proposer", lambda: self.proposer.run(share_inputs=s))

        batch = VerifyBatch(
            request_ids=[r.request_id if r is not None else None for r in self.slots],
            tokens=self._read("draft_tokens"),
            num_tokens=self._read("seq_lens_this_time"),
            is_prefill=self._read("seq_lens_encoder") > 0,
            step_idx=self._read("step_idx").reshape(-1),
        )
        target_tokens = np.asarray(self.target_model(batch), np.int64)
        self._write("target_tokens", target_tokens)
        if lp is not None:
            lp.write_logits(batch, target_tokens)

        self._timed("speculate_verify_greedy", lambda: speculate_verify_greedy(
            s["target_tokens"], s["accept_tokens"], s["accept_num"], s["step_idx"], s["stop_flags"],
            s["seq_lens_encoder"], s["seq_lens_decoder"], s["draft_tokens"], s["seq_lens_this_time"],
            s["max_dec_len"], s["end_tokens"]))
        if self.proposer is not None:
            self._timed("proposer", lambda: self.proposer.accept(s["accept_tokens"], s["accept_num"]))
        # The logprob ops read accept_tokens / accept_num and the step's sequence lengths: before the
        # update moves the slots on.
        if lp is not None:
            self._timed("build_output_logprobs", lp.compute)
        self._timed("speculate_step_update", lambda: speculate_step_update(
            s["accept_tokens"], s["accept_num"], s["token_ids_all"], s["prompt_lens"], s["step_idx"],
            s["max_dec_len"], s["end_tokens"], s["stop_flags"], s["seq_lens_this_time"],
            s["seq_lens_encoder"], s["seq_lens_decoder"], s["draft_tokens"]))
        finished = self._account(batch)
        if lp is not None:
            lp.send(batch.request_ids, not_need_stop=self.has_work())
        return finished

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
                self.acceptance.record(req.request_id, int(batch.num_tokens[b]) - 1,
                                       max(int(accept_num[b]) - 1, 0))
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
        self.drain_logprobs()
        return self.outputs

    def drain_logprobs(self, timeout_s: float = 60.0) -> None:
        """Waits until every logprob message sent has come back and been checked (logprob path)."""
        if self._logprob_path is not None:
            self._logprob_path.receive(wait=True, timeout_s=timeout_s)

    def close(self) -> None:
        """Ends the logprob receiver and removes its queue (nothing to do without logprobs)."""
        if self._logprob_path is not None:
            self._logprob_path.close()

    def __enter__(self) -> "SpecRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class TokenLogprob:
    """An accepted token as the token processor received it."""

    token: int
    logprob: float
    rank: int                   # 1: the target's greedy choice
    topk_token_ids: List[int]   # the k best tokens, best first
    topk_logprobs: List[float]


class _LogprobPath:
    """The logprob buffers of a runner, the send, and the check of what the receiver got.

    Every buffer is allocated once, on the runner's place, for all S slots (N = S * (K + 1) rows): the
    ops run on fixed shapes, as under a captured CUDA graph. The check reads the computed rows back to
    the host after each send (a test-and-demo cost; a server's worker would not).
    """

    def __init__(self, runner: "SpecRunner", k: int) -> None:
        if not 0 <= k <= MAX_NUM_LOGPROBS:
            raise ValueError(f"logprobs must be in [0, {MAX_NUM_LOGPROBS}], got {k}")
        K1, per_message = runner.config.draft_width, layout().max_draft_tokens
        if K1 > per_message:
            raise ValueError(f"logprobs: a step accepts up to K + 1 = {K1} tokens per slot, a logprob "
                             f"message carries at most {per_message}: use K <= {per_message - 1}")
        target = runner.target_model
        if not (callable(getattr(target, "logits", None)) and hasattr(target, "vocab_size")):
            raise TypeError("logprobs: the target model must give its logits rows, "
                            "target.logits(batch, tokens) -> float32 [R, V], and target.vocab_size")
        self.runner, self.k = runner, k
        S = len(runner.slots)
        self.vocab_size = int(target.vocab_size)
        self.logits_host = np.zeros((S * K1, self.vocab_size), np.float32)
        self.logits = runner._device(self.logits_host)
        self.buffers = LogprobsBuffers.allocate(S, K1 - 1, self.vocab_size, k, place=runner.place)
        self.not_need_stop = runner._device(np.ones(1, np.bool_))
        # This runner has no chunked prefill: a prompt is done in its one prefill step, so the send's
        # chunked-prefill rule (count 0 while seq_lens_decoder < prompt_lens) must never fire. After
        # the update a finished slot's seq_lens_decoder is 0: with its real prompt length it would
        # lose its last tokens. Hence zero prompt lengths.
        self.no_prompt = runner._device(np.zeros((S, 1), np.int64))
        self.sent: Deque[Tuple[List[Optional[Hashable]], Dict[str, np.ndarray]]] = collections.deque()
        self.receiver = LogprobReceiver(free_queue_id())

    def write_logits(self, batch: VerifyBatch, tokens: np.ndarray) -> None:
        """Copies the target's logits rows (padded to N) and their offsets to the device."""
        rows = batch.output_rows()
        cu = np.zeros(len(rows) + 1, np.int32)
        np.cumsum(rows, out=cu[1:])
        logits = np.asarray(self.runner.target_model.logits(batch, tokens), np.float32)
        if logits.shape != (int(cu[-1]), self.vocab_size):
            raise ValueError(f"target.logits gave shape {logits.shape}, expected "
                             f"({int(cu[-1])}, {self.vocab_size})")
        self.logits_host[:len(logits)] = logits
        self.logits_host[len(logits):] = 0
        copy_from_host(self.logits, self.logits_host)
        self.runner._write("cu_seqlens_q_output", cu)

    def compute(self) -> None:
        s = self.runner.buffers
        build_output_logprobs(self.logits, s["accept_tokens"], s["accept_num"], s["seq_lens_this_time"],
                              s["seq_lens_encoder"], s["cu_seqlens_q_output"], self.k,
                              buffers=self.buffers)

    def send(self, request_ids: List[Optional[Hashable]], not_need_stop: bool) -> None:
        runner, s, lb = self.runner, self.runner.buffers, self.buffers
        copy_from_host(self.not_need_stop, np.array([not_need_stop]))
        with queue_env(self.receiver.queue_id):
            runner._timed("speculate_save_output_topk", lambda: speculate_save_output_topk(
                lb.token_ids, lb.logprob_token_ids, lb.logprob_scores, lb.logprob_ranks,
                s["accept_num"], lb.cu_batch_token_offset, self.not_need_stop, s["seq_lens_decoder"],
                self.no_prompt, MESSAGE_FLAG_TARGET, 0))
        runner.stats.logprob_messages_sent += 1
        self.sent.append((request_ids, dict(
            num=runner._read("accept_num"), cu=lb.cu_batch_token_offset.numpy(),
            ids=lb.logprob_token_ids.numpy(), scores=lb.logprob_scores.numpy(),
            ranks=lb.logprob_ranks.numpy(), not_need_stop=np.array(not_need_stop))))
        self.receive(wait=False)

    def receive(self, wait: bool, timeout_s: float = 60.0) -> None:
        """Takes the messages that arrived (with ``wait``: all sent) and checks each against its step."""
        for message in self.receiver.take(len(self.sent) if wait else None, timeout_s):
            request_ids, want = self.sent.popleft()
            self._check(message, request_ids, want)

    def _check(self, message: LogprobMessage, request_ids: List[Optional[Hashable]],
               want: Dict[str, np.ndarray]) -> None:
        st = self.runner.stats
        st.logprob_messages_received += 1
        where = f"logprob message {st.logprob_messages_received}"
        header = (message.kind, message.batch, message.topk_columns, message.not_need_stop)
        if header != ("target", len(request_ids), self.k + 1, bool(want["not_need_stop"])):
            raise RuntimeError(f"{where}: header (kind, batch, columns, not_need_stop) = {header}, "
                               f"not what was sent")
        for b, rid in enumerate(request_ids):
            got, n, r0 = message.slots[b], int(want["num"][b]), int(want["cu"][b])
            if got.count != n or (rid is None and n):
                raise RuntimeError(f"{where}, slot {b}: {got.count} tokens arrived, {n} were accepted")
            st.logprob_tokens_received += n
            rows = slice(r0, r0 + n)
            # Bit equality: the transport must deliver every float32 exactly.
            scores = np.asarray(got.topk_logprobs, np.float32).reshape(n, self.k + 1)
            if not (got.topk_token_ids == want["ids"][rows].tolist()
                    and np.array_equal(scores.view(np.int32), want["scores"][rows].view(np.int32))
                    and got.ranks == want["ranks"][rows].tolist()):
                raise RuntimeError(f"{where}, slot {b} (request {rid!r}): the rows received differ "
                                   f"from the rows computed")
            st.logprob_tokens_verified += n
            if n:
                self.runner.logprobs.setdefault(rid, []).extend(
                    TokenLogprob(ids[0], lps[0], rank, ids[1:], lps[1:])
                    for ids, lps, rank in zip(got.topk_token_ids, got.topk_logprobs, got.ranks))

    def close(self) -> None:
        self.receiver.close()
