"""Python entry points of the suffix-decoding global cache (docs/contract/suffix.md, "The global cache").

``SuffixCache`` allocates the cache's device state once; ``suffix_cache_insert`` adds every decoding
slot's newly accepted tokens, ``suffix_cache_finish`` detaches finished requests (their responses stay
cached), ``suffix_cache_evict`` drops all but the newest responses, and ``suffix_cache_query`` is
``suffix_match`` with the global draft: per slot the local draft if its score is at least the global
draft's, else the global one. ``suffix_cache_step`` is a decode step's insert and query as one call
(what ``SuffixProposer`` runs), faster on the GPU than the two.
"""

from __future__ import annotations

import inspect
import numbers
import re
from dataclasses import dataclass

import numpy as np
import paddle
from paddle import Tensor

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import ArgumentError, IntAttr, OpSpec
from fastdeploy_spec.ops.suffix_match import SPEC as _MATCH
from fastdeploy_spec.ops.suffix_match import default_max_draft_tokens, suffix_match

# Constants of the kernels (custom_ops/suffix_cache/suffix_cache.h).
CAND_LISTS = 5  # kSuffixCandLists: a slot's candidate lists of the query, M entries each
STAT_COLS = 276  # kSuffixStatCols: a slot's histogram (256) and fields, 16-byte rows
MAX_WIDTH = 1 << 16
MAX_KEY_LEN = 8
MIN_OCCURRENCES, MAX_OCCURRENCES = 32, 1024
SLOT_FREE, SLOT_DETACHED = -1, -2
DEFAULT_COUNTED_VOCAB = (
    1 << 18
)  # tokens below it are counted per token (every current LLM vocabulary)
# Pairs of consecutive tokens below it are counted per pair (4 MiB): the frequent pairs of real
# vocabularies are pairs of common (low) ids.
DEFAULT_PAIR_VOCAB = 1 << 10
MAX_PAIR_VOCAB = 1 << 15
# Bits of each cached line's filter (a line: 32 positions of a row), the line filter's planes: 8
# bytes per position at 2048, about 4e-4 lines read in vain per item and line.
DEFAULT_LINE_PLANES = 1 << 11
MIN_LINE_PLANES, MAX_LINE_PLANES = 1 << 5, 1 << 15
LINE_LEN = 32  # kSuffixLineLen

# The parts of the state in the order they lie in it (suffix_cache_state.h, SuffixCachePart): name,
# dtype, shape from the configuration. The offsets and sizes are the op library's
# (suffix_cache_layout); tests/test_suffix_cache.py checks that these shapes fill exactly its sizes.
PARTS = (
    ("tokens", np.int64, lambda c: (c.rows, c.width)),
    ("keys", np.int32, lambda c: (c.rows, c.width)),
    ("rows", np.int64, lambda c: (c.rows, 2)),
    ("counts", np.int32, lambda c: (c.vocab_size if c.key_len == 1 else 1,)),
    ("pairs", np.int32, lambda c: (c.pair_vocab, c.pair_vocab) if c.key_len == 1 else (1, 1)),
    ("lines", np.int32, lambda c: (c.line_planes, line_words(c.rows, c.width))),
    ("slots", np.int64, lambda c: (c.slots,)),
    ("counter", np.int64, lambda c: (1,)),
    ("cand", np.int64, lambda c: (c.slots, CAND_LISTS * c.max_occurrences)),
    ("stat", np.int32, lambda c: (c.slots + 1, STAT_COLS)),
    ("line_mask", np.int32, lambda c: (line_words(c.rows, c.width),)),
)
PART_NAMES = tuple(name for name, _, _ in PARTS)


