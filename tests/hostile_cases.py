"""The hostile-input cases of every op, run one by one by tests/hostile_runner.py in a child process.

A case is a call a hostile (or careless) caller could make, with what the contract says must come out:
``expect="error"``: an exception whose message names the op and the argument (``arg``); ``expect="ok"``:
the op returns and its outputs equal the NumPy reference (the case function asserts it). What
actually came out is one of

    named error       rejected, the message names the op and the argument      (pass for "error")
    correct result    returned, outputs equal the reference                      (pass for "ok")
    unnamed error     rejected, but the message misses the op or the argument   (fail)
    unexpected error  rejected a call the contract accepts                       (fail)
    silent garbage    returned without error: wrong outputs, or a call that must be rejected (fail)
    crash / hang      the child process died or the case ran past its timeout  (fail; decided by
                      the parent, tests/test_hostile_inputs.py)

Families: types (None, NumPy, Python scalars, lists for every tensor argument), undefined tensors at
the binding, dtypes, ranks (0-d, one more dimension), batch mismatches, zero sizes, strided views,
in-place outputs that require grad, hostile values (integer limits, NaN/inf, tiny temperatures),
attribute limits, the suffix cache (its state's size and configuration), the cache's state (values no
op writes, the state a view between guard bytes: docs/contract/suffix.md, "A state the ops did not
write"), environment variables, queue traffic (malformed, interleaved, half-sent). On a GPU
every tensor case runs on GPU tensors too, and a correct call after each family checks that no
CUDA error stuck.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Callable, Dict, List

import numpy as np
import paddle

from fastdeploy_spec import ops
from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import SPECS, FloatAttr
from fastdeploy_spec.ops.suffix_cache import PARTS, SuffixCache, SuffixCacheConfig, cache_layout
from tests.helpers import (
    FRAGMENT_HEADER,
    FRAGMENT_MAGIC,
    fragments,
    payload_of,
    raw_receive_all,
    raw_send,
    to_place,
)
from tests.reference import draft_model as draft_ref
from tests.reference import logprob_msg as msg_ref
from tests.reference import suffix_match as suffix_ref
from tests.reference import unified_update as update_ref
from tests.reference import verify_draft_tokens as verify_ref
from tests.reference.get_accept_tokens import ref_cu_batch_offset, ref_get_accept_tokens_and_logits
from tests.reference.hybrid_mtp_ngram import hybrid_mtp_ngram_ref
from tests.reference.logprobs_topk import ref_logprobs_topk
from tests.reference.ngram_match import SLOT_STATE, make_ngram_batch, ngram_match_ref
from tests.reference.ngram_match import TENSOR_ARGS as NGRAM_ARGS
from tests.reference.suffix_cache import SuffixCacheRef, counter_base, row_len, row_req

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
B = 3  # batch of the good calls


@dataclass
class Case:
    id: str
    family: str
    op: str
    arg: str  # the argument an error must name ("" for transport errors: the op alone)
    expect: str  # "error" or "ok"
    fn: Callable[[], None]


# ---- Good calls: valid inputs of every op, as NumPy arrays keyed by the op's argument names ----------


def _flat(a):
    return a.reshape(-1)


def good(op: str, seed: int = 0) -> tuple[Dict[str, np.ndarray], Dict[str, object]]:
    """Valid tensor inputs (in the op's order) and attributes of a small call of `op`."""
    rng = np.random.default_rng(seed)
    if op == "ngram_match":
        d = make_ngram_batch(rng, B, 12, vocab=2)
        return {k: d[k] for k in NGRAM_ARGS}, dict(
            max_ngram_size=3, max_draft_tokens=5, pad_to_max=False, threshold=None
        )
    if op == "hybrid_mtp_ngram":
        ids = rng.integers(0, 2, (B, 10)).astype(np.int64)
        return dict(
            input_ids=ids,
            input_ids_len=np.full((B, 1), 6, np.int64),
            pre_ids=rng.integers(0, 2, (B, 8)).astype(np.int64),
            step_idx=np.array([[3], [5], [6]], np.int64),
            draft_token_num=np.full(B, 4, np.int32),
            draft_tokens=np.full((B, 5), -7, np.int64),
            seq_lens_this_time=np.array([1, 2, 0], np.int32),
            seq_lens_decoder=np.array([4, 9, 0], np.int32),
            max_dec_len=np.full((B, 1), 50, np.int64),
        ), dict(
            max_ngram_size=3, min_ngram_size=1, max_draft_tokens=4, pad_to_max=False, threshold=None
        )
    if op == "verify_draft_tokens":  # TOPP, every optional tensor given (GREEDY's target too)
        return dict(
            step_output_ids=np.full((B, 4), -5, np.int64),
            step_output_len=np.full(B, -5, np.int32),
            step_input_ids=rng.integers(0, 3, (B, 4)).astype(np.int64),
            target_tokens=rng.integers(0, 3, 9).astype(np.int64),
            candidate_ids=rng.integers(0, 3, (9, 2)).astype(np.int64),
            candidate_scores=np.full((9, 2), 0.5, np.float32),
            candidate_lens=np.full(9, 2, np.int32),
            topp=np.full(B, 0.9, np.float32),
            stop_flags=np.array([False, False, True]),
            seq_lens_encoder=np.array([0, 4, 0], np.int32),
            seq_lens_this_time=np.array([4, 4, 1], np.int32),
            end_tokens=np.array([2], np.int64),
            is_block_step=np.zeros(B, bool),
            cu_seqlens_q_output=np.array([0, 4, 8], np.int32),
            reasoning_status=np.zeros(B, np.int32),
            max_dec_len=np.full(B, 40, np.int64),
            step_idx=np.array([2, 0, 5], np.int64),
            seeds=np.array([7, 8, 9], np.int64),
        ), dict(
            max_seq_len=64, verify_window=2, verify_strategy=0, reject_all=False, accept_all=False
        )
    if op == "unified_update_model_status":
        return dict(
            seq_lens_encoder=np.array([0, 4, 0], np.int32),
            seq_lens_decoder=np.array([5, 0, 6], np.int32),
            has_running_seqs=np.zeros(1, bool),
            step_input_ids=np.full((B, 4), 30, np.int64),
            step_output_ids=rng.integers(0, 3, (B, 4)).astype(np.int64),
            step_output_len=np.array([2, 1, 3], np.int32),
            stop_flags=np.zeros(B, bool),
            seq_lens_this_time=np.array([3, 4, 4], np.int32),
            is_paused=np.array([False, False, True]),
            token_ids_all=rng.integers(10, 20, (B, 16)).astype(np.int64),
            prompt_lens=np.full(B, 4, np.int64),
            step_idx=np.array([1, 0, 2], np.int64),
            end_tokens=np.array([9], np.int64),
            max_dec_len=np.full(B, 10, np.int64),
        ), {}
    if op == "naive_update_model_status":
        return dict(
            accept_tokens=np.full((B, 2), -5, np.int64),
            accept_num=np.full(B, -5, np.int32),
            seq_lens_this_time=np.array([4, 0, 1], np.int32),
            next_tokens=rng.integers(0, 9, 5).astype(np.int64),
            cu_seqlens_q_output=np.array([0, 4, 4, 5], np.int32),
        ), {}
    if op == "top_p_candidates":
        return dict(
            probs=rng.random((5, 6)).astype(np.float32),
            top_p=np.array([0.5, 0.9, 1.0], np.float32),
            batch_id_per_token_output=np.array([0, 0, 1, -1, 2], np.int32),
        ), dict(candidates_len=3, max_seq_len=64)
    if op == "speculate_get_accept_tokens_and_logits":
        logits = rng.standard_normal((7, 5)).astype(np.float32)
        return dict(
            token_ids=np.full(B * 3, -3, np.int64),
            target_logits=np.full((B * 3, 5), 9, np.float32),
            logits=logits,
            cu_batch_token_offset=np.full(B + 1, 77, np.int32),
            cu_seqlens_q_output=np.array([0, 3, 4, 7], np.int32),
            seq_lens_this_time=np.array([3, 4, 3], np.int32),
            seq_lens_encoder=np.array([0, 4, 0], np.int32),
            accept_num=np.array([2, 1, 3], np.int32),
            accept_tokens=rng.integers(0, 100, (B, 3)).astype(np.int64),
        ), {}
    if op == "speculate_compute_cu_batch_offset":
        return dict(
            cu_batch_token_offset=np.full(B + 1, 77, np.int32),
            accept_num=np.array([2, 0, 5], np.int32),
        ), dict(real_bsz=B, max_accept_num=None)
    if op == "speculate_logprobs_topk":
        return dict(
            target_logits=rng.standard_normal((6, 9)).astype(np.float32),
            token_ids=rng.integers(0, 9, 6).astype(np.int64),
            cu_batch_token_offset=np.array([0, 2, 3, 5], np.int32),
            logprob_token_ids=np.full((6, 4), 99, np.int64),
            logprob_scores=np.full((6, 4), 99, np.float32),
            logprob_ranks=np.full(6, 99, np.int64),
            temperature=np.array([1.0, 0.5, 0.0], np.float32),
        ), dict(raw_logits=False)
    if op in ("speculate_save_output_topk", "mtp_save_first_token_with_topk"):
        save = op == "speculate_save_output_topk"
        step = msg_ref.make_step(
            rng,
            mode="save" if save else "mtp",
            batch=B,
            columns=4,
            full=True,
            preempt_frac=0.3 if save else None,
        )  # save: FastDeploy's 10-tensor form
        return {k: step[k] for k in msg_ref.input_names(step)}, dict(
            message_flag=3, rank_id=0, save_each_rank=False, queue_id=None
        )
    if op == "speculate_get_output_topk":
        b = msg_ref.fresh_buffers()
        return dict(
            output_tokens=b["tokens"].reshape(-1, 1),
            output_scores=b["scores"].reshape(-1, 1),
            output_ranks=b["ranks"],
        ), dict(real_k=20, rank_id=0, wait_flag=False, queue_id=None)
    if op in DRAFT_ORDERS:
        state = draft_ref.random_state(rng, B, 3, 6, 5)
        a = {k: state[k] for k in DRAFT_ORDERS[op]}
        if op == "draft_model_greedy_update":
            return dict(logits=rng.standard_normal((B, 5)).astype(np.float32), **a), dict(substep=1)
        return a, {}
    if op == "suffix_match":
        d = suffix_ref.make_suffix_batch(rng, B, 16, k=4, vocab=3)
        return {k: d[k] for k in suffix_ref.TENSOR_ARGS}, dict(SUFFIX_ATTRS)
    if op in CACHE_OPS:
        return _good_cache(op, rng)
    raise KeyError(op)


# The suffix-tree attributes of the good suffix_match / suffix_cache_query / suffix_cache_step calls.
SUFFIX_ATTRS = dict(
    suffix_ref.DEFAULTS, max_tree_depth=8, max_draft_tokens=4, pad_to_max=False, threshold=None
)


# ---- The global suffix cache: its state travels as the uint8 array `cache_state` (with the
# attribute `cache_config`); references and checks read its parts under these names --------------

CACHE_OPS = (
    "suffix_cache_insert",
    "suffix_cache_finish",
    "suffix_cache_evict",
    "suffix_cache_query",
    "suffix_cache_step",
)
CACHE_PARTS = dict(
    cache_tokens="tokens",
    cache_keys="keys",
    cache_rows="rows",
    cache_counts="counts",
    cache_pairs="pairs",
    cache_lines="lines",
    cache_slots="slots",
    cache_counter="counter",
    query_cand="cand",
    query_stat="stat",
    query_lines="line_mask",
)
CACHE_KEY_LEN, CACHE_ROWS, CACHE_WIDTH, CACHE_M = 2, 4, 12, 32
CACHE_CONFIG = SuffixCacheConfig(
    CACHE_ROWS, CACHE_WIDTH, B, key_len=CACHE_KEY_LEN, max_occurrences=CACHE_M
)


def _good_cache(op: str, rng: np.random.Generator):
    """A cache already holding responses (built by the insert op on the CPU from two random batches:
    rows evicted and slots detached on the way), and the op's other inputs from a suffix batch."""
    c = SuffixCache.allocate(**dataclasses.asdict(CACHE_CONFIG), place="cpu")
    for _ in range(2):
        d = suffix_ref.make_suffix_batch(rng, B, 16, k=4, vocab=3, p_prefill=0.1, p_empty=0.1)
        ops.suffix_cache_insert(*(paddle.to_tensor(d[k]) for k in _INSERT_ARGS), c)
    d = suffix_ref.make_suffix_batch(rng, B, 16, k=4, vocab=3, p_prefill=0.1, p_empty=0.1)
    d["suffix_source"] = np.full(B, -7, np.int32)
    d["finished"] = np.array([1, 0, 1], np.int32)
    d["cache_state"] = c.state.numpy()
    a = {k: d[k] for k in SPECS[op].tensors}
    attrs = dict(cache_config=CACHE_CONFIG.values())
    if op == "suffix_cache_evict":
        attrs["keep"] = 1
    if op in ("suffix_cache_query", "suffix_cache_step"):
        attrs.update(SUFFIX_ATTRS, max_spec_factor=2.0)
    return a, attrs


_INSERT_ARGS = ("token_ids_all", "prompt_lens", "step_idx", "seq_lens_encoder", "seq_lens_decoder")


def _config(attrs) -> SuffixCacheConfig:
    return SuffixCacheConfig(*attrs["cache_config"])


def cache_parts(state: np.ndarray, attrs) -> Dict[str, np.ndarray]:
    """The parts of a state's bytes, under CACHE_PARTS's names (copies)."""
    cfg = _config(attrs)
    lay = cache_layout(cfg)
    names = {v: k for k, v in CACHE_PARTS.items()}
    return {
        names[name]: state[lay.offsets[name] : lay.offsets[name] + lay.sizes[name]]
        .view(dtype)
        .reshape(shape(cfg))
        .copy()
        for name, dtype, shape in PARTS
    }


def with_parts(state: np.ndarray, attrs, parts: Dict[str, np.ndarray]) -> np.ndarray:
    """A copy of a state's bytes with some parts (CACHE_PARTS's names) replaced."""
    lay = cache_layout(_config(attrs))
    out = state.copy()
    for k, v in parts.items():
        name = CACHE_PARTS[k]
        out[lay.offsets[name] : lay.offsets[name] + lay.sizes[name]] = (
            np.ascontiguousarray(v).view(np.uint8).reshape(-1)
        )
    return out


def _cache_of(t: Dict[str, object], attrs: Dict[str, object], place: str) -> SuffixCache:
    """The SuffixCache holding the call's state (whatever the test put there) and configuration."""
    c = SuffixCache.__new__(SuffixCache)  # no layout check: the binding's checks are under test
    c.state, c.config = t.get("cache_state"), _config(attrs)
    return c


def _cache_ref(a: Dict[str, np.ndarray], attrs) -> SuffixCacheRef:
    """The reference cache in the state the arrays `a` hold (responses read back from the ring)."""
    p = cache_parts(a["cache_state"], attrs)
    tokens, rows = p["cache_tokens"], p["cache_rows"]
    cfg = _config(attrs)
    ref = SuffixCacheRef(
        cfg.rows, cfg.width, B, key_len=cfg.key_len, max_occurrences=cfg.max_occurrences
    )
    for r in np.argsort(rows[:, 0], kind="stable"):
        q = row_req(rows[r, 0])  # a state no op writes is read as the ops read it
        if q >= 0:
            ref.responses[q] = [
                int(x) for x in tokens[r, : row_len(q, rows[r, 1], tokens.shape[1])]
            ]
    ref.slots = [int(x) for x in p["cache_slots"][:B]]
    ref.counter = counter_base(p["cache_counter"][0])
    return ref


def _cache_state(ref: SuffixCacheRef, a: Dict[str, np.ndarray], attrs) -> Dict[str, np.ndarray]:
    """The state's parts for the reference cache `ref`: tokens past a row's length are not compared
    (masked to -1 by `_canon`)."""
    rows, toks = ref.rows_view()
    tokens = np.full((ref.R, ref.width), -1, np.int64)
    for r, resp in toks.items():
        tokens[r, : len(resp)] = resp
    slots = cache_parts(a["cache_state"], attrs)["cache_slots"]
    slots[:B] = ref.slots
    return dict(
        cache_rows=rows,
        cache_tokens=tokens,
        cache_slots=slots,
        cache_counter=np.array([ref.counter], np.int64),
    )


def _canon_rows(rows: np.ndarray, width: int) -> np.ndarray:
    """The rows' state as the ops read it (an inconsistent one left as it was: the same meaning)."""
    out = np.array([[row_req(q), 0] for q, _ in rows], np.int64).reshape(rows.shape)
    out[:, 1] = [row_len(q, n, width) for q, (_, n) in zip(out[:, 0], rows)]
    return out


def outputs_of(op: str, t: Dict[str, paddle.Tensor], attrs) -> Dict[str, np.ndarray]:
    """The op's in-place outputs after a call, the cache state's parts under CACHE_PARTS's names
    (rows as the ops read them, tokens past a row's length masked to -1)."""
    out = {k: t[k].numpy() for k in SPECS[op].outputs if k != "cache_state"}
    if "cache_state" in SPECS[op].outputs:
        p = cache_parts(t["cache_state"].numpy(), attrs)
        width = p["cache_tokens"].shape[1]
        p["cache_rows"] = _canon_rows(p["cache_rows"], width)
        lens = p["cache_rows"][:, 1]
        p["cache_tokens"] = np.where(
            np.arange(width)[None, :] < lens[:, None], p["cache_tokens"], -1
        )
        out.update(p)
    return out


DRAFT_ORDERS = {
    "draft_model_greedy_preprocess": draft_ref.PRE_ORDER,
    "draft_model_greedy_update": draft_ref.UPD_ORDER,
    "draft_model_accept": draft_ref.ACC_ORDER,
    "draft_model_accept_preprocess": draft_ref.ACC_PRE_ORDER,
}


def tensors(arrays: Dict[str, np.ndarray], place: str) -> Dict[str, paddle.Tensor]:
    return {k: _to(v, "cpu" if _host_only(k) else place) for k, v in arrays.items()}


def _to(a: np.ndarray, place: str) -> paddle.Tensor:
    if a.ndim == 0:  # to_place would make it [1] (np.ascontiguousarray returns at least 1-D)
        return paddle.to_tensor(
            a, place=paddle.CUDAPlace(0) if place == "gpu" else paddle.CPUPlace()
        )
    return to_place(a, place)


def _host_only(name: str) -> bool:  # the receive buffers live on the host whatever the place
    return name.startswith("output_")


def call(op: str, t: Dict[str, object], attrs: Dict[str, object]) -> None:
    """Calls the op's Python entry point with the tensors `t` (any values) and attributes `attrs`."""
    spec = SPECS[op]
    fn = getattr(ops, op)
    if op in CACHE_OPS:
        place = (
            "gpu"
            if any(isinstance(v, paddle.Tensor) and v.place.is_gpu_place() for v in t.values())
            else "cpu"
        )
        cache = t["cache"] if "cache" in t else _cache_of(t, attrs, place)
        pos = [t[k] for k in spec.tensors if k != "cache_state"]
        kw = {n: attrs[n] for n, _ in spec.attrs if n != "cache_config"}
        fn(*pos, cache, **kw)
        return
    if op == "verify_draft_tokens":  # seeds: the optional trailing keyword
        fn(
            *(t[k] for k in spec.tensors if k != "seeds"),
            *(attrs[n] for n, _ in spec.attrs),
            seeds=t.get("seeds"),
        )
        return
    if op == "top_p_candidates":
        globals()["_last_result"] = fn(
            *(t[k] for k in spec.tensors), *(attrs[n] for n, _ in spec.attrs)
        )
        return
    pos = [t[k] for k in spec.tensors if not (k == "temperature")]
    kw = {}
    if "temperature" in spec.tensors:
        kw["temperature"] = t["temperature"]
    names = [n for n, _ in spec.attrs]
    keyword_only = (
        set(names)
        if op == "suffix_match"
        else {"threshold", "raw_logits", "max_accept_num", "queue_id"}
    )
    pos += [attrs[n] for n in names if n not in keyword_only]
    kw.update({n: attrs[n] for n in names if n in keyword_only})
    fn(*pos, **kw)


def reference(op: str, a: Dict[str, np.ndarray], attrs: Dict[str, object]) -> Dict[str, np.ndarray]:
    """The outputs the op must leave in its in-place tensors for inputs `a` (NumPy references)."""
    if op == "ngram_match":
        thr = attrs["threshold"] if attrs["threshold"] is not None else 128
        d, s = ngram_match_ref(
            a,
            attrs["max_ngram_size"],
            attrs["max_draft_tokens"],
            attrs["pad_to_max"],
            threshold=thr,
        )
        return dict(draft_tokens=d, seq_lens_this_time=s)
    if op == "hybrid_mtp_ngram":
        thr = attrs["threshold"] if attrs["threshold"] is not None else 1024
        d, s = hybrid_mtp_ngram_ref(
            a["input_ids"],
            _flat(a["input_ids_len"]),
            a["pre_ids"],
            _flat(a["step_idx"]),
            a["draft_tokens"],
            _flat(a["seq_lens_this_time"]),
            _flat(a["seq_lens_decoder"]),
            _flat(a["max_dec_len"]),
            attrs["max_ngram_size"],
            attrs["min_ngram_size"],
            attrs["max_draft_tokens"],
            thr,
            attrs["pad_to_max"],
        )
        return dict(draft_tokens=d, seq_lens_this_time=s)
    if op == "verify_draft_tokens":
        c = {
            k: (
                _flat(v)
                if k
                not in ("step_output_ids", "step_input_ids", "candidate_ids", "candidate_scores")
                else v
            )
            for k, v in a.items()
        }
        ids, n = verify_ref.verify_draft_tokens_ref({**c, **attrs})
        return dict(step_output_ids=ids, step_output_len=n)
    if op == "unified_update_model_status":
        c = {
            k: (_flat(v) if k not in ("step_input_ids", "step_output_ids", "token_ids_all") else v)
            for k, v in a.items()
        }
        return update_ref.unified_update_ref(c)
    if op == "naive_update_model_status":
        return update_ref.naive_update_ref(
            {k: (v if k == "accept_tokens" else _flat(v)) for k, v in a.items()}
        )
    if op == "speculate_get_accept_tokens_and_logits":
        ids, rows, cu = ref_get_accept_tokens_and_logits(
            a["token_ids"],
            a["target_logits"],
            a["logits"],
            a["cu_batch_token_offset"],
            a["cu_seqlens_q_output"],
            _flat(a["seq_lens_encoder"]),
            _flat(a["accept_num"]),
            a["accept_tokens"],
        )
        return dict(token_ids=ids, target_logits=rows, cu_batch_token_offset=cu)
    if op == "speculate_compute_cu_batch_offset":
        cu = a["cu_batch_token_offset"].copy()
        n = attrs["real_bsz"]
        cu[: n + 1] = ref_cu_batch_offset(a["accept_num"][:n], attrs["max_accept_num"])
        return dict(cu_batch_token_offset=cu)
    if op == "speculate_logprobs_topk":
        k = a["logprob_token_ids"].shape[1] - 1
        ids, scores, ranks = ref_logprobs_topk(
            a["target_logits"],
            a["token_ids"],
            a["cu_batch_token_offset"],
            k,
            a.get("temperature"),
            attrs["raw_logits"],
        )
        return dict(
            logprob_token_ids=ids, logprob_scores=scores.astype(np.float32), logprob_ranks=ranks
        )
    if op in DRAFT_ORDERS:
        ref = draft_ref.Reference({k: v for k, v in a.items() if k != "logits"})
        if op == "draft_model_greedy_update":
            ref.update(a["logits"], "float32", attrs["substep"])
        else:
            getattr(ref, op[len("draft_model_") :].replace("greedy_", ""))()
        return {k: ref.s[k] for k in SPECS[op].outputs}
    if op == "suffix_match":
        return suffix_ref.suffix_match_ref(a, **attrs)
    if op == "suffix_cache_finish":
        slots = cache_parts(a["cache_state"], attrs)["cache_slots"]
        ref = SuffixCacheRef(1, 1, len(a["finished"]))
        ref.slots = [int(x) for x in slots[: len(a["finished"])]]
        ref.finish(a["finished"])
        slots[: len(ref.slots)] = ref.slots
        return dict(cache_slots=slots)
    if op in CACHE_OPS:
        ref = _cache_ref(a, attrs)
        kw = {k: v for k, v in attrs.items() if k != "cache_config"}
        if op == "suffix_cache_query":
            return ref.query(a, **kw)
        drafts = {}
        if op == "suffix_cache_step":  # the insert, then the query
            ref.insert(*(a[k] for k in _INSERT_ARGS))
            drafts = ref.query(a, **kw)
        elif op == "suffix_cache_insert":
            ref.insert(*(a[k] for k in _INSERT_ARGS))
        else:
            ref.evict(attrs["keep"])
            state = _cache_state(ref, a, attrs)
            state["cache_counter"] = cache_parts(a["cache_state"], attrs)[
                "cache_counter"
            ]  # read, not written
            return state
        return {**drafts, **_cache_state(ref, a, attrs)}
    raise KeyError(op)


TOKEN_OPS = (
    "ngram_match",
    "hybrid_mtp_ngram",
    "speculate_get_accept_tokens_and_logits",
    "speculate_compute_cu_batch_offset",
    "speculate_logprobs_topk",
    "draft_model_greedy_preprocess",
    "draft_model_greedy_update",
    "draft_model_accept",
    "draft_model_accept_preprocess",
    "suffix_match",
    "verify_draft_tokens",
    "unified_update_model_status",
    "naive_update_model_status",
) + CACHE_OPS
SEND_OPS = ("speculate_save_output_topk", "mtp_save_first_token_with_topk")
ALL_OPS = TOKEN_OPS + SEND_OPS + ("speculate_get_output_topk", "top_p_candidates")


def run_and_check(
    op: str,
    a: Dict[str, np.ndarray],
    attrs: Dict[str, object],
    place: str,
    t: Dict[str, paddle.Tensor] | None = None,
) -> None:
    """Runs the op on `a` (or on the given tensors `t`, holding `a`'s values) and asserts every
    in-place output equals the reference (scores of the logprob op within 1e-5)."""
    want = reference(op, a, attrs)
    t = tensors(a, place) if t is None else t
    call(op, t, attrs)
    outs = outputs_of(op, t, attrs)
    for name, w in want.items():
        got = outs[name]
        if op == "speculate_logprobs_topk" and name == "logprob_scores":
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(got.reshape(w.shape), w, err_msg=f"{op}: {name}")


# ---- Families ----------------------------------------------------------------------------------------


def _error_case(cases, family, op, arg, cid, fn):
    cases.append(Case(cid, family, op, arg, "error", fn))


def _ok_case(cases, family, op, cid, fn):
    cases.append(Case(cid, family, op, "", "ok", fn))


def _changed(op, place, name, change):
    """A case function: the good call of `op` with tensor `name` replaced by `change(array)`."""

    def fn():
        a, attrs = good(op)
        a[name] = change(a[name])
        call(op, tensors(a, place), attrs)

    return fn


def _tensor_args(op):
    return [n for n in SPECS[op].tensors if n not in SPECS[op].optional]


def family_types(place, cases):
    bad = {"None": None, "numpy": "numpy", "int": 3, "float": 1.5, "list": "list"}
    for op in ALL_OPS:
        for name in _tensor_args(op):
            for label, value in bad.items():

                def fn(op=op, name=name, value=value):
                    a, attrs = good(op)
                    t = tensors(a, place)
                    t[name] = {"numpy": a[name], "list": a[name].tolist()}.get(value, value)
                    call(op, t, attrs)

                _error_case(cases, "types", op, name, f"types/{op}/{name}/{label}", fn)


def family_undefined_at_binding(place, cases):
    # The binding's own check: the raw Paddle entry point (no Python wrapper) given None.
    for op in ALL_OPS:
        spec = SPECS[op]
        for name in _tensor_args(op):

            def fn(op=op, name=name, spec=spec):
                a, attrs = good(op)
                args = list(spec.args({**tensors(a, place), **attrs}))
                args[spec.tensors.index(name)] = None
                getattr(_loader.load(), op)(*args)

            _error_case(cases, "undefined tensor (binding)", op, name, f"undefined/{op}/{name}", fn)


def _other_dtype(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.int64:
        return a.astype(np.int32)
    if a.dtype == np.int32:
        return a.astype(np.int64)
    if a.dtype == np.bool_:
        return a.astype(np.int32)
    return a.astype(np.float64)  # float32 logits/scores/temperature -> float64


def _each_tensor(place, cases, family, variants):
    """For every op and each of its tensors, in order, one error case per variant ``(label, change,
    applies)`` that ``applies(op, name)``: the good call with that tensor through ``change``."""
    for op in ALL_OPS:
        for name in SPECS[op].tensors:
            for label, change, applies in variants:
                if applies(op, name):
                    cid = f"{family}/{op}/{name}{label}"
                    _error_case(cases, family, op, name, cid, _changed(op, place, name, change))


def _always(op, name):
    return True


def family_dtypes(place, cases):
    _each_tensor(place, cases, "dtypes", [("", _other_dtype, _always)])


def family_ranks(place, cases):
    _each_tensor(
        place,
        cases,
        "ranks",
        [
            ("/0-d", _zero_d, _always),
            ("/extra-dim", lambda v: np.stack([v, v], axis=-1), _always),  # [..., 2]: never legal
            # [1]: a batch of one where the others have B
            (
                "/one-element",
                lambda v: v.reshape(-1)[:1],
                lambda op, name: name not in ONE_ELEMENT_OK.get(op, ()),
            ),
        ],
    )


def _zero_d(v: np.ndarray) -> np.ndarray:
    return np.array(v.reshape(-1)[0])


# Tensors for which one element is a valid shape in the good calls (no batch dimension).
ONE_ELEMENT_OK = {
    "speculate_save_output_topk": ("not_need_stop",),
    "mtp_save_first_token_with_topk": ("not_need_stop",),
    "suffix_cache_finish": ("finished",),  # finished defines the batch: one slot is valid
    # FastDeploy's step ops: seq_lens_this_time gives B <= the rows (one slot is valid), the
    # packed rows (next_tokens) and top_p's slots have no batch of their own
    "verify_draft_tokens": ("end_tokens", "seq_lens_this_time", "target_tokens"),
    "unified_update_model_status": ("end_tokens", "seq_lens_this_time", "has_running_seqs"),
    "naive_update_model_status": ("next_tokens", "seq_lens_this_time"),
    "top_p_candidates": ("top_p",),
}


# Tensors whose first dimension is the batch and must equal it (per-slot: [B] or [B, 1]); rows
# tensors ([>= B, X]) may have more rows but not fewer. The n-gram/suffix family's per-slot inputs
# are SLOT_STATE (seq_lens_this_time defines B); the rows of the suffix cache's query and step:
SUFFIX_QUERY_ROWS = ("token_ids_all", "draft_tokens", *suffix_ref.SUFFIX_STATE, "suffix_source")
PER_SLOT = {
    "ngram_match": SLOT_STATE,
    "hybrid_mtp_ngram": (
        "input_ids_len",
        "step_idx",
        "draft_token_num",
        "seq_lens_decoder",
        "max_dec_len",
    ),
    "speculate_get_accept_tokens_and_logits": ("seq_lens_encoder", "accept_num"),
    "speculate_logprobs_topk": ("temperature",),
    "verify_draft_tokens": (
        "step_output_len",
        "topp",
        "stop_flags",
        "seq_lens_encoder",
        "is_block_step",
        "reasoning_status",
        "max_dec_len",
        "step_idx",
        "seeds",
    ),
    "unified_update_model_status": (
        "seq_lens_encoder",
        "seq_lens_decoder",
        "step_output_len",
        "stop_flags",
        "is_paused",
        "prompt_lens",
        "step_idx",
        "max_dec_len",
    ),
    "speculate_save_output_topk": ("seq_lens_decoder", "prompt_lens"),
    "mtp_save_first_token_with_topk": ("seq_lens_decoder", "prompt_lens", "preempted_idx"),
    "suffix_cache_insert": ("prompt_lens", "step_idx", "seq_lens_decoder"),
    "suffix_cache_query": SLOT_STATE,
    "suffix_cache_step": SLOT_STATE,
}
ROWS = {
    "ngram_match": ("token_ids_all", "draft_tokens"),
    "hybrid_mtp_ngram": ("input_ids", "pre_ids", "draft_tokens"),
    "speculate_get_accept_tokens_and_logits": ("accept_tokens",),
    "mtp_save_first_token_with_topk": ("sampled_token_ids",),
    "verify_draft_tokens": ("step_output_ids", "step_input_ids"),
    "unified_update_model_status": ("step_input_ids", "step_output_ids", "token_ids_all"),
    "naive_update_model_status": ("accept_tokens",),
    "suffix_cache_insert": ("token_ids_all",),
    "suffix_cache_query": SUFFIX_QUERY_ROWS,
    "suffix_cache_step": SUFFIX_QUERY_ROWS,
}


def family_batch(place, cases):
    for op, names in PER_SLOT.items():
        for name in names:
            for delta in (-1, 1):
                change = (
                    (lambda v: v[:-1]) if delta < 0 else (lambda v: np.concatenate([v, v[-1:]]))
                )
                _error_case(
                    cases,
                    "batch mismatch",
                    op,
                    name,
                    f"batch/{op}/{name}/{delta:+d}",
                    _changed(op, place, name, change),
                )
    for op, names in ROWS.items():
        for name in names:
            _error_case(
                cases,
                "batch mismatch",
                op,
                name,
                f"batch/{op}/{name}/fewer-rows",
                _changed(op, place, name, lambda v: v[:-1]),
            )
            if op in TOKEN_OPS:

                def more(op=op, name=name):  # more rows than slots: the extra row is never touched
                    a, attrs = good(op)
                    a[name] = np.concatenate([a[name], np.full_like(a[name][-1:], 4)])
                    want = reference(
                        op, {k: v[:B] if k == name else v for k, v in a.items()}, attrs
                    )
                    t = tensors(a, place)
                    call(op, t, attrs)
                    if name in want:
                        got = t[name].numpy()
                        np.testing.assert_array_equal(got[:B], want[name])
                        np.testing.assert_array_equal(got[B:], a[name][B:])

                _ok_case(cases, "batch mismatch", op, f"batch/{op}/{name}/more-rows", more)
    # The tensor that defines the batch, checked against the rest (and blamed, not another).
    for op, name, arg in [
        ("speculate_logprobs_topk", "token_ids", "token_ids"),
        ("speculate_save_output_topk", "token_num_per_batch", "token_num_per_batch"),
    ]:
        _error_case(
            cases,
            "batch mismatch",
            op,
            arg,
            f"batch/{op}/{name}/0-d-batch",
            _changed(op, place, name, _zero_d),
        )
    for op, name in [
        ("verify_draft_tokens", "step_output_len"),
        ("unified_update_model_status", "stop_flags"),
        ("speculate_logprobs_topk", "token_ids"),
    ]:
        # an empty tensor with B > 0 slots: a mismatch, not an empty batch
        _error_case(
            cases,
            "batch mismatch",
            op,
            name,
            f"batch/{op}/{name}/empty-with-B>0",
            _changed(op, place, name, lambda v: v[:0]),
        )


def _empty_batch(op: str):
    """`good(op)` cut to B = 0 (every batch-sized dimension 0)."""
    a, attrs = good(op)
    cut = {}
    for k, v in a.items():
        if k == "cache_state" or k in (
            "end_tokens",
            "logits",
            "target_logits",
            "cu_seqlens_q_output",
            "cu_batch_token_offset",
            "token_ids",
            "logprob_token_ids",
            "logprob_scores",
            "logprob_ranks",
            "has_running_seqs",
        ):
            cut[k] = v
        else:
            cut[k] = v[:0]
    if op == "speculate_get_accept_tokens_and_logits":
        cut["cu_batch_token_offset"] = np.full(1, 77, np.int32)
    if op == "speculate_compute_cu_batch_offset":
        attrs = dict(attrs, real_bsz=0)
        cut["cu_batch_token_offset"] = np.full(1, 77, np.int32)
    if op == "speculate_logprobs_topk":
        cut["cu_batch_token_offset"] = np.zeros(1, np.int32)
    return cut, attrs


def family_zero_sizes(place, cases):
    for op in TOKEN_OPS:

        def fn(op=op):
            a, attrs = _empty_batch(op)
            run_and_check(op, a, attrs, place)
            if "cu_batch_token_offset" in a and op != "speculate_logprobs_topk":
                want0 = reference(op, a, attrs)["cu_batch_token_offset"][0]
                assert want0 == 0, "cu[0] of an empty batch must be 0"

        _ok_case(cases, "zero sizes", op, f"zero/{op}/B=0", fn)

    def logprobs_no_rows_b_gt_0(a):
        for k in (
            "target_logits",
            "token_ids",
            "logprob_token_ids",
            "logprob_scores",
            "logprob_ranks",
        ):
            a[k] = a[k][:0]
        a["cu_batch_token_offset"] = np.zeros(4, np.int32)

    def logprobs_b0_with_rows(a):  # no slot: every row is padding (no stale value survives)
        a["cu_batch_token_offset"] = np.array([5], np.int32)
        a["temperature"] = a["temperature"][:0]

    def accept_no_out_rows(a):
        a["token_ids"], a["target_logits"] = a["token_ids"][:0], a["target_logits"][:0]

    def accept_no_logits_rows(a):
        a["logits"] = a["logits"][:0]

    def width_0(name):
        def edit(a):
            a[name] = a[name][..., :0]

        return f"{name}-width-0", edit

    # the good call of `op` with its tensors edited in place by `edit`
    for op, (label, edit) in [
        ("speculate_logprobs_topk", ("N=0", logprobs_no_rows_b_gt_0)),
        ("speculate_logprobs_topk", ("B=0-N>0", logprobs_b0_with_rows)),
        ("speculate_get_accept_tokens_and_logits", ("N=0", accept_no_out_rows)),
        ("speculate_get_accept_tokens_and_logits", ("R=0", accept_no_logits_rows)),
        ("ngram_match", width_0("token_ids_all")),
        ("unified_update_model_status", width_0("token_ids_all")),
        ("verify_draft_tokens", width_0("end_tokens")),
        ("unified_update_model_status", width_0("end_tokens")),
    ]:

        def fn(op=op, edit=edit):
            a, attrs = good(op)
            edit(a)
            run_and_check(op, a, attrs, place)

        _ok_case(cases, "zero sizes", op, f"zero/{op}/{label}", fn)

    for op, name in [
        ("verify_draft_tokens", "step_input_ids"),
        ("unified_update_model_status", "step_input_ids"),
        ("speculate_get_accept_tokens_and_logits", "logits"),
        ("speculate_logprobs_topk", "target_logits"),
        ("speculate_logprobs_topk", "logprob_token_ids"),
        ("hybrid_mtp_ngram", "pre_ids"),
        ("speculate_save_output_topk", "logprob_token_ids"),
    ]:
        # a dimension the op needs >= 1 of: named error
        _error_case(
            cases,
            "zero sizes",
            op,
            name,
            f"zero/{op}/{name}-no-columns",
            _changed(op, place, name, lambda v: v[:, :0]),
        )


def family_views(place, cases):
    for op in ALL_OPS:
        for name in SPECS[op].tensors:

            def fn(op=op, name=name):
                a, attrs = good(op)
                t = tensors(a, place)
                v = a[name]
                wide = np.repeat(v[..., None], 2, axis=-1) if v.ndim >= 1 else v
                pt = to_place(wide, "cpu" if _host_only(name) else place)
                view = pt[..., 0]
                if view.is_contiguous():
                    raise AssertionError("expected a strided view")
                t[name] = view
                call(op, t, attrs)

            if not hasattr(paddle.Tensor, "is_contiguous"):
                continue  # Paddle 2.6: no strided views at all
            _error_case(cases, "strided views", op, name, f"views/{op}/{name}", fn)
    for op in TOKEN_OPS:  # leading rows of bigger buffers (the runner's buf[:bsz]) stay usable

        def fn(op=op):
            a, attrs = good(op)
            if op == "speculate_compute_cu_batch_offset":
                attrs = dict(attrs)
            big = {
                k: to_place(
                    np.concatenate([v, v]) if v.ndim else v, "cpu" if _host_only(k) else place
                )
                for k, v in a.items()
            }
            t = {k: big[k][: a[k].shape[0]] for k in a}
            run_and_check(op, a, attrs, place, t)

        _ok_case(cases, "strided views", op, f"views/{op}/leading-rows", fn)


def family_grad(place, cases):
    for op in TOKEN_OPS + ("speculate_get_output_topk",):
        for name in sorted(SPECS[op].outputs):

            def fn(op=op, name=name):
                a, attrs = good(op)
                t = tensors(a, place)
                t[name].stop_gradient = False
                call(op, t, attrs)

            _error_case(cases, "grad", op, name, f"grad/{op}/{name}", fn)


def _spread(values, n, dtype, seed):
    v = np.resize(np.array(values, dtype=object), n)
    np.random.default_rng(seed).shuffle(v)
    return np.array(v.tolist(), dtype=dtype)


def family_values(place, cases):
    ext32 = [I32_MIN, I32_MIN + 1, -1, 0, I32_MAX - 1, I32_MAX]
    ext64 = [I64_MIN, I64_MIN + 1, I32_MIN, -1, 0, I32_MAX, I32_MAX + 1, I64_MAX - 1, I64_MAX]
    for op in TOKEN_OPS:
        a0, _ = good(op)
        for name, v in a0.items():
            if v.dtype not in (
                np.int32,
                np.int64,
            ):  # the cache's state (uint8): family "cache state"
                continue
            for seed in (1, 2):

                def fn(op=op, name=name, seed=seed):
                    a, attrs = good(op)
                    ext = ext64 if a[name].dtype == np.int64 else ext32
                    a[name] = _spread(ext, a[name].size, a[name].dtype, seed).reshape(a[name].shape)
                    if op == "speculate_compute_cu_batch_offset" and name == "accept_num":
                        attrs = dict(
                            attrs, max_accept_num=7
                        )  # an unclamped sum past INT32_MAX has no answer
                    run_and_check(op, a, attrs, place)

                _ok_case(cases, "hostile values", op, f"values/{op}/{name}/extremes-{seed}", fn)
    for label, value in [("nan", np.nan), ("+inf", np.inf), ("-inf", -np.inf)]:

        def fn(value=value):
            a, attrs = good("speculate_logprobs_topk")
            a["target_logits"] = a["target_logits"].copy()
            a["target_logits"][[0, 3], [1, 4]] = value
            t = tensors(a, place)
            call("speculate_logprobs_topk", t, attrs)
            ids, ranks = t["logprob_token_ids"].numpy(), t["logprob_ranks"].numpy()
            want = reference("speculate_logprobs_topk", a, attrs)
            clean = [
                r for r in range(5) if r not in (0, 3)
            ]  # rows 0..4 valid (cu[B] = 5), 5 padding
            np.testing.assert_array_equal(ids[clean], want["logprob_token_ids"][clean])
            np.testing.assert_array_equal(ids[5], [-1] * 4)
            assert ((ids[:, 1:] >= -1) & (ids[:, 1:] < 9)).all() and (
                (ranks >= 0) & (ranks <= 9)
            ).all()

        _ok_case(
            cases,
            "hostile values",
            "speculate_logprobs_topk",
            f"values/logprobs/logits-{label}",
            fn,
        )
    for t_val in [
        1e-45,
        2.9e-39,
        1e-30,
        9.9e-6,
        1e-5,
        0.0,
        -0.0,
        -1.0,
        np.nan,
        np.inf,
        -np.inf,
        3e38,
    ]:

        def fn(
            t_val=t_val,
        ):  # tiny positive temperatures: greedy (unscaled), never NaN or a wrong order
            a, attrs = good("speculate_logprobs_topk")
            a["target_logits"] = (
                a["target_logits"] * 40
            )  # logits in the tens: x / 1e-30 would overflow
            a["temperature"] = np.full(B, t_val, np.float32)
            run_and_check("speculate_logprobs_topk", a, attrs, place)
            t = tensors(a, place)
            call("speculate_logprobs_topk", t, attrs)
            s = t["logprob_scores"].numpy()[:5]
            assert not np.isnan(s).any(), f"NaN scores at temperature {t_val}"

        _ok_case(
            cases,
            "hostile values",
            "speculate_logprobs_topk",
            f"values/logprobs/temperature-{t_val!r}",
            fn,
        )
    # seq_lens_decoder at the int32 limit: it saturates instead of wrapping to a negative length.
    for dec, enc, n in [
        (I32_MAX, 0, 2),
        (I32_MAX - 1, 0, 1),
        (I32_MAX - 1, 0, 2),
        (I32_MAX - 5, 9, 1),
        (5, I32_MAX, 1),
    ]:

        def fn(dec=dec, enc=enc, n=n):
            op = "unified_update_model_status"
            a, attrs = good(op)
            a["seq_lens_decoder"] = np.array([dec, 5, 6], np.int32)
            a["seq_lens_encoder"] = np.array([enc, 4, 0], np.int32)
            a["step_output_len"] = np.array([n, 1, 3], np.int32)
            a["max_dec_len"] = np.full(B, 100, np.int64)
            a["token_ids_all"] = np.zeros((B, 64), np.int64)
            run_and_check(op, a, attrs, place)
            t = tensors(a, place)
            call(op, t, attrs)
            assert (t["seq_lens_decoder"].numpy() >= 0).all(), "seq_lens_decoder wrapped around"

        _ok_case(
            cases,
            "hostile values",
            "unified_update_model_status",
            f"values/unified_update/dec={dec},enc={enc},n={n}",
            fn,
        )


# Attributes whose None is a documented value (suffix_match, suffix_cache_query, suffix_cache_step:
# max_draft_tokens None means K).
NONE_IS_DEFAULT = {
    ("suffix_match", "max_draft_tokens"),
    ("suffix_cache_query", "max_draft_tokens"),
    ("suffix_cache_step", "max_draft_tokens"),
}


def family_attrs(place, cases):
    int_bad = [
        ("2^31", 2**31),
        ("-2^31-1", -(2**31) - 1),
        ("2^63", 2**63),
        ("-2^63-1", -(2**63) - 1),
        ("2^64", 2**64),
        ("float", 2.5),
        ("nan", float("nan")),
        ("None", None),
        ("True", True),
        ("str", "3"),
        ("tensor", "tensor"),
    ]
    int64_bad = [x for x in int_bad if x[0] not in ("2^31", "-2^31-1")]
    bool_bad = [
        ("2", 2),
        ("-1", -1),
        ("None", None),
        ("str", "yes"),
        ("float", 0.5),
        ("nan", float("nan")),
    ]
    for op in ALL_OPS:
        for name, kind in SPECS[op].attrs:
            if name == "cache_config":  # the cache's configuration: family "suffix cache"
                continue
            ctype = getattr(kind, "ctype", "bool")
            if isinstance(kind, FloatAttr):
                bads = [
                    ("nan", float("nan")),
                    ("+inf", float("inf")),
                    ("None", None),
                    ("True", True),
                    ("str", "3"),
                    ("tensor", "tensor"),
                ]
            elif ctype == "bool":
                bads = bool_bad
            elif kind.none is not None:
                bads = [
                    x for x in (int64_bad if kind.hi > 2**31 else int_bad) if x[0] != "None"
                ] + [("-1", -1)]
            else:
                bads = int64_bad if kind.hi > 2**31 else int_bad
            if (op, name) in NONE_IS_DEFAULT:
                bads = [x for x in bads if x[0] != "None"]
            for label, value in bads:

                def fn(op=op, name=name, value=value):
                    a, attrs = good(op)
                    v = paddle.to_tensor(np.array([3], np.int64)) if value == "tensor" else value
                    call(op, tensors(a, place), dict(attrs, **{name: v}))

                _error_case(cases, "attribute limits", op, name, f"attrs/{op}/{name}/{label}", fn)
    # Semantic ranges the binding owns.
    for op, name, value in [
        ("ngram_match", "max_ngram_size", 0),
        ("ngram_match", "max_ngram_size", 65),
        ("hybrid_mtp_ngram", "min_ngram_size", 4),
        ("hybrid_mtp_ngram", "max_ngram_size", -1),
        ("speculate_compute_cu_batch_offset", "real_bsz", -1),
        ("speculate_compute_cu_batch_offset", "real_bsz", 4),
        ("speculate_get_output_topk", "real_k", 21),
        ("speculate_save_output_topk", "message_flag", 256),
        ("mtp_save_first_token_with_topk", "message_flag", -1),
    ]:

        def fn(op=op, name=name, value=value):
            a, attrs = good(op)
            call(op, tensors(a, place), dict(attrs, **{name: value}))

        _error_case(cases, "attribute limits", op, name, f"attrs/{op}/{name}/range-{value}", fn)
    # Limits that are valid: exact results.
    for op, changes in [
        ("ngram_match", dict(threshold=2**63 - 1)),
        ("ngram_match", dict(threshold=0)),
        ("ngram_match", dict(max_draft_tokens=I32_MAX)),
        ("ngram_match", dict(max_ngram_size=64)),
        ("hybrid_mtp_ngram", dict(threshold=2**63 - 1)),
        ("hybrid_mtp_ngram", dict(max_draft_tokens=-5)),
        ("speculate_compute_cu_batch_offset", dict(max_accept_num=I32_MAX)),
        ("speculate_compute_cu_batch_offset", dict(max_accept_num=0)),
        ("speculate_compute_cu_batch_offset", dict(real_bsz=np.int64(2))),
        ("speculate_logprobs_topk", dict(raw_logits=np.bool_(True))),
    ]:

        def fn(op=op, changes=changes):
            a, attrs = good(op)
            run_and_check(op, a, dict(attrs, **changes), place)

        _ok_case(cases, "attribute limits", op, f"attrs/{op}/valid-{changes}", fn)


def family_cache(place, cases):
    """The global suffix cache: the `cache` argument itself, its state's size and configuration."""
    for op in CACHE_OPS:
        for label, value in [
            ("None", None),
            ("dict", "dict"),
            ("numpy", "numpy"),
            ("tensor", "tensor"),
        ]:

            def fn(op=op, value=value):
                a, attrs = good(op)
                t = tensors(a, place)
                c = _cache_of(t, attrs, place)
                t["cache"] = {
                    "dict": {"cache_state": c.state},
                    "numpy": a["cache_state"],
                    "tensor": c.state,
                }.get(value, value)
                call(op, t, attrs)

            _error_case(cases, "suffix cache", op, "cache", f"cache/{op}/cache={label}", fn)
        # A state of another size than its configuration lays out.
        for label, cut in [
            ("empty", lambda v: v[:0]),
            ("short", lambda v: v[:-1]),
            ("long", lambda v: np.concatenate([v, v[:8]])),
            ("2-d", lambda v: v.reshape(-1, 8)),
        ]:
            _error_case(
                cases,
                "suffix cache",
                op,
                "cache_state",
                f"cache/{op}/cache_state-{label}",
                _changed(op, place, "cache_state", cut),
            )
        # A configuration the binding refuses (the Python SuffixCache refuses it first: the binding's
        # own check, reached with a SuffixCache built around it).
        for field, value in [
            ("rows", 0),
            ("width", 1 << 17),
            ("slots", 0),
            ("key_len", 0),
            ("key_len", 9),
            ("max_occurrences", 8),
            ("vocab_size", 0),
            ("pair_vocab", -1),
            ("line_planes", 48),
        ]:

            def fn(op=op, field=field, value=value):
                a, attrs = good(op)
                cfg = dataclasses.replace(CACHE_CONFIG, **{field: value})
                call(op, tensors(a, place), dict(attrs, cache_config=cfg.values()))

            _error_case(cases, "suffix cache", op, field, f"cache/{op}/{field}={value}", fn)
    for op in ("suffix_cache_query", "suffix_cache_step"):
        _error_case(
            cases,
            "suffix cache",
            op,
            "suffix_source",
            f"cache/{op[13:]}/suffix_source-short",
            _changed(op, place, "suffix_source", lambda v: v[:-1]),
        )
    # Valid limits: exact results.
    for op, changes in [
        ("suffix_cache_evict", dict(keep=0)),
        ("suffix_cache_evict", dict(keep=2**63 - 1)),
        ("suffix_cache_evict", dict(keep=CACHE_ROWS)),
        ("suffix_cache_query", dict(threshold=0)),
        ("suffix_cache_query", dict(threshold=2**63 - 1)),
        ("suffix_cache_query", dict(pad_to_max=True)),
        ("suffix_cache_query", dict(min_token_prob=0.0)),
        ("suffix_cache_query", dict(max_spec_factor=0.0)),
        ("suffix_cache_query", dict(max_spec_offset=-1e30)),
        ("suffix_cache_query", dict(max_tree_depth=1)),
        ("suffix_cache_step", dict(pad_to_max=True)),
        ("suffix_cache_step", dict(threshold=0)),
        ("suffix_cache_step", dict(max_tree_depth=1)),
    ]:

        def fn(op=op, changes=changes):
            a, attrs = good(op)
            run_and_check(op, a, dict(attrs, **changes), place)

        _ok_case(cases, "suffix cache", op, f"cache/{op}/valid-{changes}", fn)
    for key_len in (1, 8):  # the key length's limits: a fresh cache of that configuration
        for op in ("suffix_cache_insert", "suffix_cache_step"):

            def fn(op=op, key_len=key_len):
                a, attrs = good(op)
                cfg = dataclasses.replace(CACHE_CONFIG, key_len=key_len)
                a["cache_state"] = SuffixCache.allocate(
                    **dataclasses.asdict(cfg), place="cpu"
                ).state.numpy()
                run_and_check(op, a, dict(attrs, cache_config=cfg.values()), place)

            _ok_case(cases, "suffix cache", op, f"cache/{op}/valid-key_len={key_len}", fn)

    def width_0():  # no history at all: nothing cached, no draft
        for op in ("suffix_cache_insert", "suffix_cache_query", "suffix_cache_step"):
            a, attrs = good(op)
            a["token_ids_all"] = a["token_ids_all"][:, :0]
            run_and_check(op, a, attrs, place)

    _ok_case(cases, "suffix cache", "suffix_cache_insert", "cache/token_ids_all-width-0", width_0)


# ---- A cache state the ops did not write: every value read from it is clamped or checked ----------
# (docs/contract/suffix.md, "A state the ops did not write"). Each case corrupts one value of a state
# the ops built, hands the ops the state as a view into a larger buffer whose bytes before and after
# hold a guard pattern, and checks that the guards are intact and, where the contract defines the
# result (lengths, request numbers, the counter, slot states), that it equals the reference's on the
# state as the ops read it. Corrupted counts, pairs, keys, line filter, scratch, and a valid request
# number in another's row: no defined drafts (the GPU trusts the counts and the filter to skip its
# scan), only the guards and no crash.

GUARD_BYTES = 256  # on each side of the state (a multiple of 16: the state's alignment)
STATE_OPS = ("suffix_cache_insert", "suffix_cache_evict", "suffix_cache_query", "suffix_cache_step")


def _state_case(
    op: str, place: str, corrupt: Callable[[Dict[str, np.ndarray]], None], exact: bool, skip=()
):
    def fn():
        a, attrs = good(op)
        parts = cache_parts(a["cache_state"], attrs)
        corrupt(parts)
        a["cache_state"] = with_parts(a["cache_state"], attrs, parts)
        t = tensors(a, place)
        guard = np.full(GUARD_BYTES, 0xA5, np.uint8)
        big = to_place(np.concatenate([guard, a["cache_state"], guard]), place)
        t["cache_state"] = big[GUARD_BYTES : GUARD_BYTES + a["cache_state"].size]
        want = reference(op, a, attrs) if exact else {}
        call(op, t, attrs)
        if place == "gpu":
            paddle.device.cuda.synchronize()
        raw = big.numpy()
        if not ((raw[:GUARD_BYTES] == 0xA5).all() and (raw[-GUARD_BYTES:] == 0xA5).all()):
            raise AssertionError("cache_state: written outside the tensor (a guard byte changed)")
        outs = outputs_of(op, t, attrs)
        for name, w in want.items():
            if name not in skip:
                np.testing.assert_array_equal(
                    outs[name].reshape(w.shape), w, err_msg=f"{op}: {name}"
                )

    return fn


def family_cache_state(place, cases):
    W = CACHE_WIDTH
    lens = [-1, -5, W + 1, I32_MAX, I32_MIN, I64_MAX, I64_MIN]
    reqs = [-5, I64_MIN, 1 << 39, I64_MAX]
    counters = [-1, -7, I32_MIN, I64_MIN, I64_MAX, 1 << 38, (1 << 40) - 1, (1 << 40) + 3, I32_MAX]
    slot_values = [I64_MAX, 1 << 39, "counter", -3, I64_MIN]

    def occupied(p):  # an occupied row and an empty one (the good state has both)
        q = p["cache_rows"][:, 0]
        return int(np.argmax(q >= 0)), int(np.argmax(q < 0)) if (q < 0).any() else None

    # Rows corrupted under the counts and the line filter, which steer the GPU's scan: the GPU's drafts
    # are not defined then (the state the ops write is).
    drafts = (
        "draft_tokens",
        "seq_lens_this_time",
        "suffix_tokens",
        "suffix_probs",
        "suffix_meta",
        "suffix_source",
    )
    for op in STATE_OPS:
        skip = drafts if place == "gpu" else ()
        for v in lens:
            for which in ("occupied", "empty"):

                def corrupt(p, v=v, which=which):
                    full, empty = occupied(p)
                    r = full if which == "occupied" or empty is None else empty
                    p["cache_rows"][r, 1] = v

                _ok_case(
                    cases,
                    "cache state",
                    op,
                    f"state/{op}/row-length={v}/{which}",
                    _state_case(op, place, corrupt, exact=True, skip=skip),
                )
        for v in reqs:

            def corrupt(p, v=v):
                p["cache_rows"][occupied(p)[0], 0] = v

            _ok_case(
                cases,
                "cache state",
                op,
                f"state/{op}/row-request={v}",
                _state_case(op, place, corrupt, exact=True, skip=skip),
            )

        def other_row(p):  # a valid number in another request's row, the length past the width
            r = occupied(p)[0]
            p["cache_rows"][r] = (p["cache_rows"][r, 0] + 1, 2 * W)

        _ok_case(
            cases,
            "cache state",
            op,
            f"state/{op}/row-request-of-another-row",
            _state_case(op, place, other_row, exact=False),
        )
        for name in (
            "cache_counts",
            "cache_pairs",
            "cache_keys",
            "cache_lines",
            "query_cand",
            "query_stat",
            "query_lines",
        ):

            def garbage(p, name=name):
                rng = np.random.default_rng(7)
                info = np.iinfo(p[name].dtype)
                p[name][...] = rng.integers(
                    info.min, info.max, p[name].shape, dtype=p[name].dtype, endpoint=True
                )

            _ok_case(
                cases,
                "cache state",
                op,
                f"state/{op}/{name}-garbage",
                _state_case(op, place, garbage, exact=False),
            )
    for op in ("suffix_cache_insert", "suffix_cache_evict", "suffix_cache_step"):
        for v in counters:

            def corrupt(p, v=v):
                p["cache_counter"][0] = v

            # The GPU insert counts its blocks in the counter's bits 40 and up: with any of them set
            # before the call, its new value is not defined. The rest is compared: the contract
            # leaves it undefined too, but with B slots all resident at once it comes out defined.
            skip = ("cache_counter",) if place == "gpu" and (v < 0 or v >= 1 << 40) else ()
            _ok_case(
                cases,
                "cache state",
                op,
                f"state/{op}/counter={v}",
                _state_case(op, place, corrupt, exact=True, skip=skip),
            )
    for op in ("suffix_cache_insert", "suffix_cache_step"):
        for v in slot_values:
            for b in range(B):

                def corrupt(p, v=v, b=b):
                    p["cache_slots"][b] = p["cache_counter"][0] if v == "counter" else v

                _ok_case(
                    cases,
                    "cache state",
                    op,
                    f"state/{op}/slot{b}={v}",
                    _state_case(op, place, corrupt, exact=True),
                )


def a_shape(cut) -> str:
    return "x".join(str(n) for n in cut(np.zeros((5, 40))).shape)


@contextlib.contextmanager
def _env(var, value):
    old = os.environ.get(var)
    if value is None:
        os.environ.pop(var, None)
    else:
        os.environ[var] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old


def _env_error_case(place, cases, op, var, value):
    """The good call of ``op`` with ``$var`` set to ``value`` (None: unset) fails naming ``var``."""

    def fn():
        a, attrs = good(op)
        with _env(var, value):
            call(op, tensors(a, place), attrs)

    _error_case(cases, "environment", op, var, f"env/{op}/{var}={value!r}", fn)


def family_env(place, cases):
    for op, var, dflt in [
        ("ngram_match", "INFER_WITH_REFERENCE_TOKENUM_THRESHOLD", 128),
        ("hybrid_mtp_ngram", "SPEC_TOKENUM_THRESHOLD", 1024),
    ]:
        for value in [
            "abc",
            "1e3",
            "12abc",
            " 12 ",
            "0x10",
            "99999999999999999999",
            "-99999999999999999999",
            "4.0",
        ]:
            _env_error_case(place, cases, op, var, value)
        for value, thr in [
            ("", dflt),
            (None, dflt),
            ("5", 5),
            ("-5", -5),
            ("0", 0),
            ("+7", 7),
            (str(I64_MAX), I64_MAX),
            (str(I64_MIN), I64_MIN),
        ]:

            def fn(op=op, var=var, value=value, thr=thr):
                a, attrs = good(op)
                with _env(var, value):
                    want = reference(op, a, dict(attrs, threshold=thr))
                    t = tensors(a, place)
                    call(op, t, attrs)
                for k, w in want.items():
                    np.testing.assert_array_equal(t[k].numpy().reshape(w.shape), w, err_msg=k)

            _ok_case(cases, "environment", op, f"env/{op}/{var}={value!r}", fn)
    bad_values = {
        "INFERENCE_MSG_QUEUE_ID": ["abc", "1.5", "99999999999999999999"],
        "INFERENCE_MSG_ID": ["0", "2", "-3", "x", str(2**31)],
    }
    for var, values in bad_values.items():
        for value in values:
            for op in SEND_OPS + ("speculate_get_output_topk",):
                if op == "speculate_get_output_topk" and var == "INFERENCE_MSG_ID":
                    continue  # the receiver does not read it
                _env_error_case(place, cases, op, var, value)
    # Odd but integer ids: ftok keeps the low 8 bits, so these four name the queue of id 0, which no
    # reservation hands out (free_queue_id: 2 .. 255); concurrent runs take turns through its lock file.
    for value in ["0", "256", "-256", str(2**40)]:

        def fn(value=value):
            import fcntl

            from fastdeploy_spec import transport
            from fastdeploy_spec.transport import lock_path

            step = msg_ref.make_step(np.random.default_rng(5), batch=2, columns=3, full=True)
            qid = int(value)
            with open(lock_path(0), "a") as lock, _env("INFERENCE_MSG_QUEUE_ID", value):
                fcntl.flock(lock, fcntl.LOCK_EX)
                transport.remove_queue(qid)
                try:
                    msg_ref.send_step(step)
                    bufs = msg_ref.receive_tensors()
                    ops.speculate_get_output_topk(*bufs, 20, 0, False)
                    want = msg_ref.apply_message(msg_ref.fresh_buffers(), step)
                    np.testing.assert_array_equal(bufs[0].numpy().reshape(-1), want["tokens"])
                finally:
                    transport.remove_queue(qid)

        _ok_case(cases, "environment", "speculate_get_output_topk", f"env/queue-id={value}", fn)


def family_queue(place, cases):
    def payload(step):
        raw_receive_all(
            qid()
        )  # what earlier cases (valid sends of other families) left in the queue
        return payload_of(step)

    def qid():
        return int(os.environ["INFERENCE_MSG_QUEUE_ID"])

    def receive(wait=False):
        bufs = msg_ref.receive_tensors()
        ops.speculate_get_output_topk(*bufs, 20, 0, wait)
        return bufs

    def whole_after(step):
        bufs = receive()
        want = msg_ref.apply_message(msg_ref.fresh_buffers(), step)
        np.testing.assert_array_equal(bufs[0].numpy().reshape(-1), want["tokens"])
        np.testing.assert_array_equal(bufs[2].numpy(), want["ranks"])

    step = msg_ref.make_step(np.random.default_rng(9), batch=3, columns=4, full=True)
    malformed = {
        "foreign-bytes": lambda p: [b"hello"],
        "empty": lambda p: [b""],
        "bad-magic": lambda p: [b"\0" * 4 + fragments(p, 1, 1)[0][4:]],
        "index>=count": lambda p: [FRAGMENT_HEADER.pack(FRAGMENT_MAGIC, 1, 3, 2, len(p)) + p],
        "count-0": lambda p: [FRAGMENT_HEADER.pack(FRAGMENT_MAGIC, 1, 0, 0, len(p)) + p],
        "total-huge": lambda p: [FRAGMENT_HEADER.pack(FRAGMENT_MAGIC, 1, 0, 2, 2**62) + p[:8]],
        "total-short": lambda p: [FRAGMENT_HEADER.pack(FRAGMENT_MAGIC, 1, 0, 1, len(p) - 4) + p],
        "orphan-fragment": lambda p: fragments(p, 2, 3)[1:],
        "out-of-sequence": lambda p: [fragments(p, 3, 3)[0], fragments(p, 3, 3)[2]],
        "truncated-payload": lambda p: [fragments(p[:20], 4, 1)[0]],
        "flag-word-22-columns": lambda p: [
            fragments(p[:8] + (3 | (22 << 8)).to_bytes(4, "little") + p[12:], 5, 1)[0]
        ],
        "negative-batch": lambda p: [
            fragments(p[:12] + (-5 & 0xFFFFFFFF).to_bytes(4, "little") + p[16:], 6, 1)[0]
        ],
    }
    for label, make in malformed.items():

        def fn(make=make):
            p = payload(step)
            for text in make(p):
                raw_send(qid(), 4300, text)
            raw_send(qid(), 4301, fragments(p, 7, 1)[0])  # then a good message from another sender
            errors = []
            for _ in range(len(make(p)) + 2):  # each malformed item costs at most one error
                try:
                    bufs = receive()
                except Exception as e:
                    errors.append(e)
                    continue
                if bufs[0].numpy()[0, 0] != -2:
                    break
            want = msg_ref.apply_message(msg_ref.fresh_buffers(), step)
            np.testing.assert_array_equal(
                bufs[0].numpy().reshape(-1),
                want["tokens"],
                err_msg="the good message after the malformed traffic",
            )
            if errors:
                raise errors[0]  # the runner checks that it names the op

        _error_case(
            cases, "queue traffic", "speculate_get_output_topk", "", f"queue/malformed/{label}", fn
        )

    def interleaved():
        p1 = payload(step)
        step2 = msg_ref.make_step(np.random.default_rng(10), batch=2, columns=3, full=True)
        p2 = payload(step2)
        f1, f2 = fragments(p1, 20, 3), fragments(p2, 21, 2)
        for pid, text in [
            (5001, f1[0]),
            (5002, f2[0]),
            (5001, f1[1]),
            (5002, f2[1]),
            (5001, f1[2]),
        ]:
            raw_send(qid(), pid, text)
        whole_after(step2)  # completes first
        whole_after(step)

    _ok_case(
        cases,
        "queue traffic",
        "speculate_get_output_topk",
        "queue/interleaved-senders",
        interleaved,
    )

    def half_sent_nonblocking():
        p = payload(step)
        f = fragments(p, 30, 3)
        raw_send(qid(), 5003, f[0])
        start = time.monotonic()
        bufs = receive()
        assert time.monotonic() - start < 0.5, (
            "a non-blocking receive blocked on a half-sent message"
        )
        assert bufs[0].numpy()[0, 0] == -2
        raw_send(qid(), 5003, f[1])
        assert receive()[0].numpy()[0, 0] == -2
        raw_send(qid(), 5003, f[2])
        whole_after(step)  # the fragments kept across the calls: nothing lost

    _ok_case(
        cases,
        "queue traffic",
        "speculate_get_output_topk",
        "queue/half-sent-nonblocking",
        half_sent_nonblocking,
    )

    def empty_queue_nonblocking():
        start = time.monotonic()
        assert receive()[0].numpy()[0, 0] == -2
        assert time.monotonic() - start < 0.5

    _ok_case(
        cases,
        "queue traffic",
        "speculate_get_output_topk",
        "queue/empty-nonblocking",
        empty_queue_nonblocking,
    )


def sticky_check(place: str) -> Callable[[], None]:
    """A correct call whose result is checked: after bad calls on a GPU, no CUDA error may stick."""

    def fn():
        for op in (
            "verify_draft_tokens",
            "speculate_get_accept_tokens_and_logits",
            "speculate_logprobs_topk",
        ):
            a, attrs = good(op, seed=11)
            run_and_check(op, a, attrs, place)
        if place == "gpu":
            paddle.device.cuda.synchronize()

    return fn


FAMILIES = [
    family_types,
    family_undefined_at_binding,
    family_dtypes,
    family_ranks,
    family_batch,
    family_zero_sizes,
    family_views,
    family_grad,
    family_values,
    family_attrs,
    family_cache,
    family_cache_state,
    family_env,
    family_queue,
]
HOST_ONLY_FAMILIES = {"environment", "queue traffic"}  # no tensor place: run once, on the CPU pass


def _selftest_cases(cases):
    """Cases that crash and hang on purpose (FDSPEC_HOSTILE_SELFTEST=1): the parent must report them."""
    import signal

    _ok_case(cases, "selftest", "", "selftest/crash", lambda: os.kill(os.getpid(), signal.SIGSEGV))
    _ok_case(cases, "selftest", "", "selftest/hang", lambda: time.sleep(3600))
    _ok_case(cases, "selftest", "", "selftest/after", lambda: None)


def build_cases(place: str) -> List[Case]:
    cases: List[Case] = []
    if os.environ.get("FDSPEC_HOSTILE_SELFTEST") == "1":
        _selftest_cases(cases)
    for family in FAMILIES:
        before = len(cases)
        family(place, cases)
        fam = cases[before].family if len(cases) > before else None
        if place == "gpu" and fam in HOST_ONLY_FAMILIES:
            del cases[before:]
            continue
        if fam is not None:
            _ok_case(cases, "sticky-error check", "", f"sticky/after-{fam}", sticky_check(place))
    return cases
