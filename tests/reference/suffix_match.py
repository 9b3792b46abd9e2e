"""Executable specification of ``suffix_match`` (docs/contract/suffix.md), and random inputs for it.

``suffix_draft_ref`` is the suffix-decoding draft of one request, written from the definition with
sets of positions rather than a suffix tree:

* H is the slot's history (prompt then generated tokens), N = |H|; C the last min(D, N) tokens, D =
  ``max_tree_depth``, c = |C|.
* An occurrence of a string x is a start j with H[j:j+|x|] == x; count(x) counts them (the newest
  occurrence of a suffix of H, at the end of H, counts, though nothing follows it).
* For L = 1 .. c-1, s = C[-L:]. The occurrences of s are identified by their last position i; S_0 is
  the set of those i. Step k (draft d of length k so far) keeps S_k = the i of S_0 with
  H[i+1:i+1+k] == d (so |S_k| = count(s.d)); the next token t maximises the number of i in S_k
  with H[i+k+1] == t (= count(s.d.t)); **ties between continuations with equal counts go to the
  one whose first occurrence is earliest** (smallest i). p <- float32(p * float32(count(s.d.t)) /
  float32(count(s.d))); t is appended while p >= min_token_prob, |d| < min(cap, floor(L * factor
  + offset + 1e-6)) and L + |d| < D; the path also ends where no i of S_k has a next token.
* score = float32 sum of the probabilities, left to right; the draft with the highest score wins, a
  later (longer) L winning ties; no L (c <= 1): empty draft, match length 0.

``suffix_match_ref`` applies it to a batch as the op does: the slot cap, the outputs of every
decoding slot, the batch budget walk of ngram_match (docs/contract/ngram.md#ngram_match) on the drafts, and ``pad_to_max``.
"""

from __future__ import annotations

import math

import numpy as np

from fastdeploy_spec.ops import suffix_match
from fastdeploy_spec.ops._common import DRAFT_INPUTS
from fastdeploy_spec.ops.suffix_match import SPEC as SUFFIX_SPEC
from tests.helpers import run_in_place
from tests.reference.ngram_match import DTYPES as NGRAM_DTYPES
from tests.reference.ngram_match import batch_inputs, make_ngram_batch

# Argument order of the op's tensors and those it writes, the wrapper's own.
TENSOR_ARGS = SUFFIX_SPEC.tensors
DTYPES = dict(NGRAM_DTYPES, suffix_tokens=np.int64, suffix_probs=np.float32, suffix_meta=np.int32)
OUTPUTS = tuple(name for name in TENSOR_ARGS if name in SUFFIX_SPEC.outputs)
SUFFIX_STATE = TENSOR_ARGS[len(DRAFT_INPUTS) :]  # the tensors after the family's nine

MAX_TREE_DEPTH = 256  # largest max_tree_depth the op accepts
MAX_SPEC_TOKENS = 64  # largest K (draft columns) the op accepts
DEFAULTS = dict(max_tree_depth=64, max_spec_factor=1.0, max_spec_offset=0.0, min_token_prob=0.1)

f32 = np.float32


def spec_limit(L: int, factor: float, offset: float, cap: int) -> int:
    """min(cap, floor(float32(float32(L * factor) + offset) + 1e-6)), at least 0 (Arctic's rule)."""
    x = float(f32(f32(f32(L) * f32(factor)) + f32(offset))) + 1e-6
    if not x >= 0.0:
        return 0
    return int(min(cap, math.floor(min(x, 2.0**40))))


def match_lengths(H: np.ndarray, c: int) -> np.ndarray:
    """l(i) for every position i of H: the length of the longest common suffix of H[:i+1] and H,
    capped at c - 1 (the longest match the search uses)."""
    N = len(H)
    ell = np.zeros(N, np.int64)
    alive = np.ones(N, bool)
    idx = np.arange(N)
    for j in range(max(c - 1, 0)):
        ok = idx >= j
        ok[j:] &= H[: N - j] == H[N - 1 - j]
        alive &= ok
        ell += alive
    return ell


def greedy_path(H: np.ndarray, S0: np.ndarray, L: int, D: int, limit: int, min_prob: float):
    """The greedy draft from the occurrences S0 (last positions, ascending) of the matched suffix."""
    N = len(H)
    p, score = f32(1.0), f32(0.0)
    tokens, probs = [], []
    S = S0
    k = 0
    while k < limit and L + k < D:
        cand = S[S + k + 1 <= N - 1]
        if len(cand) == 0:
            break
        nxt = H[cand + k + 1]
        uniq, first, counts = np.unique(nxt, return_index=True, return_counts=True)
        # Highest count, then the earliest first occurrence (cand is ascending: first = min i).
        best = min(range(len(uniq)), key=lambda u: (-counts[u], cand[first[u]]))
        p_next = f32(p * (f32(counts[best]) / f32(len(S))))
        if not p_next >= f32(min_prob):
            break
        p = p_next
        t = int(uniq[best])
        tokens.append(t)
        probs.append(p)
        score = f32(score + p)
        S = cand[nxt == t]
        k += 1
    return tokens, np.array(probs, np.float32), score


def suffix_draft_ref(
    H,
    cap: int,
    *,
    max_tree_depth: int = 64,
    max_spec_factor: float = 1.0,
    max_spec_offset: float = 0.0,
    min_token_prob: float = 0.1,
):
    """The draft of one request with history ``H``: (tokens, probs float32, score float32, match_len).

    ``cap`` is max_spec_tokens (the most tokens any draft may have)."""
    H = np.asarray(H, np.int64)
    N = len(H)
    D = int(max_tree_depth)
    c = min(D, N)
    ell = match_lengths(H, c)
    best = ([], np.zeros(0, np.float32), f32(0.0), 0)
    for L in range(1, c):
        S0 = np.flatnonzero(ell >= L)
        limit = spec_limit(L, max_spec_factor, max_spec_offset, max(cap, 0))
        tokens, probs, score = greedy_path(H, S0, L, D, limit, min_token_prob)
        if score >= best[2]:
            best = (tokens, probs, score, L)
    return best


