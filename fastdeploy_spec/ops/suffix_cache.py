"""Python entry points of the suffix-decoding global cache (docs/contract/suffix.md, "The global cache").

``SuffixCache`` allocates the cache's device state once; ``suffix_cache_insert`` adds every decoding
slot's newly accepted tokens, ``suffix_cache_finish`` detaches finished requests (their responses stay
cached), ``suffix_cache_evict`` drops all but the newest responses, and ``suffix_cache_query`` is
``suffix_match`` with the global draft: per slot the local draft if its score is at least the global
draft's, else the global one. ``suffix_cache_step`` is a decode step's insert and query as one call
(what ``SuffixProposer`` runs), faster on the GPU than the two.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import paddle
from paddle import Tensor

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import INT32, ArgumentError, IntAttr, OpSpec
from fastdeploy_spec.ops.suffix_match import SPEC as _MATCH, default_max_draft_tokens

# Layout constants of the kernels (custom_ops/suffix_cache/suffix_cache.h).
CAND_LISTS = 5  # kSuffixCandLists: a slot's candidate lists of the query, M entries each
STAT_COLS = 276  # kSuffixStatCols: a slot's histogram (256) and fields, 16-byte rows
MAX_WIDTH = 1 << 16
MAX_KEY_LEN = 8
MIN_OCCURRENCES, MAX_OCCURRENCES = 32, 1024
SLOT_FREE, SLOT_DETACHED = -1, -2
DEFAULT_COUNTED_VOCAB = 1 << 18  # tokens below it are counted per token (every current LLM vocabulary)
# Pairs of consecutive tokens below it are counted per pair (4 MiB): the frequent pairs of real
# vocabularies are pairs of common (low) ids.
DEFAULT_PAIR_VOCAB = 1 << 10
MAX_PAIR_VOCAB = 1 << 15
# Bits of each cached line's filter (a line: 32 positions of a row), the line filter's planes: 8
# bytes per position at 2048, about 4e-4 lines read in vain per item and line.
DEFAULT_LINE_PLANES = 1 << 11
MIN_LINE_PLANES, MAX_LINE_PLANES = 1 << 5, 1 << 15
LINE_LEN = 32  # kSuffixLineLen
# Bytes of device memory per cached token position: the token (int64) and its key (int32).
BYTES_PER_POSITION = 12


def line_words(rows: int, width: int) -> int:
    """Words (int32) of one plane of the line filter: a bit per line of 32 positions."""
    return (rows * ((width + LINE_LEN - 1) // LINE_LEN) + 31) // 32


@dataclass
class SuffixCache:
    """The global cache's device state, allocated once.

    A ring of ``rows`` rows of ``width`` tokens: request number q (counted in the order requests
    begin) caches its response in row q mod rows, evicting request q - rows (first in, first out).
    Tokens past ``width`` are not cached. Memory: ``rows * width * 12`` bytes, plus 16 per row, 8 per
    slot, 4 per counted token id (``vocab_size``), 4 per counted pair (``pair_vocab ** 2``), the line
    filter (``line_planes / 8`` per 32 positions: 8 bytes per position at the default) and the
    query scratch (``slots * (40 * max_occurrences + 4 * 276)`` bytes, and a bit per line).

    Parameters
    ----------
    rows : int
        Cached responses (FastDeploy's ``suffix_decoding_max_cached_requests``; see
        :meth:`from_config` for -1).
    width : int
        The most tokens of one response that are cached, 1 .. 65536.
    slots : int
        Slots of the runner (the batch of every call is at most this).
    key_len : int
        G, 1 .. 8: match lengths shorter than G are not searched in the global cache (the index keys
        the last G tokens of each position).
    max_occurrences : int
        M, 32 .. 1024: a global match length whose suffix occurs more than M times is skipped.
    vocab_size : int
        V >= 1: with ``key_len`` 1 the cache counts the occurrences of every token id below V
        (4 bytes each), which lets the GPU query skip most of its scan; larger ids draft the same,
        more slowly. Unused (one element) with ``key_len`` > 1.
    pair_vocab : int
        F in [0, 32768]: with ``key_len`` 1 the cache also counts every pair of consecutive token ids
        below F (4 * F * F bytes), so that a context whose last token is frequent needs no scan to
        learn whether its last two tokens are. 0: no pair counts (same drafts, more scan work).
        Unused (one element) with ``key_len`` > 1.
    line_planes : int
        P, 0 or a power of two in [32, 32768]: the bits of the filter each line of 32 cached
        positions keeps of the strings that end in it (``P / 8`` bytes per line), so that the GPU
        query reads only the lines that may hold one of its contexts. 0: every line is read (same
        drafts, more scan work).
    place : paddle place, optional
        Where the state lives (default: the current device).

    Examples
    --------
    >>> from fastdeploy_spec.ops.suffix_cache import SuffixCache
    >>> c = SuffixCache.allocate(rows=4, width=8, slots=2)
    >>> c.rows_state.numpy().tolist(), c.slots_state.numpy().tolist(), c.nbytes
    ([[-1, 0], [-1, 0], [-1, 0], [-1, 0]], [-1, -1], 5336780)
    """

    tokens: paddle.Tensor
    keys: paddle.Tensor
    rows_state: paddle.Tensor
    counts: paddle.Tensor
    pairs: paddle.Tensor
    lines: paddle.Tensor
    slots_state: paddle.Tensor
    counter: paddle.Tensor
    cand: paddle.Tensor
    stat: paddle.Tensor
    line_mask: paddle.Tensor
    key_len: int

    @classmethod
    def allocate(cls, rows: int, width: int, slots: int, key_len: int = 1,
                 max_occurrences: int = 1024, vocab_size: int = DEFAULT_COUNTED_VOCAB,
                 pair_vocab: int = DEFAULT_PAIR_VOCAB, line_planes: int = DEFAULT_LINE_PLANES,
                 place=None) -> "SuffixCache":
        if not 1 <= rows <= 1 << 30:
            raise ValueError(f"SuffixCache: rows must be in [1, 2^30], got {rows}")
        if not 1 <= width <= MAX_WIDTH:
            raise ValueError(f"SuffixCache: width must be in [1, {MAX_WIDTH}], got {width}")
        if slots < 1:
            raise ValueError(f"SuffixCache: slots must be at least 1, got {slots}")
        if not 1 <= key_len <= MAX_KEY_LEN:
            raise ValueError(f"SuffixCache: key_len must be in [1, {MAX_KEY_LEN}], got {key_len}")
        if not MIN_OCCURRENCES <= max_occurrences <= MAX_OCCURRENCES:
            raise ValueError(f"SuffixCache: max_occurrences must be in [{MIN_OCCURRENCES}, "
                             f"{MAX_OCCURRENCES}], got {max_occurrences}")
        if not 1 <= vocab_size <= 1 << 31:
            raise ValueError(f"SuffixCache: vocab_size must be in [1, 2^31], got {vocab_size}")
        if not 0 <= pair_vocab <= MAX_PAIR_VOCAB:
            raise ValueError(f"SuffixCache: pair_vocab must be in [0, {MAX_PAIR_VOCAB}], got {pair_vocab}")
        if line_planes != 0 and not (MIN_LINE_PLANES <= line_planes <= MAX_LINE_PLANES
                                     and line_planes & (line_planes - 1) == 0):
            raise ValueError(f"SuffixCache: line_planes must be 0 or a power of two in [{MIN_LINE_PLANES}, "
                             f"{MAX_LINE_PLANES}], got {line_planes}")
        place = paddle.get_device() if place is None else place

        def t(a):
            return paddle.to_tensor(a, place=place)

        rows_state = np.zeros((rows, 2), np.int64)
        rows_state[:, 0] = -1
        return cls(tokens=t(np.full((rows, width), -1, np.int64)),
                   keys=t(np.zeros((rows, width), np.int32)), rows_state=t(rows_state),
                   counts=t(np.zeros(vocab_size if key_len == 1 else 1, np.int32)),
                   pairs=t(np.zeros((pair_vocab,) * 2 if key_len == 1 else (1, 1), np.int32)),
                   lines=t(np.zeros((line_planes, line_words(rows, width)), np.int32)),
                   slots_state=t(np.full(slots, SLOT_FREE, np.int64)),
                   counter=t(np.zeros(1, np.int64)),
                   cand=t(np.zeros((slots, CAND_LISTS * max_occurrences), np.int64)),
                   stat=t(np.zeros((slots + 1, STAT_COLS), np.int32)),
                   line_mask=t(np.zeros(line_words(rows, width), np.int32)), key_len=int(key_len))

    @classmethod
    def from_config(cls, max_cached_requests: int, width: int, max_cached_tokens: int, slots: int,
                    **kw) -> "SuffixCache":
        """Rows from FastDeploy's ``max_cached_requests``; -1 (unbounded) takes as many rows of
        ``width`` as ``max_cached_tokens`` positions hold. The memory is allocated here, once."""
        if max_cached_requests == -1:
            rows = max(1, max_cached_tokens // width)
        elif max_cached_requests >= 1:
            rows = max_cached_requests
        else:
            raise ValueError("SuffixCache: max_cached_requests must be -1 (bounded by memory) or "
                             f"at least 1, got {max_cached_requests}")
        return cls.allocate(rows, width, slots, **kw)

    def op_args(self) -> dict:
        """The cache's tensors and key length under the names the ops' bindings give them."""
        return dict(cache_tokens=self.tokens, cache_keys=self.keys, cache_rows=self.rows_state,
                    cache_counts=self.counts, cache_pairs=self.pairs, cache_lines=self.lines,
                    cache_slots=self.slots_state,
                    cache_counter=self.counter, query_cand=self.cand, query_stat=self.stat,
                    query_lines=self.line_mask, key_len=self.key_len)

    @property
    def nbytes(self) -> int:
        """Device bytes held by the cache and its query scratch."""
        return int(sum(int(np.prod(x.shape)) * (8 if x.dtype == paddle.int64 else 4)
                       for x in (self.tokens, self.keys, self.rows_state, self.counts, self.pairs,
                                 self.lines, self.slots_state, self.counter, self.cand, self.stat,
                                 self.line_mask)))


_CACHE = ("cache_tokens", "cache_keys", "cache_rows", "cache_counts", "cache_pairs", "cache_lines")
_INSERT = OpSpec(
    "suffix_cache_insert",
    tensors=("token_ids_all", "prompt_lens", "step_idx", "seq_lens_encoder", "seq_lens_decoder",
             *_CACHE, "cache_slots", "cache_counter"),
    outputs=frozenset({*_CACHE, "cache_slots", "cache_counter"}),
    attrs=(("key_len", INT32),),
)
_FINISH = OpSpec("suffix_cache_finish", tensors=("finished", "cache_slots"),
                 outputs=frozenset({"cache_slots"}))
_EVICT = OpSpec(
    "suffix_cache_evict",
    tensors=(*_CACHE, "cache_counter"),
    outputs=frozenset(_CACHE),
    attrs=(("keep", IntAttr("int64, >= 0", 0, 2**63 - 1)), ("key_len", INT32)),
)
# suffix_match's arguments, then the source of each draft, the cache and the query's scratch.
_QUERY = OpSpec(
    "suffix_cache_query",
    tensors=(*_MATCH.tensors, "suffix_source", *_CACHE, "query_cand", "query_stat", "query_lines"),
    outputs=_MATCH.outputs | {"suffix_source", "query_cand", "query_stat", "query_lines"},
    attrs=(*_MATCH.attrs, ("key_len", INT32)),
)
# The query's arguments with the insert's slot states and counter after the cache's tensors.
_STEP = OpSpec(
    "suffix_cache_step",
    tensors=(*_MATCH.tensors, "suffix_source", *_CACHE, "cache_slots", "cache_counter", "query_cand",
             "query_stat", "query_lines"),
    outputs=_QUERY.outputs | _INSERT.outputs,
    attrs=_QUERY.attrs,
)


def suffix_cache_insert(token_ids_all: paddle.Tensor, prompt_lens: paddle.Tensor,
                        step_idx: paddle.Tensor, seq_lens_encoder: paddle.Tensor,
                        seq_lens_decoder: paddle.Tensor, cache: SuffixCache) -> None:
    """Adds each decoding slot's tokens generated since the last call to its cached response.

    Slot b's response is ``token_ids_all[b, P : P + s]`` (``prompt_lens``, ``step_idx``, clamped as
    ``suffix_match`` does). A prefill (``seq_lens_encoder > 0``) or empty (``seq_lens_decoder == 0``)
    slot frees its state; a decoding slot with a free state begins a new cached response (request
    numbers in slot order), evicting the oldest one; a slot whose response was evicted while active,
    or that was finished, adds nothing until its next request. Runs on the place of its tensors,
    without host synchronisation on the GPU.

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops.suffix_cache import SuffixCache, suffix_cache_insert
    >>> c = SuffixCache.allocate(rows=2, width=4, slots=1)
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> ids = t([[7, 8, 1, 2, 3, 0]], np.int64)                 # prompt 7 8, response 1 2 3
    >>> suffix_cache_insert(ids, t([[2]], np.int64), t([[3]], np.int64), t([0], np.int32),
    ...                     t([5], np.int32), c)
    >>> c.tokens.numpy()[0].tolist(), c.rows_state.numpy()[0].tolist()
    ([1, 2, 3, -1], [0, 3])
    """
    _loader.load().suffix_cache_insert(*_INSERT.args(dict(locals(), **_cache_args(_INSERT, cache))))


def suffix_cache_finish(finished: paddle.Tensor, cache: SuffixCache) -> None:
    """Detaches the slots with ``finished[b] != 0`` (int32 [B]): their responses stay cached, and
    nothing more is added to them until the slot's next request (a prefill or an empty step)."""
    _loader.load().suffix_cache_finish(*_FINISH.args(dict(locals(), **_cache_args(_FINISH, cache))))


