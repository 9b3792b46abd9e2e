"""Random request streams for the global cache's tests and soak runs: slots that take requests, prefill,
decode a few accepted tokens per step, finish (sometimes through ``suffix_cache_finish``) and empty.
Responses copy stretches of a shared pool of phrases, so requests repeat each other (the global cache
has something to find), over small vocabularies (ties)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np


@dataclass
class _Req:
    prompt: np.ndarray
    answer: np.ndarray
    done: int = 0           # generated tokens so far
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
        return dict(token_ids_all=self.token_ids_all, prompt_lens=self.prompt_lens,
                    step_idx=self.step_idx, draft_token_num=np.full(B, k, np.int32),
                    draft_tokens=-(np.arange(B * (k + 1), dtype=np.int64).reshape(B, k + 1) + 100),
                    seq_lens_this_time=slt, seq_lens_encoder=self.seq_lens_encoder,
                    seq_lens_decoder=self.seq_lens_decoder,
                    max_dec_len=np.full((B, 1), 1 << 20, np.int64),
                    suffix_tokens=np.full((B, k), -7, np.int64),
                    suffix_probs=np.full((B, k), -7.0, np.float32),
                    suffix_meta=np.full((B, 2), -7, np.int32),
                    suffix_source=np.full(B, -7, np.int32))


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
        self.pool = [self.rng.integers(0, self.vocab, int(self.rng.integers(3, 12)))
                     for _ in range(6)]

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
                self.reqs[b] = r = None           # finished last step: the slot empties
            if r is None:
                if rng.random() < self.p_new:
                    p_len = int(rng.integers(1, self.max_prompt + 1))
                    a_len = int(rng.integers(1, min(self.max_answer, W - p_len - self.k - 2) + 1))
                    r = _Req(self._text(p_len), self._text(a_len))
                    self.reqs[b] = r
                    self.ids[b] = -1
                    self.ids[b, :p_len] = r.prompt
                    enc[b] = p_len                 # prefill step
                    P[b] = p_len
                continue
            P[b] = len(r.prompt)
            if not r.prefilled:
                r.prefilled = True
                r.done = 1                         # the prefill's token
            else:
                r.done = min(len(r.answer), r.done + int(rng.integers(0, self.k + 2)))
            self.ids[b, P[b, 0]:P[b, 0] + r.done] = r.answer[:r.done]
            s[b] = r.done
            dec[b] = int(P[b, 0]) + r.done
            if r.done >= len(r.answer) and rng.random() < self.p_finish_op:
                finished[b] = 1
        return StreamStep(self.ids.copy(), P, s, enc, dec, finished, self.k)
