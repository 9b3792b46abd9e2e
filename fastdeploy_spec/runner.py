"""The reference loop: a small mirror of a FastDeploy-style model runner's speculative decode step.

Not a serving engine: it shows, one readable step at a time, how a runner calls the plugin's ops, and
the tests, the demo and the benchmarks drive the ops through it. It drives the plugin the way a runner does: requests go into the share-inputs buffers
(``make_share_inputs``: upstream names, shapes and dtypes), and :meth:`SpecRunner.step` is

    schedule          the slots whose request finished at the previous step are released (lengths
                      0, as upstream's step op recycles them); pending requests take free slots
                      (prompt row, lengths, cleared stop flag)
    propose           the proposer (``create_proposer``: ngram_match, or the MTP proposer) writes
                      drafts into draft_tokens / seq_lens_this_time
    score             the target model scores, per slot, the last accepted token and the drafts
    sample            (sampled requests) speculate_sample_tokens: the target's token at every row
                      from its logits, with each request's temperature / top-k / top-p / min-p and
                      seed, drawn for the output position (docs/contract/sampling.md)
    verify            verify_draft_tokens (TARGET_MATCH by default; GREEDY, TOPP selectable; plain
                      decoding: naive_update_model_status) -> accept_tokens / accept_num, then the
                      proposer's ``accept`` hook (the MTP proposer keeps its own history)
    logprobs          (optional) build_output_logprobs (speculate_get_accept_tokens_and_logits +
                      speculate_logprobs_topk): the accepted tokens' logprobs, ranks and top-k
    update            unified_update_model_status -> token_ids_all, step_idx, sequence lengths, stop
                      flags, has_running_seqs
    record            host bookkeeping: the step's ``StepRecord``, counters, finished requests
    send              (optional) speculate_save_output_topk: the step's message to the token
                      processor, a second process (``fastdeploy_spec.transport.LogprobReceiver``)

Each phase is one method call in :meth:`SpecRunner.step`, in this order, timed by
``OpTimer`` when ``timing`` is on. The verify and update phases are FastDeploy's own step ops, so the
loop is FastDeploy's: proposer -> target -> sampler -> verify_draft_tokens ->
unified_update_model_status. Greedy requests (temperature 0) take the target's argmax; once a sampled
request is added (and the target gives logits), every row goes through the sampler op, whose
temperature-0 rows are the argmax too. With TARGET_MATCH a seeded request's output is the same token
for token as plain decoding's, with any proposer, in any slot and batch.

The proposer, verification and update run as plugin ops where the buffers live (CPU or GPU); no Paddle
kernel touches device data, only host<->device copies (``copy_from_host`` into the existing buffers and
``Tensor.numpy()``), so the loop also runs on a GPU for which the installed Paddle has no kernels.

The target model is any callable ``target(batch: VerifyBatch) -> int64 [S, K + 1]``: row b, column j is
its greedy token after input position j of slot b. It runs on the host here; its tokens are packed slot
after slot (``VerifyBatch.output_rows``, the layout of ``cu_seqlens_q_output``) and copied to the device
once per step with those offsets (a real model would leave its argmax on the device, where
``verify_draft_tokens`` reads it in place). For logprobs the target also gives its
logits rows (``target.logits(batch, tokens)``, rows packed as ``VerifyBatch.output_rows`` says), copied
to the device in one padded [S * (K + 1), V] buffer. (``examples.OracleTarget`` is such
a model, for tests and the demo.)

A slot's prompt is processed in one prefill step (no chunked prefill): the slot takes the target's
first token, then decodes. A request's ``max_dec_len`` is capped at the room its row has
(``max_model_len - prompt length``), so it ends by FastDeploy's length rule (its last token becomes
``end_tokens[0]``) rather than writing past the row. Host bookkeeping (which request sits in which
slot) reads ``accept_num``, ``stop_flags`` and the update's ``has_running_seqs`` once per step, as
upstream's ``not_need_stop`` read does. Every step produces a
``StepRecord``; observers (``SpecRunner.observers``) receive it, and each logprob message with the
record of the step that sent it.
"""

from __future__ import annotations

import collections
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, Hashable, Iterator, List, Optional, Sequence

import numpy as np
import paddle

