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


class PreparedLogits:
    """A draft model with no forward and no host work: it returns, call after call, the logits tensors
    prepared on the place in advance (cycling through them). For the MTP proposer's tests and benchmark."""

    def __init__(self, logits):
        self.logits, self.calls = logits, 0

    def __call__(self, input_ids, hidden_states=None):
        out = self.logits[self.calls % len(self.logits)]
        self.calls += 1
        return out
