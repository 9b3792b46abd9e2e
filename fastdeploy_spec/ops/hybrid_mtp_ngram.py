"""Python entry point of the ``hybrid_mtp_ngram`` op (docs/contract/ngram.md#hybrid_mtp_ngram), alias
``ngram_match_mixed``."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import BOOL, INT32, THRESHOLD, OpSpec

SPEC = OpSpec(
    "hybrid_mtp_ngram",
    tensors=(
        "input_ids",
        "input_ids_len",
        "pre_ids",
        "step_idx",
        "draft_token_num",
        "draft_tokens",
        "seq_lens_this_time",
        "seq_lens_decoder",
        "max_dec_len",
    ),
    outputs=frozenset({"draft_tokens", "seq_lens_this_time"}),
    attrs=(
        ("max_ngram_size", INT32),
        ("min_ngram_size", INT32),
        ("max_draft_tokens", INT32),
        ("pad_to_max", BOOL),
        ("threshold", THRESHOLD),
    ),
)


def hybrid_mtp_ngram(
    input_ids: paddle.Tensor,
    input_ids_len: paddle.Tensor,
    pre_ids: paddle.Tensor,
    step_idx: paddle.Tensor,
    draft_token_num: paddle.Tensor,
    draft_tokens: paddle.Tensor,
    seq_lens_this_time: paddle.Tensor,
    seq_lens_decoder: paddle.Tensor,
    max_dec_len: paddle.Tensor,
    max_ngram_size: int,
    min_ngram_size: int,
    max_draft_tokens: int,
    pad_to_max: bool = False,
    *,
    threshold: int | None = None,
) -> None:
    """Extend the MTP draft model's drafts with n-gram matches.

    Each slot arrives with ``ori = seq_lens_this_time[b]`` (1 + the MTP drafts already in
    ``draft_tokens[b, 1:ori]``). The newest ``n`` tokens of ``pre_ids[b, :s + 1]`` (``n`` from
    ``max_ngram_size`` down to ``min_ngram_size``, ``s = step_idx[b]``) are looked up first in the
    prompt, then in ``pre_ids[b, :s]``; the tokens that followed the leftmost match are appended after
    the MTP drafts, up to ``max_draft_tokens`` tokens per slot in all. A batch-wide budget
    (``threshold``) caps the tokens the step verifies, slot by slot in batch order. Runs on the place
    of ``input_ids`` (CPU or GPU), in place, without host synchronisation on the GPU.

    Parameters
    ----------
    input_ids : int64 [>= B, W]
        Row ``b`` starts with the slot's prompt (``input_ids_len[b]`` tokens): a runner's
        ``token_ids_all`` (upstream's name for the input, as registered).
    input_ids_len, step_idx, max_dec_len : int64 [B, 1] or [B]
        Prompt length, index of the newest token in ``pre_ids``, and the slot's decode limit.
    pre_ids : int64 [>= B, D]
        The draft model's generated tokens, newest at ``step_idx``.
    draft_token_num : int32 [B]
        Unused, kept for upstream compatibility.
    draft_tokens : int64 [B, K + 1]
        **Mutated.** Columns ``ori .. ori + m - 1`` receive the ``m`` n-gram drafts; every other
        column keeps its value.
    seq_lens_this_time : int32 [B]
        **Mutated.** ``ori + m``. Slots with ``ori == 0``, or no budget left, are untouched (a
        negative entry, which no runner produces, is clamped to 0); with ``pad_to_max`` every slot
        with ``ori > 0`` ends with ``min(max_draft_tokens, K) + 1`` (or more, if ``ori`` was).
    seq_lens_decoder : int32 [B]
        ``> 0`` counts the slot in the batch budget.
    max_ngram_size, min_ngram_size : int
        Largest and smallest n-gram tried, ``1 <= min <= max <= 64``.
    max_draft_tokens : int
        Most draft tokens per slot (MTP drafts included); writes also stay within the K columns.
    pad_to_max : bool, default False
        Graph mode (FastDeploy #7849: upstream's 13th argument, True when the target model runs in
        CUDA graphs): after the budget walk, every slot with ``ori > 0`` shorter than
        ``min(max_draft_tokens, K) + 1`` is raised to it, the new columns repeating its last valid
        token (its last draft, else column 0).
    threshold : int, optional
        Token budget of the batch. Default: ``$SPEC_TOKENUM_THRESHOLD``, else 1024.

    Examples
    --------
    The MTP model drafted 42; the draft model's tokens end in ``5 6``, which opened the prompt, so
    ``7 8`` (what followed there) extend the drafts:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import hybrid_mtp_ngram
    >>> one = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> ids = one([[5, 6, 7, 8, -1, -1]], np.int64)                    # prompt 5 6 7 8
    >>> pre = one([[9, 5, 6, -1]], np.int64)                           # newest at step_idx = 2
    >>> drafts = one([[1, 42, 0, 0]], np.int64); slt = one([2], np.int32)
    >>> hybrid_mtp_ngram(ids, one([[4]], np.int64), pre, one([[2]], np.int64), one([3], np.int32),
    ...                  drafts, slt, one([6], np.int32), one([[100]], np.int64), 2, 1, 3)
    >>> drafts.numpy().tolist(), slt.numpy().tolist()
    ([[1, 42, 7, 8]], [4])

    With ``max_draft_tokens = 2`` only 7 fits; in graph mode a slot without a match is padded:

    >>> drafts = one([[1, 42, 0, 0], [1, 0, 0, 0]], np.int64); slt = one([2, 1], np.int32)
    >>> two = lambda v, d: paddle.to_tensor(np.array([v, v], d))
    >>> hybrid_mtp_ngram(two([5, 6, 7, 8, -1, -1], np.int64), two([4], np.int64),
    ...                  one([[9, 5, 6, -1], [9, 3, 4, -1]], np.int64), two([2], np.int64),
    ...                  two(3, np.int32), drafts, slt, two(6, np.int32), two([100], np.int64),
    ...                  2, 1, 2, True)
    >>> drafts.numpy().tolist(), slt.numpy().tolist()
    ([[1, 42, 7, 0], [1, 1, 1, 0]], [3, 3])
    """
    _loader.load().hybrid_mtp_ngram(*SPEC.args(locals()))


# Upstream's Python name for the op.
ngram_match_mixed = hybrid_mtp_ngram
