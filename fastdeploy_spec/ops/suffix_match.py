"""Python entry point of the ``suffix_match`` op (docs/contract/suffix.md)."""

from __future__ import annotations

from paddle import Tensor

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import BOOL, DRAFT_INPUTS, FLOAT, INT32, THRESHOLD, OpSpec

SPEC = OpSpec(
    "suffix_match",
    tensors=(*DRAFT_INPUTS, "suffix_tokens", "suffix_probs", "suffix_meta"),
    outputs=frozenset(
        {"draft_tokens", "seq_lens_this_time", "suffix_tokens", "suffix_probs", "suffix_meta"}
    ),
    attrs=(
        ("max_tree_depth", INT32),
        ("max_spec_factor", FLOAT),
        ("max_spec_offset", FLOAT),
        ("min_token_prob", FLOAT),
        ("max_draft_tokens", INT32),
        ("pad_to_max", BOOL),
        ("threshold", THRESHOLD),
    ),
)


def suffix_match(
    token_ids_all: Tensor,
    prompt_lens: Tensor,
    step_idx: Tensor,
    draft_token_num: Tensor,
    draft_tokens: Tensor,
    seq_lens_this_time: Tensor,
    seq_lens_encoder: Tensor,
    seq_lens_decoder: Tensor,
    max_dec_len: Tensor,
    suffix_tokens: Tensor,
    suffix_probs: Tensor,
    suffix_meta: Tensor,
    *,
    max_tree_depth: int = 64,
    max_spec_factor: float = 1.0,
    max_spec_offset: float = 0.0,
    min_token_prob: float = 0.1,
    max_draft_tokens: int | None = None,
    pad_to_max: bool = False,
    threshold: int | None = None,
) -> None:
    """Propose draft tokens by suffix decoding over each slot's own history.

    For every decoding slot, the history H is its prompt followed by its generated tokens and the
    context C the last ``max_tree_depth`` tokens of H. For each match length L, the occurrences in
    H of the context's last L tokens vote for the next token; the draft follows the most frequent
    continuation (ties: the one seen first) while the product of the count ratios stays at least
    ``min_token_prob`` and the draft is shorter than ``L * max_spec_factor + max_spec_offset``. The
    draft with the highest sum of probabilities wins (a longer match on ties). The batch budget of
    ``ngram_match`` (``threshold``) then truncates the drafts slot by slot. Runs on the place of
    ``token_ids_all`` (CPU or GPU), in place, without host synchronisation on the GPU.

    Parameters
    ----------
    token_ids_all : int64 [>= B, W]
        Prompt then generated tokens of each slot.
    prompt_lens, step_idx, max_dec_len : int64 [B, 1] or [B]
        Prompt length, generated-token count, and the slot's decode limit.
    draft_token_num : int32 [B]
        Per-slot draft cap.
    draft_tokens : int64 [B, K + 1]
        **Mutated.** Columns ``1 .. m`` receive the ``m`` drafts kept by the budget; column 0 and
        the columns past the drafts keep their values (``pad_to_max`` aside).
    seq_lens_this_time : int32 [B]
        **Mutated.** ``1 + m`` for decoding slots, 0 for empty slots; prefill slots keep theirs.
    seq_lens_encoder, seq_lens_decoder : int32 [B]
        ``encoder > 0`` marks a prefill slot (untouched); ``decoder == 0`` an empty one.
    suffix_tokens : int64 [>= B, K]
        **Mutated** (decoding slots' rows): the draft before the batch budget, -1 after it.
    suffix_probs : float32 [>= B, K]
        **Mutated** (decoding slots' rows): each draft token's probability, 0 after the draft. The
        draft's score is their float32 sum, left to right.
    suffix_meta : int32 [>= B, 2]
        **Mutated** (decoding slots' rows): the draft's length and its match length.
    max_tree_depth : int
        D, 1 .. 256: the context length and the deepest string counted.
    max_spec_factor, max_spec_offset : float
        Draft length limit ``floor(L * max_spec_factor + max_spec_offset + 1e-6)`` at match length L.
    min_token_prob : float
        A token is drafted only while its probability is at least this.
    max_draft_tokens : int, optional
        The most drafts per slot (default K) and, with ``pad_to_max``, the padded length.
    pad_to_max : bool
        Every decoding slot leaves with ``seq_lens_this_time = max_draft_tokens + 1``, missing
        drafts filled with its last valid token (the last draft, else column 0).
    threshold : int, optional
        Token budget of the batch. Default: ``$INFER_WITH_REFERENCE_TOKENUM_THRESHOLD``, else 128.

    Examples
    --------
    The history ends with 1 2, which occurred twice before, followed by 3 4 and by 3 6:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import suffix_match
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> ids = t([[1, 2, 3, 4, 5, 1, 2, 3, 6, 7, 1, 2, -1, -1, -1, -1, -1, -1]], np.int64)  # P = 12
    >>> drafts, slt = paddle.zeros([1, 6], 'int64'), t([1], np.int32)
    >>> toks, probs, meta = paddle.zeros([1, 5], 'int64'), paddle.zeros([1, 5]), t([[0, 0]], np.int32)
    >>> suffix_match(ids, t([[12]], np.int64), t([[0]], np.int64), t([5], np.int32), drafts, slt,
    ...              t([0], np.int32), t([12], np.int32), t([[100]], np.int64), toks, probs, meta)
    >>> drafts.numpy()[0, 1:3].tolist(), meta.numpy().tolist()    # draft, (length, match length)
    ([3, 4], [[2, 2]])
    >>> [round(float(p), 4) for p in probs.numpy()[0, :2]]         # 2/3, then 2/3 * 1/2
    [0.6667, 0.3333]
    """
    max_draft_tokens = default_max_draft_tokens(max_draft_tokens, draft_tokens)
    _loader.load().suffix_match(*SPEC.args(locals()))


def default_max_draft_tokens(max_draft_tokens, draft_tokens):
    """``max_draft_tokens`` of the suffix ops: None means K, the drafts that fit a ``draft_tokens`` row
    [B, K + 1]. A malformed ``draft_tokens`` keeps None, for the validation layer to name it."""
    if max_draft_tokens is None and isinstance(draft_tokens, Tensor) and draft_tokens.ndim == 2:
        return draft_tokens.shape[1] - 1
    return max_draft_tokens