def suffix_cache_evict(cache: SuffixCache, keep: int = 0) -> None:
    """Evicts every cached response but the newest ``keep`` (0 empties the cache), on the device,
    without host synchronisation. Eviction also happens on its own: beginning request q evicts
    request q - rows. A slot whose response is evicted adds nothing more until its next request.

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops.suffix_cache import SuffixCache, suffix_cache_evict
    >>> c = SuffixCache.allocate(rows=3, width=4, slots=1)
    >>> c.rows_state = paddle.to_tensor(np.array([[3, 2], [4, 1], [2, 4]], np.int64))
    >>> c.counter = paddle.to_tensor(np.array([5], np.int64))
    >>> suffix_cache_evict(c, keep=2)                        # keeps requests 3 and 4
    >>> c.rows_state.numpy().tolist()
    [[3, 2], [4, 1], [-1, 0]]
    """
    _loader.load().suffix_cache_evict(*_EVICT.args(dict(locals(), **_cache_args(_EVICT, cache))))


def suffix_cache_query(
    token_ids_all: Tensor, prompt_lens: Tensor, step_idx: Tensor, draft_token_num: Tensor,
    draft_tokens: Tensor, seq_lens_this_time: Tensor, seq_lens_encoder: Tensor,
    seq_lens_decoder: Tensor, max_dec_len: Tensor,
    suffix_tokens: Tensor, suffix_probs: Tensor, suffix_meta: Tensor, suffix_source: Tensor,
    cache: SuffixCache,
    *,
    max_tree_depth: int = 64, max_spec_factor: float = 1.0, max_spec_offset: float = 0.0,
    min_token_prob: float = 0.1, max_draft_tokens: int | None = None, pad_to_max: bool = False,
    threshold: int | None = None,
) -> None:
    """``suffix_match`` with the global cache: per decoding slot, the local draft (its own history)
    and the global draft (the cached responses, from the same context and with the same rules), the
    local one kept if its score is at least the global one's; then the batch budget walk.

    Arguments as ``suffix_match``'s, plus ``suffix_source`` (int32 [>= B], **mutated** for decoding
    slots: 0 the local draft won, 1 the global one) and the ``cache``. ``suffix_meta`` holds the
    winner's length and match length, ``suffix_probs`` its probabilities.

    Examples
    --------
    A cached response ``5 6 7 8`` drafts ``7 8`` for a request whose own history ends in ``5 6``:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops.suffix_cache import (SuffixCache, suffix_cache_insert,
    ...                                                suffix_cache_query)
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> c = SuffixCache.allocate(rows=4, width=8, slots=2, key_len=2)
    >>> ids = t([[1, 5, 6, 7, 8, -1, -1, -1, -1], [2, 3, 5, 6, -1, -1, -1, -1, -1]], np.int64)
    >>> P, s = t([[1], [2]], np.int64), t([[4], [2]], np.int64)
    >>> enc, dec = t([0, 0], np.int32), t([5, 4], np.int32)
    >>> suffix_cache_insert(ids, P, s, enc, dec, c)          # responses 5 6 7 8 and 5 6
    >>> drafts, slt = paddle.zeros([2, 4], 'int64'), t([1, 1], np.int32)
    >>> toks, probs = paddle.zeros([2, 3], 'int64'), paddle.zeros([2, 3])
    >>> meta, src = t([[0, 0], [0, 0]], np.int32), t([0, 0], np.int32)
    >>> suffix_cache_query(ids, P, s, t([3, 3], np.int32), drafts, slt, enc, dec,
    ...                    t([[9], [9]], np.int64), toks, probs, meta, src, c, max_spec_factor=2.0)
    >>> drafts.numpy()[1, 1:3].tolist(), src.numpy().tolist(), meta.numpy()[1].tolist()
    ([7, 8], [0, 1], [2, 2])
    """
    max_draft_tokens = default_max_draft_tokens(max_draft_tokens, draft_tokens)
    _loader.load().suffix_cache_query(*_QUERY.args(dict(locals(), **_cache_args(_QUERY, cache))))