from fastdeploy_spec.buffers import copy_from_host, make_share_inputs, resolve_place
from fastdeploy_spec.config import SpecMethod, SpeculativeConfig
from fastdeploy_spec.logprobs import LogprobsBuffers, build_output_logprobs, max_num_logprobs
from fastdeploy_spec.ops import (
    VerifyStrategy,
    naive_update_model_status,
    speculate_sample_tokens,
    speculate_save_output_topk,
    top_p_candidates,
    unified_update_model_status,
    verify_draft_tokens,
)
from fastdeploy_spec.proposers import Proposer, create_proposer
from fastdeploy_spec.stats import AcceptanceStats
from fastdeploy_spec.transport import (
    LogprobMessage,
    LogprobReceiver,
    free_queue_id,
    layout,
    queue_env,
)

# Timed phases of a step: the proposer (the ngram_match op; for MTP also the draft model and its host
# bookkeeping), verification (verify_draft_tokens, or naive_update_model_status without drafts) and
# the update, and on the logprob path the two logprob ops (build_output_logprobs) and the send.
OP_NAMES = ("proposer", "verify_draft_tokens", "unified_update_model_status")
LOGPROB_OP_NAMES = ("build_output_logprobs", "speculate_save_output_topk")


@dataclass(frozen=True)
class Request:
    """One generation request: prompt token ids and the most tokens it may generate."""

    request_id: Hashable
    prompt: Sequence[int]
    max_dec_len: int
    temperature: float = 0.0  # below 1e-5: greedy
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k
    min_p: float = 0.0
    seed: Optional[int] = None  # None: the runner's generator gives one


@dataclass
class VerifyBatch:
    """What the target model is given in one step (host arrays, one row per slot).

    ``tokens[b, :num_tokens[b]]`` are the inputs to score for a decoding slot: column 0 the last
    accepted token, then the drafts. A prefill slot (``is_prefill``) scores its prompt and only
    column 0 of the result is used. Slots with ``request_ids[b] is None`` or ``num_tokens[b] == 0``
    are idle.
    """

    request_ids: List[Optional[Hashable]]
    tokens: np.ndarray  # int64 [S, K + 1]
    num_tokens: np.ndarray  # int32 [S]
    is_prefill: np.ndarray  # bool [S]
    step_idx: np.ndarray  # int64 [S]: tokens generated before this step
    # For targets that set ``needs_prefix``: per busy slot, the tokens before its inputs (decoding:
    # prompt and output up to, not including, the last accepted token ``tokens[b, 0]``; prefill: none,
    # the inputs are the prompt, ``prompt``). None otherwise.
    prefix: Optional[List[Optional[np.ndarray]]] = None
    prompt: Optional[List[Optional[np.ndarray]]] = None

    def context(self, b: int, j: int) -> np.ndarray:
        """The tokens the target conditions on at slot b's row j (needs ``prefix``): the prompt for
        a prefill slot; else the prefix, then inputs 0 .. j."""
        if self.is_prefill[b]:
            return self.prompt[b]
        return np.concatenate([self.prefix[b], self.tokens[b, : j + 1]])

    def output_rows(self) -> np.ndarray:
        """int32 [S]: logits rows of each slot, packed slot after slot in the target's logits: one for
        a prefill slot (after its last prompt token), ``num_tokens`` for a decoding slot, 0 if idle."""
        busy = np.array([r is not None for r in self.request_ids], bool) & (self.num_tokens > 0)
        rows = np.where(self.is_prefill, 1, np.minimum(self.num_tokens, self.tokens.shape[1]))
        return np.where(busy, rows, 0).astype(np.int32)


TargetModel = Callable[[VerifyBatch], np.ndarray]


@dataclass(frozen=True)
class StepRecord:
    """What one step did, slot by slot (host arrays of S entries): the runner's per-step output.

    A slot took part when ``request_ids[b] is not None and num_tokens[b] > 0``; a decoding slot
    proposed ``num_tokens[b] - 1`` drafts and accepted ``accept_num[b] - 1`` of them.
    """

    index: int  # 0 for the runner's first step
    request_ids: List[Optional[Hashable]]
    num_tokens: np.ndarray  # int32 [S]: seq_lens_this_time verified (1 + drafts)
    is_prefill: np.ndarray  # bool [S]
    accept_num: np.ndarray  # int32 [S]: tokens the slot gained
    finished: List[Hashable]  # requests that ended in this step
    not_need_stop: bool  # work remains after this step

    def slots(self) -> Iterator[int]:
        """The slots that took part in the step."""
        for b, rid in enumerate(self.request_ids):
            if rid is not None and self.num_tokens[b] > 0:
                yield b


