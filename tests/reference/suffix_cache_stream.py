"""Random request streams for the global cache's tests and soak runs: slots that take requests, prefill,
decode a few accepted tokens per step, finish (sometimes through ``suffix_cache_finish``) and empty.
Responses copy stretches of a shared pool of phrases, so requests repeat each other (the global cache
has something to find), over small vocabularies (ties). ``Driver`` steps the ops and the reference
together and compares them; ``soak`` is the long run (also used by the suffix_cache benchmark (benchmarks/suffix_cache.py)
--soak on the GPU, so nothing here needs hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from fastdeploy_spec.ops.suffix_cache import (
    INSERT_TENSORS,
    QUERY_OUTPUTS,
    QUERY_TENSORS,
    SuffixCache,
    line_words,
    suffix_cache_evict,
    suffix_cache_finish,
    suffix_cache_insert,
    suffix_cache_query,
    suffix_cache_step,
)
from tests.helpers import to_place
from tests.reference.suffix_cache import SuffixCacheRef

QUERY_ARGS, INSERT_ARGS, OUTPUTS = QUERY_TENSORS, INSERT_TENSORS, QUERY_OUTPUTS


@dataclass
class _Req:
    prompt: np.ndarray
    answer: np.ndarray
    done: int = 0  # generated tokens so far
    prefilled: bool = False


@dataclass
class StreamStep:
    """One step's inputs: the share-inputs of the insert and the query, and the slots to finish."""

    token_ids_all: np.ndarray
    prompt_lens: np.ndarray
    step_idx: np.ndarray
    seq_lens_encoder: np.ndarray
    seq_lens_decoder: np.ndarray
    finished: np.ndarray
    k: int

    def query_inputs(self, rng: np.random.Generator) -> dict:
        B, k = len(self.seq_lens_encoder), self.k
        slt = np.where(self.seq_lens_encoder > 0, self.seq_lens_encoder, 1).astype(np.int32)
        return dict(
            token_ids_all=self.token_ids_all,
            prompt_lens=self.prompt_lens,
            step_idx=self.step_idx,
            draft_token_num=np.full(B, k, np.int32),
            draft_tokens=-(np.arange(B * (k + 1), dtype=np.int64).reshape(B, k + 1) + 100),
            seq_lens_this_time=slt,
            seq_lens_encoder=self.seq_lens_encoder,
            seq_lens_decoder=self.seq_lens_decoder,
            max_dec_len=np.full((B, 1), 1 << 20, np.int64),
            suffix_tokens=np.full((B, k), -7, np.int64),
            suffix_probs=np.full((B, k), -7.0, np.float32),
            suffix_meta=np.full((B, 2), -7, np.int32),
            suffix_source=np.full(B, -7, np.int32),
        )


