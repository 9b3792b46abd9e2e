"""Executable specification of the suffix-decoding global cache (docs/contract/suffix.md, "The global
cache"), written from the definition: a FIFO of cached responses (lists of tokens), no ring, no
keys, no scratch.

* Requests are numbered in the order they begin (slot order within a call). The cache holds the
  responses of the last R of them: beginning request q evicts request q - R.
* count(x) in the cache: occurrences of x inside one cached response (never across two).
* The global draft of a slot: its context C (the last min(D, N) tokens of its history), c = |C|;
  for L = G .. c-1 while C[-L:] occurs in the cache, skipping the L whose suffix occurs more than M
  times, the greedy path of suffix_match over the occurrences (the earliest first occurrence wins a
  tie: ordered by (request number, offset)); the highest score wins, a longer L on ties.
* The request keeps its local draft (suffix_match's) if its score is >= the global draft's score.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from tests.reference.suffix_match import f32, spec_limit, suffix_draft_ref, suffix_match_ref

SLOT_FREE, SLOT_DETACHED = -1, -2
MAX_REQUESTS = 1 << 39  # kMaxSuffixCacheRequests: request numbers fit 40 bits of a candidate
COUNTER_LIMIT = 1 << 38  # kSuffixCounterLimit


# How the ops read a state they did not write (suffix_cache.h, "reading the state"; the contract's
# "A state the ops did not write"): identities on every state the ops write.
def row_req(v: int) -> int:
    """A row's request number: outside [0, 2^39) the row is empty (-1)."""
    return int(v) if 0 <= v < MAX_REQUESTS else -1


def row_len(req: int, n: int, width: int) -> int:
    """A row's cached length: 0 for an empty row, else clamped to [0, width]."""
    return 0 if req < 0 else min(max(int(n), 0), width)


def counter_base(v: int) -> int:
    """The request counter: its low 40 bits, 0 when they are 2^38 or more."""
    low = int(v) & ((1 << 40) - 1)
    return low if low < COUNTER_LIMIT else 0


def global_draft_ref(
    responses,
    C,
    cap: int,
    *,
    max_tree_depth: int,
    max_spec_factor: float,
    max_spec_offset: float,
    min_token_prob: float,
    key_len: int,
    max_occurrences: int,
):
    """The global draft: (tokens, probs float32, score float32, match_len). ``responses`` is a list
    of (request number, token list) in request order."""
    C = [int(x) for x in C]
    c = len(C)
    D = int(max_tree_depth)
    best = ([], np.zeros(0, np.float32), f32(0.0), 0)
    if cap <= 0:
        return best
    for L in range(key_len, c):
        s = C[c - L :]
        occ = [
            (q, off)
            for q, toks in responses
            for off in range(L - 1, len(toks))
            if toks[off - L + 1 : off + 1] == s
        ]
        if not occ:
            break
        if len(occ) > max_occurrences:
            continue
        limit = spec_limit(L, max_spec_factor, max_spec_offset, cap)
        seq = dict(responses)
        p, score, tokens, probs = f32(1.0), f32(0.0), [], []
        S = sorted(occ)
        k = 0
        while k < limit and L + k < D:
            nxt = {}
            for q, off in S:
                if off + k + 1 < len(seq[q]):
                    nxt.setdefault(seq[q][off + k + 1], []).append((q, off))
            if not nxt:
                break
            t = min(nxt, key=lambda u: (-len(nxt[u]), nxt[u][0]))
            p_next = f32(p * (f32(len(nxt[t])) / f32(len(S))))
            if not p_next >= f32(min_token_prob):
                break
            p = p_next
            tokens.append(int(t))
            probs.append(p)
            score = f32(score + p)
            S = nxt[t]
            k += 1
        if score >= best[2]:
            best = (tokens, np.array(probs, np.float32), score, L)
    return best