@dataclass(frozen=True)
class TokenLogprob:
    """An accepted token as the token processor received it."""

    token: int
    logprob: float
    rank: int  # 1: the target's greedy choice
    topk_token_ids: List[int]  # the k best tokens, best first
    topk_logprobs: List[float]


class StepObserver:
    """Receives what a :class:`SpecRunner` produces; subclasses override what they need."""

    def on_step(self, runner: SpecRunner, record: StepRecord) -> None:
        """After each step (its logprob buffers still hold the step's rows)."""

    def on_logprob_message(
        self, runner: SpecRunner, message: LogprobMessage, record: StepRecord
    ) -> None:
        """For each logprob message received, with the record of the step that sent it."""


@dataclass
class RunStats:
    """Counters of a run. Drafts count only decoding slot-steps; prefill steps are counted apart."""

    steps: int = 0  # runner steps (one target-model call each)
    decode_slot_steps: int = 0  # (decoding slot, step) pairs
    prefill_slot_steps: int = 0
    drafts_proposed: int = 0
    drafts_accepted: int = 0
    tokens_generated: int = 0
    decode_tokens: int = 0  # tokens gained by decoding slot-steps
    logprob_messages_sent: int = 0
    logprob_messages_received: int = 0
    logprob_tokens_received: int = 0  # accepted tokens that arrived with their logprob row
    op_seconds: Dict[str, float] = field(default_factory=lambda: dict.fromkeys(OP_NAMES, 0.0))

    def add(self, record: StepRecord) -> None:
        self.steps += 1
        for b in record.slots():
            accepted = int(record.accept_num[b])
            self.tokens_generated += accepted
            if record.is_prefill[b]:
                self.prefill_slot_steps += 1
            else:
                self.decode_slot_steps += 1
                self.decode_tokens += accepted
                self.drafts_proposed += int(record.num_tokens[b]) - 1
                self.drafts_accepted += max(accepted - 1, 0)

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

    def draft_counts(self) -> Dict[str, float]:
        """The drafting figures of the run, keyed by their names: decoding slot-steps, drafts
        proposed and accepted, and the acceptance rate."""
        return dict(
            decode_slot_steps=self.decode_slot_steps,
            drafts_proposed=self.drafts_proposed,
            drafts_accepted=self.drafts_accepted,
            acceptance_rate=self.acceptance_rate,
        )


