"""Executable specification of ``ngram_match`` (docs/contract/ngram.md#ngram_match), and random inputs for it.

``ngram_match_ref`` follows the contract's pseudo-code (docs/contract/ngram.md) line by line: the sequential
walk over the batch, the #7774 layout (prompt at ``[0, P)``, generated token k at ``P + k``), the batch-wide
threshold with upstream's quirks (prefill slots stay counted in ``unprocessed``; a slot with no budget left
keeps ``seq_lens_this_time = 1``), the clamps of P to [0, W] and s to [0, W - P], and this plugin's two
decision beyond the pseudo-code: the per-slot budget is clamped to K = ``draft_tokens.shape[1] - 1``.
A prefill slot's ``seq_lens_this_time`` enters the batch sum S as given, negative or not. Only the
search inside one haystack is vectorised with NumPy; its result is the contract's "leftmost productive
window".

``make_ngram_batch`` draws random batches (prefill / empty / decoding slots, tiny vocabularies,
planted repeats, binding thresholds, out-of-range lengths) for this op's tests, for suffix_match's
(``make_suffix_batch`` adds its state) and for any test that needs realistic speculative-decoding
slot states.
"""

from __future__ import annotations

import os

import numpy as np

from fastdeploy_spec.ops import ngram_match
from fastdeploy_spec.ops.ngram_match import SPEC as NGRAM_SPEC
from tests.helpers import run_in_place

THRESHOLD_ENV = "INFER_WITH_REFERENCE_TOKENUM_THRESHOLD"
THRESHOLD_DEFAULT = 128

# Argument order of the op (docs/contract/ngram.md#ngram_match), also the keys of the dict that
# make_ngram_batch returns: the wrapper's own.
TENSOR_ARGS = NGRAM_SPEC.tensors
DTYPES = {
    "token_ids_all": np.int64,
    "prompt_lens": np.int64,
    "step_idx": np.int64,
    "draft_token_num": np.int32,
    "draft_tokens": np.int64,
    "seq_lens_this_time": np.int32,
    "seq_lens_encoder": np.int32,
    "seq_lens_decoder": np.int32,
    "max_dec_len": np.int64,
}
PER_SLOT = (
    "prompt_lens",
    "step_idx",
    "draft_token_num",
    "seq_lens_this_time",
    "seq_lens_encoder",
    "seq_lens_decoder",
    "max_dec_len",
)
# The per-slot tensors beside seq_lens_this_time, which defines B.
SLOT_STATE = tuple(n for n in PER_SLOT if n != "seq_lens_this_time")


def batch_inputs(d: dict, threshold: int | None):
    """The inputs every n-gram/suffix reference starts from, read from the batch ``d`` (the op's
    tensors by name) and ``threshold``: (T, ids, W, drafts (a copy), K, seq_lens_this_time's shape,
    seq_lens_this_time as ints, B, the SLOT_STATE tensors as ints)."""
    ids = np.asarray(d["token_ids_all"], np.int64)
    drafts = np.array(d["draft_tokens"], np.int64, copy=True)
    slt = [int(v) for v in np.ravel(d["seq_lens_this_time"])]
    return (
        resolve_threshold(threshold),
        ids,
        ids.shape[1],
        drafts,
        drafts.shape[1] - 1,
        np.shape(d["seq_lens_this_time"]),
        slt,
        len(slt),
        [[int(v) for v in np.ravel(d[n])] for n in SLOT_STATE],
    )


def resolve_threshold(threshold: int | None) -> int:
    """The op's threshold rule: the keyword, else the environment variable, else 128."""
    if threshold is not None:
        return int(threshold)
    env = os.environ.get(THRESHOLD_ENV, "")
    try:
        return int(env)
    except ValueError:
        return THRESHOLD_DEFAULT