def suffix_match_ref(
    d: dict,
    *,
    max_draft_tokens: int | None = None,
    pad_to_max: bool = False,
    threshold: int | None = None,
    draft_of=None,
    **draft_kw,
) -> dict:
    """The op on the batch ``d`` (NumPy arrays keyed as TENSOR_ARGS, as make_suffix_batch gives
    them). Returns new arrays for every output (keyed as ``OUTPUTS``). ``draft_kw``: the four draft
    keywords of ``suffix_draft_ref`` (``DEFAULTS`` where not given).

    ``draft_of(b, H, cap, kw)`` chooses slot b's draft (tokens, probs, score, match_len) from its
    history ``H``, its cap and the four draft keywords ``kw``; default: the local draft
    (``suffix_draft_ref``). ``suffix_cache_query``'s reference passes its local-or-global choice."""
    T, ids, W, drafts, K, slt_shape, slt, B, (P_in, s_in, dtn, enc, dec, mdl) = batch_inputs(
        d, threshold
    )
    if max_draft_tokens is None:
        max_draft_tokens = K
    if draft_of is None:

        def draft_of(b, H, cap, kw):
            return suffix_draft_ref(H, cap, **kw)

    kw = dict(DEFAULTS, **draft_kw)
    stoks = np.array(d["suffix_tokens"], np.int64, copy=True)
    sprobs = np.array(d["suffix_probs"], np.float32, copy=True)
    smeta = np.array(d["suffix_meta"], np.int32, copy=True)

    # 1. Every decoding slot's draft, before the batch budget.
    untruncated = [0] * B
    for b in range(B):
        if not (enc[b] <= 0 and dec[b] != 0):
            continue
        P = min(max(P_in[b], 0), W)
        s = min(max(s_in[b], 0), W - P)
        cap = min(dtn[b], max_draft_tokens, K, mdl[b] - s - 1, W - P - s - 1)
        tokens, probs, _, L = draft_of(b, ids[b, : P + s], cap, kw)
        m = len(tokens)
        stoks[b, :] = -1
        stoks[b, :m] = tokens
        sprobs[b, :] = 0.0
        sprobs[b, :m] = probs
        smeta[b] = (m, L)
        untruncated[b] = m

    # 2. The batch budget walk of docs/contract/ngram.md#ngram_match (a prefill slot's length counts as max(slt, 0)).
    unprocessed = sum(1 for b in range(B) if enc[b] > 0 or dec[b] > 0)
    total = 0
    for b in range(B):
        if enc[b] > 0:
            slt[b] = max(slt[b], 0)
            total += slt[b]
            continue
        if dec[b] == 0:
            slt[b] = 0
            continue
        unprocessed -= 1
        S = total + 1
        G = S + unprocessed
        kept = 0 if G >= T - 1 else min(untruncated[b], T - G)
        drafts[b, 1 : 1 + kept] = stoks[b, :kept]
        slt[b] = 1 + kept
        if pad_to_max:
            last = drafts[b, kept]
            drafts[b, 1 + kept : 1 + max_draft_tokens] = last
            slt[b] = 1 + max_draft_tokens
        total += 1 + kept
    return {
        "draft_tokens": drafts,
        "seq_lens_this_time": np.array(slt, np.int32).reshape(slt_shape),
        "suffix_tokens": stoks,
        "suffix_probs": sprobs,
        "suffix_meta": smeta,
    }


def make_suffix_batch(rng: np.random.Generator, batch: int, width: int, **kw) -> dict:
    """A random batch of op inputs: make_ngram_batch's (its keywords), whose planted repeats are by
    default up to half the history long (so long suffixes recur), with the op's suffix state, -7
    everywhere (the op must write every decoding slot's row)."""
    kw.setdefault("max_repeat", None)
    d = make_ngram_batch(rng, batch, width, **kw)
    K = d["draft_tokens"].shape[1] - 1
    return dict(
        d,
        suffix_tokens=np.full((batch, K), -7, np.int64),
        suffix_probs=np.full((batch, K), -7.0, np.float32),
        suffix_meta=np.full((batch, 2), -7, np.int32),
    )


def run_op(d: dict, place: str, **kw) -> dict:
    """Runs the op on copies of ``d`` on ``place``; returns every output as a NumPy array."""
    return run_in_place(suffix_match, d, place, **kw)


def check(d: dict, place: str, **kw) -> dict:
    """Asserts op == reference exactly (on the GPU also op == CPU) and returns the op's result."""
    want = suffix_match_ref(d, **kw)
    got = run_op(d, place, **kw)
    cpu = run_op(d, "cpu", **kw) if place == "gpu" else None
    for name in OUTPUTS:
        g = np.asarray(got[name]).reshape(want[name].shape)
        if cpu is not None:
            np.testing.assert_array_equal(
                g, np.asarray(cpu[name]).reshape(g.shape), err_msg=f"{name}: GPU against CPU"
            )
        # float32 probabilities compared bit for bit, not with a tolerance
        np.testing.assert_array_equal(
            g.view(np.int32) if g.dtype == np.float32 else g,
            want[name].view(np.int32) if g.dtype == np.float32 else want[name],
            err_msg=name,
        )
    return got