def suffix_cache_step(
    token_ids_all: Tensor, prompt_lens: Tensor, step_idx: Tensor, draft_token_num: Tensor,
    draft_tokens: Tensor, seq_lens_this_time: Tensor, seq_lens_encoder: Tensor,
    seq_lens_decoder: Tensor, max_dec_len: Tensor,
    suffix_tokens: Tensor, suffix_probs: Tensor, suffix_meta: Tensor, suffix_source: Tensor,
    cache: SuffixCache,
    *,
    max_tree_depth: int = 64, max_spec_factor: float = 1.0, max_spec_offset: float = 0.0,
    min_token_prob: float = 0.1, max_draft_tokens: int | None = None, pad_to_max: bool = False,
    threshold: int | None = None,
) -> None:
    """``suffix_cache_insert`` then ``suffix_cache_query`` with the same arguments, in one call.

    The results are those of the two calls, bit for bit. On the GPU the step is faster: nothing
    runs between the insert and the query, so the query starts reading its inputs while the insert
    still runs (docs/performance.md), and it is one op dispatch on the host instead of two.

    Examples
    --------
    Slot 0's response ``5 6 7 8`` is cached and drafts ``7 8`` for slot 1, whose history ends in
    ``5 6``, in the same step:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops.suffix_cache import SuffixCache, suffix_cache_step
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> c = SuffixCache.allocate(rows=4, width=8, slots=2, key_len=2)
    >>> ids = t([[1, 5, 6, 7, 8, -1, -1, -1, -1], [2, 3, 5, 6, -1, -1, -1, -1, -1]], np.int64)
    >>> P, s = t([[1], [2]], np.int64), t([[4], [2]], np.int64)
    >>> drafts, slt = paddle.zeros([2, 4], 'int64'), t([1, 1], np.int32)
    >>> toks, probs = paddle.zeros([2, 3], 'int64'), paddle.zeros([2, 3])
    >>> meta, src = t([[0, 0], [0, 0]], np.int32), t([0, 0], np.int32)
    >>> suffix_cache_step(ids, P, s, t([3, 3], np.int32), drafts, slt, t([0, 0], np.int32),
    ...                   t([5, 4], np.int32), t([[9], [9]], np.int64), toks, probs, meta, src, c,
    ...                   max_spec_factor=2.0)
    >>> c.rows_state.numpy().tolist()[:2], drafts.numpy()[1, 1:3].tolist(), src.numpy().tolist()
    ([[0, 4], [1, 2]], [7, 8], [0, 1])
    """
    max_draft_tokens = default_max_draft_tokens(max_draft_tokens, draft_tokens)
    _loader.load().suffix_cache_step(*_STEP.args(dict(locals(), **_cache_args(_STEP, cache))))


def _cache_args(spec: OpSpec, cache) -> dict:
    if not isinstance(cache, SuffixCache):
        raise ArgumentError(f"{spec.op}: cache must be a SuffixCache (SuffixCache.allocate), got "
                            f"{type(cache).__name__}")
    return cache.op_args()