def _first_productive(hay: np.ndarray, pattern: np.ndarray, budget: int) -> np.ndarray | None:
    """Leftmost i in [0, len - n] with hay[i:i+n] == pattern and a non-empty continuation
    hay[start:end], start = i + n, end = min(start + budget, len). Returns that continuation."""
    n, length = len(pattern), len(hay)
    if length < n:
        return None
    windows = np.lib.stride_tricks.sliding_window_view(hay, n)
    for i in np.flatnonzero((windows == pattern).all(axis=1)):
        start = int(i) + n
        end = min(start + budget, length)
        if start < end:
            return hay[start:end]
        # Not productive: budget <= 0 or start >= len, which then holds for every later window too,
        # so the contract's "keep scanning" cannot find anything more.
        break
    return None


def graph_pad(
    drafts: np.ndarray, slt: list[int], padded: list[bool], max_draft_tokens: int
) -> None:
    """Graph mode (``pad_to_max``), in place: every padded slot shorter than
    min(max_draft_tokens, K) + 1 is raised to it, the new columns repeating its last valid token."""
    target = max(min(max_draft_tokens, drafts.shape[1] - 1) + 1, 0)
    for b, length in enumerate(slt):
        if padded[b] and 1 <= length < target:
            drafts[b, length:target] = drafts[b, length - 1]
            slt[b] = target


