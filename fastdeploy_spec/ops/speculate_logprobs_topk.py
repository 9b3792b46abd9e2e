"""Python entry point of the ``speculate_logprobs_topk`` op (docs/contract/logprobs.md)."""

from __future__ import annotations

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import BOOL, OpSpec

SPEC = OpSpec(
    "speculate_logprobs_topk",
    tensors=(
        "target_logits",
        "token_ids",
        "cu_batch_token_offset",
        "logprob_token_ids",
        "logprob_scores",
        "logprob_ranks",
        "temperature",
    ),
    outputs=frozenset({"logprob_token_ids", "logprob_scores", "logprob_ranks"}),
    attrs=(("raw_logits", BOOL),),
    optional=frozenset({"temperature"}),
)


def speculate_logprobs_topk(
    target_logits: paddle.Tensor,
    token_ids: paddle.Tensor,
    cu_batch_token_offset: paddle.Tensor,
    logprob_token_ids: paddle.Tensor,
    logprob_scores: paddle.Tensor,
    logprob_ranks: paddle.Tensor,
    *,
    temperature: paddle.Tensor | None = None,
    raw_logits: bool = False,
) -> None:
    """Logprob, rank and top-k of each accepted token's row, in one pass over the vocabulary.

    Rows ``r < cu[B]`` (read where the data lives) are the gathered rows of
    ``speculate_get_accept_tokens_and_logits``. For each, with ``x = target_logits[r] / T`` (T the
    temperature of the row's slot, if given):

    - column 0: ``token_ids[r]`` and its logprob ``x[t] - logsumexp(x)``; ``rank[r]`` is the number
      of vocabulary entries with ``x >= x[t]`` (the best token has rank 1);
    - columns ``1 .. k``: the ``k`` best entries, larger ``x`` first, ties to the lower token id.

    Scores are clipped below at the float32 minimum, as upstream clips its logprobs. Padding rows
    (``r >= cu[B]``) get ids -1, scores 0 and rank 0 in every column. An accepted token outside
    ``[0, V)`` keeps its id in column 0, with score 0 and rank 0. The outputs are caller-allocated
    and written in place, so a runner can capture the op in a CUDA graph; k is
    ``logprob_token_ids.shape[1] - 1``.

    Parameters
    ----------
    target_logits : float32, float16 or bfloat16 [N, V]
    token_ids : int64 [N]
        The accepted token of each row.
    cu_batch_token_offset : int32 [B + 1]
        Row offsets of the slots (B is its size minus one); rows past ``cu[B]`` are padding.
    logprob_token_ids : int64 [N, k + 1], k <= 20
        **Mutated.** Column 0 the accepted token, columns ``1 .. k`` the top-k ids.
    logprob_scores : float32 [N, k + 1]
        **Mutated.** Their logprobs (or scaled logits with ``raw_logits``).
    logprob_ranks : int64 [N]
        **Mutated.** Rank of the accepted token.
    temperature : float32 [B] or [B, 1], optional
        Per-slot temperature. A value below ``1e-5`` (the sampling epsilon under which a slot is
        greedy: 0, negative, NaN, or so small that ``1 / T`` would overflow) or ``+inf`` means 1:
        the slot's logits are not scaled. To mirror upstream's ``temp_scaled_logprobs`` flag, pass 1
        where it is off.
    raw_logits : bool
        Scores are the (scaled) logits themselves, not logprobs (``logprobs_mode="*_logits"``).

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_logprobs_topk
    >>> t = lambda a, d: paddle.to_tensor(np.array(a, d))
    >>> logits = t([[0.0, 2.0, 1.0, 2.0], [0.0, 0.0, 0.0, 0.0]], np.float32)
    >>> ids, scores, ranks = t(np.zeros((2, 3)), np.int64), t(np.zeros((2, 3)), np.float32), t([0, 0], np.int64)
    >>> speculate_logprobs_topk(logits, t([2, 7], np.int64), t([0, 1], np.int32), ids, scores, ranks)
    >>> ids.numpy().tolist(), ranks.numpy().tolist()   # row 1 is padding (cu[B] = 1)
    ([[2, 1, 3], [-1, -1, -1]], [3, 0])
    """
    _loader.load().speculate_logprobs_topk(*SPEC.args(locals()))