class SuffixCacheRef:
    """The cache's state and its three ops on NumPy inputs."""

    def __init__(
        self, rows: int, width: int, slots: int, key_len: int = 3, max_occurrences: int = 1024
    ) -> None:
        self.R, self.width, self.key_len, self.M = rows, width, key_len, max_occurrences
        self.responses: OrderedDict[int, list] = OrderedDict()
        self.slots = [SLOT_FREE] * slots
        self.counter = 0

    @staticmethod
    def _history(ids, P_in, s_in, b):
        W = ids.shape[1]
        P = min(max(int(P_in[b]), 0), W)
        s = min(max(int(s_in[b]), 0), W - P)
        return P, s

    def insert(self, token_ids_all, prompt_lens, step_idx, seq_lens_encoder, seq_lens_decoder):
        ids = np.asarray(token_ids_all, np.int64)
        P_in, s_in, enc, dec = (
            np.ravel(a) for a in (prompt_lens, step_idx, seq_lens_encoder, seq_lens_decoder)
        )
        B = len(enc)
        decoding = [enc[b] <= 0 and dec[b] != 0 for b in range(B)]
        # closing: empty while its request is active: its last tokens are appended, then it is free
        closing = [enc[b] <= 0 and dec[b] == 0 and self.slots[b] >= 0 for b in range(B)]
        base = nxt = counter_base(self.counter)
        for b in range(B):
            if not decoding[b]:
                if not closing[b]:
                    self.slots[b] = SLOT_FREE
            elif (
                self.slots[b] == SLOT_FREE or self.slots[b] >= base
            ):  # >= base: a number not handed out
                q = nxt
                nxt += 1
                self.slots[b] = q
                for old in [x for x in self.responses if x % self.R == q % self.R]:
                    del self.responses[old]  # first in, first out: request q - R
                self.responses[q] = []
        self.counter = nxt
        for b in range(B):
            q = self.slots[b]
            if q < 0 or not (decoding[b] or closing[b]):
                continue
            # A closing slot whose state is a number this call handed out (>= the counter as read:
            # no op writes one) has nothing to close: the number is another slot's new request.
            if q not in self.responses or (closing[b] and base <= q < nxt):
                self.slots[b] = SLOT_FREE if closing[b] else SLOT_DETACHED
                continue
            P, s = self._history(ids, P_in, s_in, b)
            have = len(self.responses[q])
            upto = min(s, self.width)
            if upto > have:
                self.responses[q] += [int(x) for x in ids[b, P + have : P + upto]]
            if closing[b]:
                self.slots[b] = SLOT_FREE

    def evict(self, keep: int):
        for q in [q for q in self.responses if q < counter_base(self.counter) - keep]:
            del self.responses[q]

    def finish(self, finished):
        for b, f in enumerate(np.ravel(finished)):
            if f != 0:
                self.slots[b] = SLOT_DETACHED

    def query(self, d: dict, **attrs) -> dict:
        """The query op on the NumPy arrays ``d``: suffix_match_ref's batch and ``suffix_source``; new
        arrays for every output. ``attrs``: suffix_match_ref's keywords. The walk is suffix_match's;
        only the draft of a slot differs: the local one unless the global one scores higher."""
        src = np.array(d["suffix_source"], np.int32, copy=True)
        responses = list(self.responses.items())

        def draft_of(b, H, cap, kw):
            cap = max(cap, 0)
            local = suffix_draft_ref(H, cap, **kw)
            C = H[len(H) - min(kw["max_tree_depth"], len(H)) :]
            g = global_draft_ref(
                responses, C, cap, key_len=self.key_len, max_occurrences=self.M, **kw
            )
            src[b] = int(g[2] > local[2])
            return g if src[b] else local

        out = suffix_match_ref(d, draft_of=draft_of, **attrs)
        return dict(out, suffix_source=src)

    def rows_view(self):
        """(rows [R, 2], tokens [R, width]) as the op's ring lays them out, for state comparison."""
        rows = np.zeros((self.R, 2), np.int64)
        rows[:, 0] = -1
        toks = {}
        for q, resp in self.responses.items():
            rows[q % self.R] = (q, len(resp))
            toks[q % self.R] = resp
        return rows, toks