def ngram_match_ref(
    d: dict,
    max_ngram_size: int,
    max_draft_tokens: int = 0,
    pad_to_max: bool = False,
    *,
    threshold: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """docs/contract/ngram.md#ngram_match on the batch ``d`` (NumPy arrays keyed as TENSOR_ARGS, as
    make_ngram_batch gives them). Returns new ``(draft_tokens, seq_lens_this_time)``; inputs are not
    modified. ``max_draft_tokens`` only sets the pad length of ``pad_to_max`` (the draft cap is
    ``draft_token_num``); padding follows the whole walk and pads every decoding slot."""
    T, ids, W, drafts, K, slt_shape, slt, B, (P_in, s_in, dtn, enc, dec, mdl) = batch_inputs(
        d, threshold
    )

    unprocessed = sum(1 for b in range(B) if enc[b] > 0 or dec[b] > 0)
    for b in range(B):
        P = min(max(P_in[b], 0), W)
        s = min(max(s_in[b], 0), W - P)
        prompt, gen = ids[b, :P], ids[b, P : P + s]
        mdt = min(dtn[b], mdl[b] - s - 1, K)
        if enc[b] > 0:
            continue  # prefill slot: untouched
        if dec[b] == 0:
            slt[b] = 0  # empty / finished slot
            continue
        slt[b] = 1
        unprocessed -= 1
        S = int(sum(int(v) for v in slt[: b + 1]))  # earlier slots are final
        L = unprocessed  # prefill slots stay counted: upstream quirk
        if S + mdt + L > T:
            mdt = T - S - L
        if S + L >= T - 1:
            continue  # no budget left: slt stays 1
        for n in range(max_ngram_size, 0, -1):
            if s < n:
                continue
            pattern = gen[s - n : s]
            found = _first_productive(prompt, pattern, mdt)
            if found is None:
                found = _first_productive(gen, pattern, mdt)
            if found is not None:
                drafts[b, 1 : 1 + len(found)] = found
                slt[b] = 1 + len(found)
                break
    if pad_to_max:
        graph_pad(drafts, slt, [enc[b] <= 0 and dec[b] != 0 for b in range(B)], max_draft_tokens)
    return drafts, np.array(slt, np.int32).reshape(slt_shape)


def odd_length(
    rng: np.random.Generator, which: int, P: np.ndarray, s: np.ndarray, b: int, W: int
) -> None:
    """Puts slot b's prompt length (which 0: negative, 1: past the row) or step count (2: past the
    row, 3: negative) out of range: lengths the ops must clamp."""
    if which == 0:
        P[b] = -int(rng.integers(1, 10))
    elif which == 1:
        P[b] = W + int(rng.integers(0, 10))
    elif which == 2:
        s[b] = W + int(rng.integers(1, 10))
    else:
        s[b] = -int(rng.integers(1, 10))


def new_slots(
    rng: np.random.Generator,
    batch: int,
    rows: int,
    width: int,
    k: int,
    p_prefill: float,
    p_empty: float,
):
    """The arrays a random batch of the n-gram/suffix family starts from: token rows of -1, zero
    lengths, random ``seq_lens_this_time``, caps ``draft_token_num = k`` and ``max_dec_len = 2^20``, and
    each slot's state (0 prefill, 1 empty, 2 decoding)."""
    B = batch
    ids = np.full((rows, width), -1, np.int64)
    P, s = np.zeros(B, np.int64), np.zeros(B, np.int64)
    enc, dec = np.zeros(B, np.int32), np.zeros(B, np.int32)
    slt = rng.integers(0, 4, B).astype(np.int32)
    dtn = np.full(B, k, np.int32)
    mdl = np.full(B, 1 << 20, np.int64)
    state = rng.choice(3, size=B, p=[p_prefill, p_empty, 1.0 - p_prefill - p_empty])
    return ids, P, s, enc, dec, slt, dtn, mdl, state


def draw_history(rng: np.random.Generator, ids, P, s, b: int, vocab: int) -> int:
    """Slot b's prompt and generated tokens: ``used`` random tokens of ``vocab``, split at random
    into P and s. Returns ``used``."""
    W = ids.shape[1]
    used = int(rng.integers(0, W + 1)) if W else 0
    P[b] = int(rng.integers(0, used + 1))
    s[b] = used - P[b]
    ids[b, :used] = rng.integers(0, vocab, used)
    return used


def make_ngram_batch(
    rng: np.random.Generator,
    batch: int,
    width: int,
    *,
    k: int = 5,
    vocab: int = 4,
    max_repeat: int | None = 3,
    p_prefill: float = 0.2,
    p_empty: float = 0.15,
    p_plant: float = 0.5,
    p_odd: float = 0.05,
    extra_rows: int = 0,
    per_slot_2d: bool = True,
) -> dict[str, np.ndarray]:
    """A random batch of op inputs (NumPy arrays, keyed and typed as the op's tensor arguments).

    Slots are prefill (``seq_lens_encoder > 0``, a chunk length in ``seq_lens_this_time``), empty
    (``seq_lens_decoder == 0``) or decoding. Decoding slots get a prompt and generated tokens drawn
    from ``vocab`` tokens; with probability ``p_plant`` the newest generated tokens repeat an earlier
    window of at most ``max_repeat`` tokens (None: up to half the history, so long suffixes recur),
    so large vocabularies still match. ``draft_token_num`` and ``max_dec_len`` sometimes bind below
    K (or are negative), and with probability ``p_odd`` a slot gets an out-of-range value (negative
    or too long P and s, a negative prefill length, a negative seq_lens_decoder, garbage after the
    slot's tokens) that the op must clamp or tolerate. ``draft_tokens`` starts as distinct negative
    sentinels so untouched columns are visible. ``extra_rows`` appends rows to ``token_ids_all``
    beyond the batch.
    """
    B, W = batch, width
    rows = B + extra_rows
    ids, P, s, enc, dec, slt, dtn, mdl, state = new_slots(rng, B, rows, W, k, p_prefill, p_empty)
    for b in range(B):
        used = draw_history(rng, ids, P, s, b, vocab)
        row = ids[b]
        if used and rng.random() < p_plant:
            n = int(rng.integers(1, (max_repeat or max(used // 2, 1)) + 1))
            if used >= 2 * n:
                src = int(rng.integers(0, used - 2 * n + 1))
                row[used - n : used] = row[src : src + n].copy()
        if rng.random() < p_odd:
            row[used:] = rng.integers(0, vocab, W - used)  # garbage that must never be read
        mdl[b] = s[b] + 1 + int(rng.integers(-1, k + 3)) if rng.random() < 0.3 else 1 << 20
        dtn[b] = int(rng.integers(-1, k + 3)) if rng.random() < 0.3 else k
        if state[b] == 0:
            enc[b] = int(rng.integers(1, 64))
            dec[b] = int(rng.integers(0, 3))
            slt[b] = int(rng.integers(1, 64))
        elif state[b] == 2:
            dec[b] = int(P[b] + s[b]) or 1
        if rng.random() < p_odd:
            which = int(rng.integers(0, 5))
            if which < 4:
                odd_length(rng, which, P, s, b, W)
            elif state[b] == 0:
                slt[b] = -int(rng.integers(1, 64))
            else:
                dec[b] = -1
                enc[b] = -int(rng.integers(0, 3))
    ids[B:] = rng.integers(0, vocab, (extra_rows, W))
    col = (lambda a: a.reshape(B, 1)) if per_slot_2d else (lambda a: a)
    return {
        "token_ids_all": ids,
        "prompt_lens": col(P),
        "step_idx": col(s),
        "draft_token_num": dtn,
        "draft_tokens": sentinels(B, k),
        "seq_lens_this_time": slt,
        "seq_lens_encoder": enc,
        "seq_lens_decoder": dec,
        "max_dec_len": col(mdl),
    }


def upstream_proposer_batch(prompt, gen, mdl=200, bsz=2, k=5, width=256):
    """The share_inputs of upstream's tests/spec_decode/test_ngram_proposer.py: bsz 2, 5 speculative
    tokens, zeros everywhere (draft_tokens too), one decoding step per slot."""
    ids = np.zeros((bsz, width), np.int64)
    ids[:, : len(prompt)] = prompt
    ids[:, len(prompt) : len(prompt) + len(gen)] = gen
    return {
        "token_ids_all": ids,
        "prompt_lens": np.full((bsz, 1), len(prompt), np.int64),
        "step_idx": np.full((bsz, 1), len(gen), np.int64),
        "draft_token_num": np.full((bsz, 1), k, np.int32),
        "draft_tokens": np.zeros((bsz, k + 1), np.int64),
        "seq_lens_this_time": np.ones(bsz, np.int32),
        "seq_lens_encoder": np.zeros(bsz, np.int32),
        "seq_lens_decoder": np.ones(bsz, np.int32),
        "max_dec_len": np.full((bsz, 1), mdl, np.int64),
    }


# ---- Running the op against the reference ---------------------------------------------------------


BIG = 1 << 20  # a threshold or max_dec_len that never binds


def run_op(
    d: dict,
    place: str,
    max_ngram_size: int,
    *pad: object,
    max_draft_tokens: int | None = None,
    **kw,
) -> tuple[np.ndarray, np.ndarray]:
    """Runs the op on copies of ``d`` on ``place``; returns (draft_tokens, seq_lens_this_time).
    ``pad`` is the optional positional ``pad_to_max``; ``max_draft_tokens`` defaults to K."""
    mdt = d["draft_tokens"].shape[1] - 1 if max_draft_tokens is None else max_draft_tokens
    got = run_in_place(ngram_match, d, place, max_ngram_size, mdt, *pad, **kw)
    return got["draft_tokens"], got["seq_lens_this_time"]


def check(
    d: dict,
    place: str,
    max_ngram_size: int,
    threshold=BIG,
    pad_to_max: bool = False,
    max_draft_tokens: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Asserts op == reference exactly and returns the op's result."""
    mdt = d["draft_tokens"].shape[1] - 1 if max_draft_tokens is None else max_draft_tokens
    want = ngram_match_ref(d, max_ngram_size, mdt, pad_to_max, threshold=threshold)
    got = run_op(
        d, place, max_ngram_size, max_draft_tokens=mdt, threshold=threshold, pad_to_max=pad_to_max
    )
    np.testing.assert_array_equal(got[1], want[1], err_msg="seq_lens_this_time")
    np.testing.assert_array_equal(got[0], want[0], err_msg="draft_tokens")
    assert got[1].shape == d["seq_lens_this_time"].shape
    return got


def sentinels(batch: int, k: int) -> np.ndarray:
    """Distinct negative draft tokens [batch, k + 1]: a column the op leaves alone stays visible."""
    return -(np.arange(batch * (k + 1), dtype=np.int64).reshape(batch, k + 1) + 100)