def line_words(rows: int, width: int) -> int:
    """Words (int32) of one plane of the line filter: a bit per line of 32 positions."""
    return (rows * ((width + LINE_LEN - 1) // LINE_LEN) + 31) // 32


@dataclass(frozen=True)
class SuffixCacheConfig:
    """The bounds a cache is allocated for (the ops' ``cache_config``, in this order)."""

    rows: int
    width: int
    slots: int
    key_len: int = 1
    max_occurrences: int = 1024
    vocab_size: int = DEFAULT_COUNTED_VOCAB
    pair_vocab: int = DEFAULT_PAIR_VOCAB
    line_planes: int = DEFAULT_LINE_PLANES

    def values(self) -> list:
        return [
            self.rows,
            self.width,
            self.slots,
            self.key_len,
            self.max_occurrences,
            self.vocab_size,
            self.pair_vocab,
            self.line_planes,
        ]


@dataclass(frozen=True)
class SuffixCacheLayout:
    """Where each part of the state lies (bytes), from the op library's one definition."""

    offsets: dict
    sizes: dict
    total: int
    line_bytes: int  # bytes per line of 32 cached positions: tokens, keys and their filter bits


# The two bindings SuffixCache calls itself, on host tensors it made: the layout of a configuration
# and the initial state (their attribute is the configuration's values, checked by cache_layout).
LAYOUT_SPEC = OpSpec("suffix_cache_layout", tensors=("layout",), outputs=frozenset({"layout"}))
INIT_SPEC = OpSpec(
    "suffix_cache_init", tensors=("cache_state",), outputs=frozenset({"cache_state"})
)


def cache_layout(config: SuffixCacheConfig) -> SuffixCacheLayout:
    """The layout of ``config``'s state, computed by the op library (``suffix_cache_layout``);
    a bound outside its range raises ``ValueError`` naming it."""
    out = paddle.to_tensor(np.zeros(2 * len(PARTS) + 2, np.int64), place=paddle.CPUPlace())
    vals = config.values()
    if any(isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) for v in vals):
        raise ValueError(f"SuffixCache: every bound must be an integer, got {vals}")
    if any(not -(2**63) <= int(v) < 2**63 for v in vals):
        raise ValueError(f"SuffixCache: every bound must fit int64, got {vals}")
    try:
        _loader.load().suffix_cache_layout(out, [int(v) for v in vals])
    except Exception as e:  # the binding's named error, without Paddle's frame
        m = re.search(r"cache_config: (.*?)(?: \(at |\n|$)", str(e))
        if m is None:
            raise
        raise ValueError(f"SuffixCache: {m.group(1)}") from None
    v = out.numpy().tolist()
    n = len(PARTS)
    return SuffixCacheLayout(
        dict(zip(PART_NAMES, v[:n])), dict(zip(PART_NAMES, v[n : 2 * n])), v[2 * n], v[2 * n + 1]
    )


class SuffixCache:
    """The global cache's device state: one byte tensor, allocated once, and its configuration.

    A ring of ``rows`` rows of ``width`` tokens: request number q (counted in the order requests
    begin) caches its response in row q mod rows, evicting request q - rows (first in, first out).
    Tokens past ``width`` are not cached. The state holds the ring, the per-slot states, the counts,
    the line filter and the query's scratch, laid out by the op library (:func:`cache_layout`);
    :attr:`nbytes` is its size, :attr:`bytes_per_position` the part that grows with ``rows * width``
    (12 bytes for the token and its key, plus ``line_planes / 256`` of line filter: 20 at the default).

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
    >>> c.read("rows").tolist(), c.read("slots").tolist(), c.nbytes, c.bytes_per_position
    ([[-1, 0], [-1, 0], [-1, 0], [-1, 0]], [-1, -1], 5337856, 20.0)
    """

    def __init__(self, state: paddle.Tensor, config: SuffixCacheConfig) -> None:
        self.state = state
        self.config = config
        self.layout = cache_layout(config)

    @classmethod
    def allocate(
        cls,
        rows: int,
        width: int,
        slots: int,
        key_len: int = 1,
        max_occurrences: int = 1024,
        vocab_size: int = DEFAULT_COUNTED_VOCAB,
        pair_vocab: int = DEFAULT_PAIR_VOCAB,
        line_planes: int = DEFAULT_LINE_PLANES,
        place=None,
    ) -> SuffixCache:
        config = SuffixCacheConfig(
            rows, width, slots, key_len, max_occurrences, vocab_size, pair_vocab, line_planes
        )
        total = cache_layout(config).total
        host = paddle.to_tensor(np.zeros(total, np.uint8), place=paddle.CPUPlace())
        _loader.load().suffix_cache_init(host, config.values())
        place = paddle.get_device() if place is None else place
        return cls(paddle.to_tensor(host.numpy(), place=place), config)

    @classmethod
    def from_config(
        cls, max_cached_requests: int, width: int, max_cached_tokens: int, slots: int, **kw
    ) -> SuffixCache:
        """Rows from FastDeploy's ``max_cached_requests``; -1 (unbounded) takes as many rows of
        ``width`` as ``max_cached_tokens`` positions hold. The memory is allocated here, once."""
        if max_cached_requests == -1:
            rows = max(1, max_cached_tokens // width)
        elif max_cached_requests >= 1:
            rows = max_cached_requests
        else:
            raise ValueError(
                "SuffixCache: max_cached_requests must be -1 (bounded by memory) or "
                f"at least 1, got {max_cached_requests}"
            )
        return cls.allocate(rows, width, slots, **kw)

    @property
    def key_len(self) -> int:
        return self.config.key_len

    @property
    def nbytes(self) -> int:
        """Bytes of the state: the cache and its query scratch."""
        return self.layout.total

    @property
    def bytes_per_position(self) -> float:
        """Bytes per cached position (token, key, line filter), from the op library's layout."""
        return self.layout.line_bytes / LINE_LEN

    def read(self, part: str) -> np.ndarray:
        """A copy of one part of the state (``PART_NAMES``) as a NumPy array of its dtype and shape.
        Downloads the whole state: for tests and inspection, not for a decode loop."""
        return self._part(self.state.numpy(), part).copy()

    def parts(self) -> dict:
        """Every part of the state (one download), as :meth:`read` gives them."""
        raw = self.state.numpy()
        return {name: self._part(raw, name).copy() for name in PART_NAMES}

    def write(self, part: str, value) -> None:
        """Replaces one part of the state (tests: a state the ops did not write). The state tensor
        is replaced by a new one on the same place (what holds this object sees the new one)."""
        raw = self.state.numpy().copy()
        view = self._part(raw, part)
        view[...] = np.asarray(value, view.dtype).reshape(view.shape)
        self.state = paddle.to_tensor(raw, place=self.state.place)

    def _part(self, raw: np.ndarray, part: str) -> np.ndarray:
        name, dtype, shape = next(p for p in PARTS if p[0] == part)
        off, size = self.layout.offsets[name], self.layout.sizes[name]
        return raw[off : off + size].view(dtype).reshape(shape(self.config))


class _ConfigAttr:
    """The ``cache_config`` attribute: the cache's bounds, checked when it was allocated."""

    def convert(self, op: str, name: str, value) -> list:
        return list(value)


_CONFIG = ("cache_config", _ConfigAttr())
_INSERT = OpSpec(
    "suffix_cache_insert",
    tensors=(
        "token_ids_all",
        "prompt_lens",
        "step_idx",
        "seq_lens_encoder",
        "seq_lens_decoder",
        "cache_state",
    ),
    outputs=frozenset({"cache_state"}),
    attrs=(_CONFIG,),
)
_FINISH = OpSpec(
    "suffix_cache_finish",
    tensors=("finished", "cache_state"),
    outputs=frozenset({"cache_state"}),
    attrs=(_CONFIG,),
)
_EVICT = OpSpec(
    "suffix_cache_evict",
    tensors=("cache_state",),
    outputs=frozenset({"cache_state"}),
    attrs=(("keep", IntAttr("int64, >= 0", 0, 2**63 - 1)), _CONFIG),
)
# suffix_match's arguments, then the source of each draft and the cache's state.
_QUERY = OpSpec(
    "suffix_cache_query",
    tensors=(*_MATCH.tensors, "suffix_source", "cache_state"),
    outputs=_MATCH.outputs | {"suffix_source", "cache_state"},
    attrs=(*_MATCH.attrs, _CONFIG),
)
_STEP = OpSpec(
    "suffix_cache_step", tensors=_QUERY.tensors, outputs=_QUERY.outputs, attrs=_QUERY.attrs
)
# The ops' tensor arguments before the cache, by name, and the query's outputs among them (for
# callers that keep the arguments in a dict: the tests, the benchmarks).
INSERT_TENSORS = _INSERT.tensors[:-1]
QUERY_TENSORS = _QUERY.tensors[:-1]
QUERY_OUTPUTS = tuple(n for n in QUERY_TENSORS if n in _QUERY.outputs)


def suffix_cache_insert(
    token_ids_all: paddle.Tensor,
    prompt_lens: paddle.Tensor,
    step_idx: paddle.Tensor,
    seq_lens_encoder: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    cache: SuffixCache,
) -> None:
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
    >>> c.read("tokens")[0].tolist(), c.read("rows")[0].tolist()
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
    >>> c.write("rows", [[3, 2], [4, 1], [2, 4]])         # as if five requests had begun
    >>> c.write("counter", [5])
    >>> suffix_cache_evict(c, keep=2)                        # keeps requests 3 and 4
    >>> c.read("rows").tolist()
    [[3, 2], [4, 1], [-1, 0]]
    """
    _loader.load().suffix_cache_evict(*_EVICT.args(dict(locals(), **_cache_args(_EVICT, cache))))


def _query_signature() -> inspect.Signature:
    """suffix_match's signature with ``suffix_source`` and ``cache`` after its tensors."""
    sig = inspect.signature(suffix_match)
    params = list(sig.parameters.values())
    tensors = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    extra = [
        inspect.Parameter(
            "suffix_source", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Tensor
        ),
        inspect.Parameter(
            "cache", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="SuffixCache"
        ),
    ]
    return sig.replace(parameters=tensors + extra + params[len(tensors) :])


def _query_op(spec: OpSpec, doc: str):
    """The entry point of suffix_cache_query or suffix_cache_step: one signature, two ops."""
    sig = _query_signature()

    def op(*args, **kwargs) -> None:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        values["max_draft_tokens"] = default_max_draft_tokens(
            values["max_draft_tokens"], values["draft_tokens"]
        )
        cache = values.pop("cache")
        getattr(_loader.load(), spec.op)(*spec.args(dict(values, **_cache_args(spec, cache))))

    op.__name__ = op.__qualname__ = spec.op
    op.__doc__ = doc
    op.__signature__ = sig
    return op


suffix_cache_query = _query_op(
    _QUERY,
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
    """,
)


suffix_cache_step = _query_op(
    _STEP,
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
    >>> c.read("rows").tolist()[:2], drafts.numpy()[1, 1:3].tolist(), src.numpy().tolist()
    ([[0, 4], [1, 2]], [7, 8], [0, 1])
    """,
)


def _cache_args(spec: OpSpec, cache) -> dict:
    if not isinstance(cache, SuffixCache):
        raise ArgumentError(
            f"{spec.op}: cache must be a SuffixCache (SuffixCache.allocate), got "
            f"{type(cache).__name__}"
        )
    return dict(cache_state=cache.state, cache_config=cache.config.values())
