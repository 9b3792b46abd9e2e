"""A target model that knows the answers, for tests and the demo."""

from __future__ import annotations

import math
from typing import Dict, Hashable, Sequence

import numpy as np

from fastdeploy_spec.runner import VerifyBatch

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

    def __init__(
        self, outputs: Dict[Hashable, Sequence[int]], vocab_size: int, end_token: int
    ) -> None:
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
                result[b, j] = (
                    self._token(out, s + j)
                    if on_track
                    else (s * 1000003 + j * 7919 + 17) % self.vocab_size
                )
        return result

    def logits(self, batch: VerifyBatch, tokens: np.ndarray) -> np.ndarray:
        """float32 [R, V]: the logits rows of ``batch`` (``batch.output_rows()`` per slot, packed),
        given ``tokens = self(batch)``; the row of input position j of slot b generates token
        ``step_idx[b] + j`` of its request."""
        rows = batch.output_rows()
        slot = np.repeat(np.arange(len(rows)), rows)
        col = np.arange(int(rows.sum())) - np.repeat(np.cumsum(rows) - rows, rows)
        return oracle_logits(tokens[slot, col], batch.step_idx[slot] + col, self.vocab_size)


class SampledOracle:
    """A target model for sampled requests whose next-token distribution is known exactly: its logits
    are a fixed, seeded function of the context (the tokens before the row) over the request's text.

    The **successor** of a context is the token that follows its longest suffix (up to ``order``
    tokens) at the suffix's first occurrence in the request's text (prompt, then answer, then the end
    token); with no occurrence, the first token of the answer. A row's logits are ``ln V + 1`` at the
    successor, ``ln V - 0.5`` and ``ln V - 1.5`` at two alternatives (``(h + 1) mod V`` and
    ``(h + 2) mod V`` past the successor, h a hash of the last token and ``seed``), and
    ``u - 3`` elsewhere (u in [0, 1), a hash of the entry, the last token and ``seed``). At
    temperature 1 the successor holds about 75 % of the mass, the alternatives 17 % and 6 %: sampled
    output leaves the text now and then, returns to it through the suffix rule, and drafts learned
    from the text keep hitting. The greedy token (``__call__``) is the successor, the unique argmax.
    Exactness checks compute each row's distribution from ``row_logits`` (it depends on nothing
    else).
    """

    needs_prefix = True  # the runner fills VerifyBatch.prefix / prompt

    def __init__(
        self,
        texts: Dict[Hashable, Sequence[int]],
        vocab_size: int,
        end_token: int,
        *,
        seed: int = 0,
        order: int = 3,
    ) -> None:
        if not 4 <= vocab_size <= ORACLE_HASH_MODULUS:
            raise ValueError(f"vocab_size must be in [4, {ORACLE_HASH_MODULUS}], got {vocab_size}")
        self.vocab_size, self.end_token, self.seed, self.order = (
            int(vocab_size),
            int(end_token),
            int(seed),
            int(order),
        )
        self.tables: Dict[Hashable, Dict[tuple, int]] = {}
        self.texts: Dict[Hashable, tuple] = {}
        built: Dict[tuple, Dict[tuple, int]] = {}  # requests that share a text share its table
        for rid, text in texts.items():
            key = tuple(int(t) for t in text) + (self.end_token,)
            if key not in built:
                table: Dict[tuple, int] = {}
                for n in range(1, self.order + 1):
                    for i in range(n, len(key)):
                        table.setdefault(key[i - n : i], key[i])
                built[key] = table
            self.tables[rid] = built[key]
            self.texts[rid] = key
        self._rows_cache: Dict[tuple, np.ndarray] = {}

    def successor(self, rid: Hashable, context: Sequence[int]) -> int:
        table = self.tables[rid]
        ctx = [int(t) for t in context[max(len(context) - self.order, 0) :]]
        for n in range(min(self.order, len(ctx)), 0, -1):
            nxt = table.get(tuple(ctx[-n:]))
            if nxt is not None:
                return nxt
        text = self.texts[rid]
        last = ctx[-1] if ctx else 0
        return text[(last * 7 + self.seed) % len(text)]

    def row_logits(self, rid: Hashable, context: Sequence[int]) -> np.ndarray:
        """float32 [V]: the logits after ``context`` (the tokens before the row's output)."""
        last = int(context[-1]) if len(context) else 0
        succ = self.successor(rid, context)
        key = (last, succ)
        row = self._rows_cache.get(key)
        if row is None:
            V = self.vocab_size
            v = np.arange(V, dtype=np.int64)
            u = (v * 40503 + last * 7919 + self.seed * 104729) % ORACLE_HASH_MODULUS
            row = (u / ORACLE_HASH_MODULUS - 3.0).astype(np.float32)
            h = (last * 31 + self.seed * 17) % max(V - 2, 1)
            row[(succ + h + 1) % V] = np.float32(math.log(V) - 0.5)
            row[(succ + h + 2) % V] = np.float32(math.log(V) - 1.5)
            row[succ] = np.float32(math.log(V) + 1.0)
            self._rows_cache[key] = row
        return row.copy()

    def _rows(self, batch: VerifyBatch):
        """(slot, column, logits row) of every output row, packed as ``batch.output_rows()``."""
        rows = batch.output_rows()
        for b in np.flatnonzero(rows):
            rid = batch.request_ids[b]
            for j in range(int(rows[b])):
                yield b, j, self.row_logits(rid, batch.context(b, j))

    def __call__(self, batch: VerifyBatch) -> np.ndarray:
        result = np.full(batch.tokens.shape, -1, np.int64)
        for b, j, row in self._rows(batch):
            result[b, j] = int(np.argmax(row))
        return result

    def logits(self, batch: VerifyBatch, tokens: np.ndarray) -> np.ndarray:
        """float32 [R, V]: the rows of ``batch`` packed slot after slot (``tokens`` unused)."""
        rows = [row for _, _, row in self._rows(batch)]
        return np.stack(rows) if rows else np.zeros((0, self.vocab_size), np.float32)


class PreparedLogits:
    """A draft model with no forward and no host work: it returns, call after call, the logits tensors
    prepared on the place in advance (cycling through them). For the MTP proposer's tests and benchmark."""

    def __init__(self, logits):
        self.logits, self.calls = logits, 0

    def __call__(self, input_ids, hidden_states=None):
        out = self.logits[self.calls % len(self.logits)]
        self.calls += 1
        return out