class OpTimer:
    """``with timer("name"):`` adds the wall time of the block to ``seconds["name"]``.

    On a GPU the device is synchronised before and after the block, so that the time is the ops'
    own and not that of their launch. A disabled timer neither synchronises nor reads the clock.
    """

    def __init__(self, seconds: Dict[str, float], enabled: bool, on_gpu: bool) -> None:
        self.seconds, self.enabled, self.on_gpu = seconds, enabled, on_gpu

    def _sync(self) -> None:
        if self.on_gpu:
            paddle.device.cuda.synchronize()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        self._sync()
        t0 = time.perf_counter()
        yield
        self._sync()
        self.seconds[name] += time.perf_counter() - t0


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
        Overrides ``create_proposer(config)`` (how an MTP proposer is plugged in).
    logprobs : int, optional
        k (0 .. 20) turns the logprob path on. Every step, between verification and update,
        ``build_output_logprobs`` (``speculate_get_accept_tokens_and_logits`` then
        ``speculate_logprobs_topk``) computes each accepted token's logprob, rank and top-k from the
        target's logits; ``speculate_save_output_topk`` then sends them to a token processor in a
        second process (``LogprobReceiver``, on a free queue id of its own that :meth:`close`
        removes). What arrives is kept in ``self.logprobs`` (request id -> list of
        ``TokenLogprob``). Needs ``target_model.logits`` and ``target_model.vocab_size`` and
        K + 1 <= 6 (a message carries at most 6 tokens per slot).
    timing : bool
        Accumulate the wall time of each plugin op in ``stats.op_seconds`` (synchronising the device
        around the ops on a GPU).
    verify_strategy : VerifyStrategy or str
        ``target_match`` (default: exact, the draft is accepted while it equals the target's sampled
        token), ``greedy`` (the target's argmax) or ``topp`` (FastDeploy's lossy top-p acceptance:
        a draft in the target's top-p set is accepted; ``topp_candidates`` candidates per row).
    seed : int
        The runner's generator, which gives each request added without a seed its seed (in the
        order the requests are added).

    Examples
    --------
    >>> from fastdeploy_spec.config import SpeculativeConfig
    >>> from fastdeploy_spec.runner import Request, SpecRunner
    >>> from examples import OracleTarget
    >>> cfg = SpeculativeConfig(method="ngram", num_speculative_tokens=3, max_ngram_size=2)
    >>> answer = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    >>> runner = SpecRunner(cfg, OracleTarget({"a": answer}, vocab_size=8, end_token=0),
    ...                     max_num_seqs=2, max_model_len=64, end_tokens=[0])
    >>> out = runner.run([Request("a", prompt=[5, 1, 2, 3, 4], max_dec_len=32)])
    >>> out["a"] == answer + [0], runner.stats.steps < len(answer) + 1
    (True, True)
    """

    def __init__(
        self,
        config: SpeculativeConfig,
        target_model: TargetModel,
        *,
        max_num_seqs: int,
        max_model_len: int,
        end_tokens: Sequence[int],
        place="cpu",
        proposer: Optional[Proposer] = None,
        logprobs: Optional[int] = None,
        timing: bool = False,
        verify_strategy="target_match",
        seed: int = 0,
        topp_candidates: int = 5,
    ) -> None:
        if proposer is None and config.method is SpecMethod.MTP:
            raise NotImplementedError(
                "method 'mtp': pass its proposer to SpecRunner "
                "(create_proposer(config, draft_model=...))"
            )
        self.config = config
        self.target_model = target_model
        self.place = resolve_place(place)
        self.proposer = proposer if proposer is not None else create_proposer(config)
        self.buffers = make_share_inputs(max_num_seqs, max_model_len, config, self.place)
        S, K1 = max_num_seqs, config.draft_width
        # The target's tokens, packed by cu_seqlens_q_output (at most K + 1 rows per slot), and the
        # per-slot inputs of FastDeploy's step ops that this runner keeps constant (no blocked or
        # paused slots, no reasoning phase, top_p 1).
        self._target_host = np.full(S * K1, -1, np.int64)
        self.buffers["target_tokens"] = self._device(self._target_host)
        self.buffers["end_tokens"] = self._device(np.asarray(list(end_tokens), np.int64))
        self.buffers["is_block_step"] = self._device(np.zeros(S, np.bool_))
        self.buffers["reasoning_status"] = self._device(np.zeros(S, np.int32))
        self.buffers["has_running_seqs"] = self._device(np.zeros(1, np.bool_))
        # Sampling parameters per slot (FastDeploy's sampling metadata; ``topp`` is also
        # verify_draft_tokens'), written when a request takes its slot.
        self._params_host = {
            "temperature": np.zeros(S, np.float32),
            "topp": np.ones(S, np.float32),
            "top_k": np.zeros(S, np.int64),
            "min_p": np.zeros(S, np.float32),
            "infer_seed": np.zeros(S, np.int64),
        }
        for name, host in self._params_host.items():
            self.buffers[name] = self._device(host)
        self.verify_strategy = (
            verify_strategy
            if isinstance(verify_strategy, VerifyStrategy)
            else VerifyStrategy.from_string(str(verify_strategy))
        )
        self.topp_candidates = int(topp_candidates)
        self._seed_rng = np.random.default_rng(seed)
        self.request_seeds: Dict[Hashable, int] = {}
        self._sampling: Optional[_SamplingPath] = None
        self.max_model_len = max_model_len
        self.slots: List[Optional[Request]] = [None] * max_num_seqs
        self._finished_slots: List[int] = []  # released at the next step's schedule
        self.pending: Deque[Request] = collections.deque()
        self.outputs: Dict[Hashable, List[int]] = {}
        self.stats = RunStats()
        self.observers: List[StepObserver] = []
        self.acceptance = AcceptanceStats(
            config.num_speculative_tokens
        )  # per request, from the StepRecords
        self.logprobs: Dict[Hashable, List[TokenLogprob]] = {}
        self._logits: Optional[_TargetLogits] = None
        self._logprob_path = None if logprobs is None else _LogprobPath(self, int(logprobs))
        if self._logprob_path is not None:
            self.stats.op_seconds.update(dict.fromkeys(LOGPROB_OP_NAMES, 0.0))
        self.timer = OpTimer(
            self.stats.op_seconds, timing, not isinstance(self.place, paddle.CPUPlace)
        )
        self.stats.op_seconds["speculate_sample_tokens"] = 0.0

    # Host <-> device. Only copies: copy_from_host is a memcpy into the existing allocation (a captured
    # CUDA graph keeps seeing the same buffers), Tensor.numpy() a copy back.
    def _device(self, host: np.ndarray) -> paddle.Tensor:
        return paddle.to_tensor(np.ascontiguousarray(host), place=self.place)

    def _target_logits(self, path: str) -> _TargetLogits:
        """The target's logits rows on the device, shared by the paths that read them (``path``
        names the first, for its error): allocated once, uploaded once per step by ``_score``."""
        if self._logits is None:
            self._logits = _TargetLogits(self, path)
        return self._logits

    def _write(self, name: str, host: np.ndarray) -> None:
        copy_from_host(self.buffers[name], host)

    def _read(self, name: str) -> np.ndarray:
        return self.buffers[name].numpy()

    @property
    def logprob_buffers(self) -> Optional[LogprobsBuffers]:
        """The logprob path's buffers (None without logprobs): after a step, its rows."""
        return None if self._logprob_path is None else self._logprob_path.buffers

    @property
    def logprob_queue_id(self) -> Optional[int]:
        """The message queue of the logprob path (None without logprobs)."""
        return None if self._logprob_path is None else self._logprob_path.receiver.queue_id

    # Requests.
    def add_request(self, request: Request) -> None:
        prompt_len = len(request.prompt)
        if not 0 < prompt_len < self.max_model_len:
            raise ValueError(
                f"request {request.request_id!r}: prompt length {prompt_len} must be in "
                f"[1, {self.max_model_len - 1}] (max_model_len {self.max_model_len})"
            )
        seed = request.seed if request.seed is not None else int(self._seed_rng.integers(0, 2**63))
        self.request_seeds[request.request_id] = int(seed)
        if request.temperature >= SAMPLING_MIN_TEMPERATURE and self._sampling is None:
            self._sampling = _SamplingPath(self)
        self.pending.append(request)

    def has_work(self) -> bool:
        return bool(self.pending) or any(r is not None for r in self.slots)

    # The decode step.
    def step(self) -> List[Hashable]:
        """Runs one decode step; returns the ids of the requests that finished in it."""
        lp, proposer, timed = self._logprob_path, self.proposer, self.timer
        self._schedule()
        if proposer is not None:
            with timed("proposer"):
                proposer.run(share_inputs=self.buffers)
        batch = self._verify_batch()
        self._score(batch)
        if self._sampling is not None and self._sampling.needed():
            with timed("speculate_sample_tokens"):
                self._sampling.sample()
        with timed("verify_draft_tokens"):
            self._verify()
        if proposer is not None:
            with timed("proposer"):
                proposer.accept(self.buffers["accept_tokens"], self.buffers["accept_num"])
        if lp is not None:
            with timed("build_output_logprobs"):
                lp.compute()
        with timed("unified_update_model_status"):
            self._update()
        record = self._record(batch)
        if lp is not None:
            with timed("speculate_save_output_topk"):
                lp.send(record)
        for observer in self.observers:
            observer.on_step(self, record)
        if lp is not None:
            lp.receive(wait=False)
        return record.finished

    def _schedule(self) -> None:
        """Releases the slots whose request finished at the previous step and puts pending requests
        into free slots (prompt row, lengths, a cleared stop flag).

        ``unified_update_model_status`` leaves a finishing slot stopped with the lengths of its last
        step (so that the step's logprob message reads them); the proposers' ops judge a slot by its
        lengths alone, so its lengths go to 0 here, before the next proposer runs (upstream's step op).
        """
        released, self._finished_slots = self._finished_slots, []
        free = [b for b, r in enumerate(self.slots) if r is None][: len(self.pending)]
        if not released and not free:
            return
        if self.proposer is not None and free:
            self.proposer.reset(free)
        lengths = ("seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder")
        params = self._params_host
        names = (
            lengths
            if not free
            else ("token_ids_all", "prompt_lens", "step_idx", "max_dec_len", *lengths, "stop_flags")
        )
        host = {n: self._read(n) for n in names}
        for b in released:
            for n in lengths:
                host[n][b] = 0
        for b in free:
            req = self.pending.popleft()
            P = len(req.prompt)
            host["token_ids_all"][b] = -1
            host["token_ids_all"][b, :P] = req.prompt
            host["prompt_lens"][b] = P
            host["step_idx"][b] = 0
            host["max_dec_len"][b] = min(req.max_dec_len, self.max_model_len - P)
            host["seq_lens_this_time"][b] = P
            host["seq_lens_encoder"][b] = P
            host["seq_lens_decoder"][b] = 0
            host["stop_flags"][b] = False
            params["temperature"][b], params["topp"][b] = req.temperature, req.top_p
            params["top_k"][b], params["min_p"][b] = req.top_k, req.min_p
            params["infer_seed"][b] = (self.request_seeds[req.request_id] + 2**63) % 2**64 - 2**63
            self.slots[b] = req
        for n in names:
            self._write(n, host[n])
        if free:
            for name, value in params.items():
                self._write(name, value)

    def _verify_batch(self) -> VerifyBatch:
        batch = VerifyBatch(
            request_ids=[r.request_id if r is not None else None for r in self.slots],
            tokens=self._read("draft_tokens"),
            num_tokens=self._read("seq_lens_this_time"),
            is_prefill=self._read("seq_lens_encoder") > 0,
            step_idx=self._read("step_idx").reshape(-1),
        )
        if getattr(self.target_model, "needs_prefix", False):
            ids, P = self._read("token_ids_all"), self._read("prompt_lens").reshape(-1)
            busy = [r is not None for r in batch.request_ids]
            batch.prompt = [ids[b, : P[b]] if busy[b] else None for b in range(len(busy))]
            batch.prefix = [
                ids[b, : max(P[b] + batch.step_idx[b] - 1, 0)] if busy[b] else None
                for b in range(len(busy))
            ]
        return batch

    def _score(self, batch: VerifyBatch) -> None:
        """The target model: its greedy tokens packed by ``cu_seqlens_q_output`` (and, for logprobs,
        its logits rows) to the device."""
        target_tokens = np.asarray(self.target_model(batch), np.int64)
        rows = batch.output_rows()
        cu = np.zeros(len(rows) + 1, np.int32)
        np.cumsum(rows, out=cu[1:])
        packed = self._target_host
        packed[:] = -1
        for b in np.flatnonzero(rows):
            packed[cu[b] : cu[b + 1]] = target_tokens[b, : rows[b]]
        self._write("target_tokens", packed)
        self._write("cu_seqlens_q_output", cu)
        if self._logits is not None:
            logits = np.asarray(self.target_model.logits(batch, target_tokens), np.float32)
            self._logits.write(logits, cu)
        if self._sampling is not None:
            self._sampling.write_batch_ids(cu)

    def _verify(self) -> None:
        """FastDeploy's sampler output step: verify_draft_tokens with the runner's strategy against
        the target's tokens (sampled: ``speculate_sample_tokens``; greedy: the argmax), or, without a
        proposer, naive_update_model_status (plain decoding takes the sampled tokens as they are)."""
        s = self.buffers
        if self.proposer is None:
            naive_update_model_status(
                s["accept_tokens"],
                s["accept_num"],
                s["seq_lens_this_time"],
                s["target_tokens"],
                s["cu_seqlens_q_output"],
            )
            return
        strategy = self.verify_strategy if self._sampling is not None else VerifyStrategy.GREEDY
        candidates = (None, None, None)
        if strategy == VerifyStrategy.TOPP:
            candidates = self._sampling.topp_candidates()
        verify_draft_tokens(
            s["accept_tokens"],
            s["accept_num"],
            s["draft_tokens"],
            s["target_tokens"],
            *candidates,
            s["topp"],
            s["stop_flags"],
            s["seq_lens_encoder"],
            s["seq_lens_this_time"],
            s["end_tokens"],
            s["is_block_step"],
            s["cu_seqlens_q_output"],
            s["reasoning_status"],
            s["max_dec_len"],
            s["step_idx"],
            self.max_model_len,
            0,
            strategy,
            False,
            False,
            seeds=s["infer_seed"],
        )

    def _update(self) -> None:
        s = self.buffers
        unified_update_model_status(
            s["seq_lens_encoder"],
            s["seq_lens_decoder"],
            s["has_running_seqs"],
            s["draft_tokens"],
            s["accept_tokens"],
            s["accept_num"],
            s["stop_flags"],
            s["seq_lens_this_time"],
            s["is_block_step"],
            s["token_ids_all"],
            s["prompt_lens"],
            s["step_idx"],
            s["end_tokens"],
            s["max_dec_len"],
        )

    def _record(self, batch: VerifyBatch) -> StepRecord:
        """Reads what the step accepted, frees the slots whose request finished, counts."""
        stop = self._read("stop_flags").reshape(-1)
        finished = []
        if stop.any():
            ids, prompt_lens, step_idx = (
                self._read(n) for n in ("token_ids_all", "prompt_lens", "step_idx")
            )
            for b, req in enumerate(self.slots):
                if req is None or not stop[b]:
                    continue
                P, n = int(prompt_lens[b, 0]), int(step_idx[b, 0])
                self.outputs[req.request_id] = ids[b, P : P + n].tolist()
                self.slots[b] = None
                self._finished_slots.append(b)
                finished.append(req.request_id)
        record = StepRecord(
            index=self.stats.steps,
            request_ids=batch.request_ids,
            num_tokens=batch.num_tokens,
            is_prefill=batch.is_prefill,
            accept_num=self._read("accept_num"),
            finished=finished,
            not_need_stop=bool(self._read("has_running_seqs")[0]) or bool(self.pending),
        )
        self.stats.add(record)
        self.acceptance.add_step(record)
        return record

    def run(
        self, requests: Sequence[Request] = (), progress: Optional[Callable[[int], None]] = None
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
        """Waits until every logprob message sent has come back (logprob path)."""
        if self._logprob_path is not None:
            self._logprob_path.receive(wait=True, timeout_s=timeout_s)

    def close(self) -> None:
        """Ends the logprob receiver and removes its queue (nothing to do without logprobs)."""
        if self._logprob_path is not None:
            self._logprob_path.close()

    def __enter__(self) -> SpecRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _TargetLogits:
    """The target's logits rows on the runner's place: one padded [S * (K + 1), V] buffer, allocated
    once (fixed shapes, as under a captured CUDA graph), read by the sampler and the logprob path."""

    def __init__(self, runner: SpecRunner, path: str) -> None:
        target = runner.target_model
        if not (callable(getattr(target, "logits", None)) and hasattr(target, "vocab_size")):
            raise TypeError(
                f"{path}: the target model must give its logits rows, "
                "target.logits(batch, tokens) -> float32 [R, V], and target.vocab_size"
            )
        S, K1 = len(runner.slots), runner.config.draft_width
        self.vocab_size = int(target.vocab_size)
        self.host = np.zeros((S * K1, self.vocab_size), np.float32)
        self.device = runner._device(self.host)

    def write(self, logits: np.ndarray, cu: np.ndarray) -> None:
        """Copies the step's rows (packed by ``cu_seqlens_q_output`` ``cu``), zeros after them."""
        if logits.shape != (int(cu[-1]), self.vocab_size):
            raise ValueError(
                f"target.logits gave shape {logits.shape}, expected ({int(cu[-1])}, {self.vocab_size})"
            )
        self.host[: len(logits)] = logits
        self.host[len(logits) :] = 0
        copy_from_host(self.device, self.host)


class _LogprobPath:
    """The logprob buffers of a runner, the send, and the delivery of what the receiver got.

    Every buffer is allocated once, on the runner's place, for all S slots (N = S * (K + 1) rows): the
    ops run on fixed shapes, as under a captured CUDA graph.
    """

    def __init__(self, runner: SpecRunner, k: int) -> None:
        limit = max_num_logprobs()
        if not 0 <= k <= limit:
            raise ValueError(f"logprobs must be in [0, {limit}], got {k}")
        K1, per_message = runner.config.draft_width, layout().max_draft_tokens
        if K1 > per_message:
            raise ValueError(
                f"logprobs: a step accepts up to K + 1 = {K1} tokens per slot, a logprob "
                f"message carries at most {per_message}: use K <= {per_message - 1}"
            )
        self.runner, self.k = runner, k
        self.logits = runner._target_logits("logprobs")
        self.buffers = LogprobsBuffers.allocate(
            len(runner.slots), K1 - 1, self.logits.vocab_size, k, place=runner.place
        )
        self.not_need_stop = runner._device(np.ones(1, np.bool_))
        self.sent: Deque[StepRecord] = collections.deque()
        self.receiver = LogprobReceiver(free_queue_id())

    def compute(self) -> None:
        s = self.runner.buffers
        build_output_logprobs(
            self.logits.device,
            s["accept_tokens"],
            s["accept_num"],
            s["seq_lens_this_time"],
            s["seq_lens_encoder"],
            s["cu_seqlens_q_output"],
            self.k,
            buffers=self.buffers,
        )

    def send(self, record: StepRecord) -> None:
        s, lb = self.runner.buffers, self.buffers
        copy_from_host(self.not_need_stop, np.array([record.not_need_stop]))
        with queue_env(self.receiver.queue_id):
            speculate_save_output_topk(
                lb.token_ids,
                lb.logprob_token_ids,
                lb.logprob_scores,
                lb.logprob_ranks,
                s["accept_num"],
                lb.cu_batch_token_offset,
                self.not_need_stop,
                s["seq_lens_decoder"],
                s["prompt_lens"],
                layout().flag_target,
                0,
            )
        self.runner.stats.logprob_messages_sent += 1
        self.sent.append(record)

    def receive(self, wait: bool, timeout_s: float = 60.0) -> None:
        """Takes the messages that arrived (with ``wait``: all sent) and delivers each to the requests
        of its step, then to the runner's observers."""
        runner = self.runner
        for message in self.receiver.take(len(self.sent) if wait else None, timeout_s):
            record = self.sent.popleft()
            runner.stats.logprob_messages_received += 1
            if message.batch != len(record.request_ids):
                raise RuntimeError(
                    f"logprob message of step {record.index}: {message.batch} slots arrived, "
                    f"{len(record.request_ids)} were sent"
                )
            for rid, got in zip(record.request_ids, message.slots):
                n = len(got.token_ids)
                runner.stats.logprob_tokens_received += n
                if n and rid is not None:
                    runner.logprobs.setdefault(rid, []).extend(
                        TokenLogprob(ids[0], lps[0], rank, ids[1:], lps[1:])
                        for ids, lps, rank in zip(got.topk_token_ids, got.topk_logprobs, got.ranks)
                    )
            for observer in runner.observers:
                observer.on_logprob_message(runner, message, record)

    def close(self) -> None:
        self.receiver.close()


# Temperatures below this are greedy (the sampler's rule, docs/contract/sampling.md).
SAMPLING_MIN_TEMPERATURE = 1e-5


class _SamplingPath:
    """The sampler of a runner serving sampled requests: the target's logits rows on the runner's
    place (one padded [S * (K + 1), V] buffer, allocated once), ``speculate_sample_tokens`` into
    ``target_tokens`` (packed by ``cu_seqlens_q_output``), and, for the TOPP strategy, the top-p
    candidate sets of the rows (``top_p_candidates`` on the temperature-scaled probabilities)."""

    def __init__(self, runner: SpecRunner) -> None:
        self.runner = runner
        self.logits = runner._target_logits("sampled requests")
        self.batch_id_host = np.full(len(self.logits.host), -1, np.int32)
        self.batch_id = runner._device(self.batch_id_host)
        self.probs = None

    def write_batch_ids(self, cu: np.ndarray) -> None:
        """Each packed row's slot (-1 past the step's rows), for ``top_p_candidates``."""
        self.batch_id_host[:] = -1
        self.batch_id_host[: int(cu[-1])] = np.repeat(
            np.arange(len(cu) - 1, dtype=np.int32), np.diff(cu)
        )
        copy_from_host(self.batch_id, self.batch_id_host)

    def needed(self) -> bool:
        """Whether the step samples: always in plain decoding (no proposer), and for TARGET_MATCH
        (GREEDY compares with the argmax, TOPP with the top-p sets)."""
        runner = self.runner
        return runner.proposer is None or runner.verify_strategy == VerifyStrategy.TARGET_MATCH

    def sample(self) -> None:
        s = self.runner.buffers
        speculate_sample_tokens(
            self.logits.device,
            s["cu_seqlens_q_output"],
            s["step_idx"],
            s["infer_seed"],
            s["temperature"],
            s["topp"],
            s["top_k"],
            s["target_tokens"],
            min_p=s["min_p"],
        )

    def topp_candidates(self):
        """FastDeploy's TOPP inputs: softmax(logits / T) per row (T < 1e-5: the argmax alone), then
        ``top_p_candidates``. The probabilities are formed on the host, where the target's rows are
        (no Paddle kernel runs on the device)."""
        runner = self.runner
        temperature = runner._params_host["temperature"]
        x = self.logits.host.astype(np.float64)
        slot = np.maximum(self.batch_id_host, 0)
        T = temperature[slot].astype(np.float64)
        greedy = T < SAMPLING_MIN_TEMPERATURE
        z = x / np.where(greedy, 1.0, T)[:, None]
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        onehot = np.zeros_like(p)
        onehot[np.arange(len(p)), x.argmax(axis=1)] = 1.0
        p = np.where(greedy[:, None], onehot, p).astype(np.float32)
        if self.probs is None:
            self.probs = runner._device(p)
        else:
            copy_from_host(self.probs, p)
        scores, ids, lens = top_p_candidates(
            self.probs,
            runner.buffers["topp"],
            self.batch_id,
            runner.topp_candidates,
            runner.max_model_len,
        )
        return ids, scores, lens
