"""Python entry point of the ``ngram_match`` op (docs/contract/ngram.md#ngram_match)."""

from __future__ import annotations

from paddle import Tensor

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import BOOL, DRAFT_INPUTS, INT32, THRESHOLD, OpSpec

SPEC = OpSpec(
    "ngram_match",
    tensors=DRAFT_INPUTS,
    outputs=frozenset({"draft_tokens", "seq_lens_this_time"}),
    attrs=(
        ("max_ngram_size", INT32),
        ("max_draft_tokens", INT32),
        ("pad_to_max", BOOL),
        ("threshold", THRESHOLD),
    ),
)


def ngram_match(
    # the nine share-input tensors of the n-gram/suffix family (DRAFT_INPUTS), in upstream's order
    token_ids_all: Tensor,
    prompt_lens: Tensor,
    step_idx: Tensor,
    draft_token_num: Tensor,
    draft_tokens: Tensor,
    seq_lens_this_time: Tensor,
    seq_lens_encoder: Tensor,
    seq_lens_decoder: Tensor,
    max_dec_len: Tensor,
    max_ngram_size: int,
    max_draft_tokens: int,
    pad_to_max: bool = False,
    *,
    threshold: int | None = None,
) -> None:
    """Propose draft tokens by matching each slot's newest n-gram in its prompt and its output.

    For every decoding slot, the last ``n`` generated tokens (``n`` from ``max_ngram_size`` down to 1)
    are looked up first in the prompt, then in the generated tokens; the tokens that followed the
    leftmost match become the drafts. A batch-wide budget (``threshold``) caps the tokens the step
    verifies, slot by slot in batch order. Runs on the place of ``token_ids_all`` (CPU or GPU), in
    place, without host synchronisation on the GPU.

    Parameters
    ----------
    token_ids_all : int64 [>= B, W]
        Prompt then generated tokens of each slot, -1 padded.
    prompt_lens, step_idx, max_dec_len : int64 [B, 1] or [B]
        Prompt length, generated-token count, and the slot's decode limit.
    draft_token_num : int32 [B]
        Per-slot draft cap.
    draft_tokens : int64 [B, K + 1]
        **Mutated.** Columns ``1 .. m`` receive the ``m`` drafts; column 0 and columns past the
        drafts keep their values.
    seq_lens_this_time : int32 [B]
        **Mutated.** ``1 + m`` for decoding slots (``max_draft_tokens + 1`` with ``pad_to_max``), 0
        for empty slots; prefill slots keep theirs.
    seq_lens_encoder, seq_lens_decoder : int32 [B]
        ``encoder > 0`` marks a prefill slot (untouched); ``decoder == 0`` an empty one.
    max_ngram_size : int
        Largest n-gram tried, 1 .. 64.
    max_draft_tokens : int
        The length ``pad_to_max`` pads to, minus one (the draft cap itself is ``draft_token_num``).
    pad_to_max : bool, default False
        Graph mode (FastDeploy #7849, passed when the target model runs in CUDA graphs): every
        decoding slot ends with ``seq_lens_this_time = min(max_draft_tokens, K) + 1``, the columns
        after its drafts repeating its last valid token (its last draft, else column 0). Applied
        after the budget walk; prefill and empty slots are untouched.
    threshold : int, optional
        Token budget of the batch. Default: ``$INFER_WITH_REFERENCE_TOKENUM_THRESHOLD``, else 128.

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import ngram_match
    >>> ids = paddle.to_tensor(np.array([[5, 6, 7, 8, 5, 6, -1, -1]], np.int64))  # prompt 5 6 7 8
    >>> one = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> drafts = paddle.zeros([1, 4], 'int64'); slt = one([1], np.int32)
    >>> ngram_match(ids, one([[4]], np.int64), one([[2]], np.int64), one([3], np.int32), drafts,
    ...             slt, one([0], np.int32), one([6], np.int32), one([[100]], np.int64), 2, 3)
    >>> drafts.numpy().tolist(), slt.numpy().tolist()   # "5 6" was followed by "7 8" in the prompt
    ([[0, 7, 8, 0]], [3])

    In graph mode the slot is padded to ``max_draft_tokens + 1 = 4`` tokens with its last draft:

    >>> slt = one([1], np.int32)
    >>> ngram_match(ids, one([[4]], np.int64), one([[2]], np.int64), one([3], np.int32), drafts,
    ...             slt, one([0], np.int32), one([6], np.int32), one([[100]], np.int64), 2, 3, True)
    >>> drafts.numpy().tolist(), slt.numpy().tolist()
    ([[0, 7, 8, 8]], [4])
    """
    _loader.load().ngram_match(*SPEC.args(locals()))