@dataclass
class RequestStream:
    """``slots`` slots of width ``width``; ``vocab`` tokens; answers of up to ``max_answer`` tokens."""

    rng: np.random.Generator
    slots: int
    width: int
    vocab: int = 4
    k: int = 4
    max_prompt: int = 12
    max_answer: int = 40
    p_new: float = 0.5
    p_finish_op: float = 0.5
    pool: List[np.ndarray] = field(default_factory=list)
    reqs: List[Optional[_Req]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.reqs = [None] * self.slots
        self.ids = np.full((self.slots, self.width), -1, np.int64)
        self.pool = [
            self.rng.integers(0, self.vocab, int(self.rng.integers(3, 12))) for _ in range(6)
        ]

    def _text(self, n: int) -> np.ndarray:
        out: List[int] = []
        while len(out) < n:
            if self.rng.random() < 0.6:
                out += self.pool[int(self.rng.integers(0, len(self.pool)))].tolist()
            else:
                out += self.rng.integers(0, self.vocab, int(self.rng.integers(1, 4))).tolist()
        return np.array(out[:n], np.int64)

    def step(self) -> StreamStep:
        B, W, rng = self.slots, self.width, self.rng
        P = np.zeros((B, 1), np.int64)
        s = np.zeros((B, 1), np.int64)
        enc = np.zeros(B, np.int32)
        dec = np.zeros(B, np.int32)
        finished = np.zeros(B, np.int32)
        for b in range(B):
            r = self.reqs[b]
            if r is not None and r.prefilled and r.done >= len(r.answer):
                self.reqs[b] = r = None  # finished last step: the slot empties
            if r is None:
                if rng.random() < self.p_new:
                    p_len = int(rng.integers(1, self.max_prompt + 1))
                    a_len = int(rng.integers(1, min(self.max_answer, W - p_len - self.k - 2) + 1))
                    r = _Req(self._text(p_len), self._text(a_len))
                    self.reqs[b] = r
                    self.ids[b] = -1
                    self.ids[b, :p_len] = r.prompt
                    enc[b] = p_len  # prefill step
                    P[b] = p_len
                continue
            P[b] = len(r.prompt)
            if not r.prefilled:
                r.prefilled = True
                r.done = 1  # the prefill's token
            else:
                r.done = min(len(r.answer), r.done + int(rng.integers(0, self.k + 2)))
            self.ids[b, P[b, 0] : P[b, 0] + r.done] = r.answer[: r.done]
            s[b] = r.done
            dec[b] = int(P[b, 0]) + r.done
            if r.done >= len(r.answer) and rng.random() < self.p_finish_op:
                finished[b] = 1
        return StreamStep(self.ids.copy(), P, s, enc, dec, finished, self.k)


_M64 = (1 << 64) - 1


def _mix64(x):
    x &= _M64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _items(t, k, off, G, V, F):
    """The line filter's items of position ``off`` of a row (tokens t, keys k): suffix_line_items."""
    if off < G - 1:
        return []
    key = int(k[off]) & 0xFFFFFFFF
    out = [_mix64(0x243F6A8885A308D3 ^ key)]
    if G == 1 and off >= 1 and 0 <= int(k[off]) < V:
        two = _mix64(_mix64(0x13198A2E03707344 ^ (int(t[off - 1]) & _M64)) ^ key)
        out.append(two)
        if off >= 2 and 0 <= int(t[off - 1]) < F and 0 <= int(t[off]) < F:
            out.append(_mix64(two ^ ((0xA4093822299F31D0 + (int(k[off - 2]) & 0xFFFFFFFF)) & _M64)))
    return out


def line_filter_ref(responses, keys, cache):
    """The line filter a cache holding ``responses`` ({row: tokens}, with the cache's ``keys``) must
    have: for every cached position, the bits of its items in its line (docs/contract/suffix.md)."""
    P, words = cache.config.line_planes, line_words(cache.config.rows, cache.config.width)
    want = np.zeros((P, words), np.uint32)
    if P == 0:
        return want
    R, width = keys.shape
    lines_per_row = (width + 31) // 32
    G = cache.key_len
    V = cache.config.vocab_size if G == 1 and R * width < 1 << 31 else 0
    F = cache.config.pair_vocab if G == 1 and R * width < 1 << 31 else 0
    for r, resp in responses.items():
        for off in range(len(resp)):
            li = r * lines_per_row + (off - (G - 1)) // 32
            for item in _items(resp, keys[r], off, G, V, F):
                lo, step = item & 0xFFFFFFFF, (item >> 32) | 1
                for j in range(5):
                    want[((lo + j * step) & 0xFFFFFFFF) & (P - 1), li >> 5] |= np.uint32(
                        1 << (li & 31)
                    )
    return want


class Driver:
    """The op's cache on one place and the reference, stepped together."""

    def __init__(
        self,
        place,
        rows,
        width,
        slots,
        key_len=2,
        max_occurrences=32,
        vocab_size=1 << 18,
        pair_vocab=1 << 10,
        line_planes=1 << 11,
    ):
        self.place = place
        self.cache = SuffixCache.allocate(
            rows,
            width,
            slots,
            key_len=key_len,
            max_occurrences=max_occurrences,
            vocab_size=vocab_size,
            pair_vocab=pair_vocab,
            line_planes=line_planes,
            place=to_place(np.zeros(1), place).place,
        )
        self.ref = SuffixCacheRef(
            rows, width, slots, key_len=key_len, max_occurrences=max_occurrences
        )

    def t(self, a):
        return to_place(np.asarray(a), self.place)

    def insert(self, step):
        args = [getattr(step, n) for n in INSERT_ARGS]
        suffix_cache_insert(*(self.t(a) for a in args), self.cache)
        self.ref.insert(*args)

    def query(self, d, **kw):
        return self._query(suffix_cache_query, d, kw)

    def step(self, d, **kw):
        """The insert and the query of query inputs ``d`` as one call (suffix_cache_step)."""
        self.ref.insert(*(d[n] for n in INSERT_ARGS))
        return self._query(suffix_cache_step, d, kw)

    def _query(self, op, d, kw):
        t = {n: self.t(d[n]) for n in QUERY_ARGS}
        op(*(t[n] for n in QUERY_ARGS), self.cache, **kw)
        got = {n: t[n].numpy() for n in OUTPUTS}
        want = self.ref.query(d, **kw)
        for n in OUTPUTS:
            g, w = np.asarray(got[n]).reshape(want[n].shape), want[n]
            if g.dtype == np.float32:
                g, w = g.view(np.int32), w.view(np.int32)  # bit for bit
            np.testing.assert_array_equal(g, w, err_msg=n)
        return got

    def evict(self, keep):
        suffix_cache_evict(self.cache, keep)
        self.ref.evict(keep)

    def finish(self, finished):
        suffix_cache_finish(self.t(finished), self.cache)
        self.ref.finish(finished)

    def check_state(self):
        rows, toks = self.ref.rows_view()
        state = self.cache.parts()
        np.testing.assert_array_equal(state["rows"], rows)
        np.testing.assert_array_equal(state["slots"], self.ref.slots)
        assert int(state["counter"][0]) == self.ref.counter
        ctoks = state["tokens"]
        for r, resp in toks.items():
            np.testing.assert_array_equal(ctoks[r, : len(resp)], resp)
        if (
            self.cache.key_len == 1
        ):  # the counts: each token id's occurrences in the cached responses
            counts = state["counts"]
            want = np.zeros(counts.shape[0], np.int64)
            for resp in toks.values():
                ids = np.asarray(resp, np.int64)
                np.add.at(want, ids[(ids >= 0) & (ids < counts.shape[0])], 1)
            np.testing.assert_array_equal(counts, want)
            # the pair counts: each pair of consecutive ids' occurrences within one response
            pairs = state["pairs"]
            F = pairs.shape[0]
            want = np.zeros((F, F), np.int64)
            for resp in toks.values():
                ids = np.asarray(resp, np.int64)
                a, b = ids[:-1], ids[1:]
                keep = (a >= 0) & (a < F) & (b >= 0) & (b < F)
                np.add.at(want, (a[keep], b[keep]), 1)
            np.testing.assert_array_equal(pairs, want)
        lines = state["lines"].view(np.uint32)
        np.testing.assert_array_equal(lines, line_filter_ref(toks, state["keys"], self.cache))


def soak(place, seed, requests, *, rows=32, width=48, slots=8, check_every=200, key_len=2):
    """Drives ``requests`` requests through the cache; asserts device memory flat and, at the end,
    the drafts and state equal to the reference."""
    rng = np.random.default_rng(seed)
    stream = RequestStream(rng, slots, width=96, vocab=6, k=4, max_answer=width + 16, p_new=0.9)
    drv = Driver(place, rows, width, slots, key_len=key_len, max_occurrences=64)
    before = drv.cache.nbytes
    ptr = drv.cache.state.data_ptr()
    i = 0
    while int(drv.cache.read("counter")[0]) < requests:
        step = stream.step()
        t = [
            drv.t(a)
            for a in (
                step.token_ids_all,
                step.prompt_lens,
                step.step_idx,
                step.seq_lens_encoder,
                step.seq_lens_decoder,
            )
        ]
        suffix_cache_insert(*t, drv.cache)
        drv.ref.insert(
            step.token_ids_all,
            step.prompt_lens,
            step.step_idx,
            step.seq_lens_encoder,
            step.seq_lens_decoder,
        )
        if i % check_every == 0:
            drv.query(step.query_inputs(rng), max_spec_factor=4.0, min_token_prob=0.0)
        drv.finish(step.finished)
        i += 1
    drv.query(stream.step().query_inputs(rng), max_spec_factor=4.0, min_token_prob=0.0)
    drv.check_state()
    assert drv.cache.nbytes == before
    assert drv.cache.state.data_ptr() == ptr
    return drv
