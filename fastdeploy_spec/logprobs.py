"""Logprobs of the accepted tokens of a speculative step (docs/contract/logprobs.md), on the plugin's ops.

Mirrors the logprob path of FastDeploy's ``SpeculativeSampler``: gather the target model's logits
rows of the accepted tokens, then, per ``logprobs_mode``, their log-softmax (``*_logprobs``) or the
logits themselves (``*_logits``), the accepted token's value and rank, and the top-k. Upstream does
this with ``int(accept_num.sum())`` (a host sync), ``log_softmax`` and ``topk`` over every gathered
row; here two ops do it on the device with no host synchronisation, over preallocated buffers, so the
step can be captured in a CUDA graph. Rows past the accepted total (``cu[B]``) come back as padding
(ids -1, scores 0, rank 0) instead of values computed from stale memory.

``raw`` and ``processed`` differ only in which logits the runner hands over (before or after its
logits processors: penalties, bad words, temperature); the ops see logits either way. (Upstream's
speculative sampler implements only the ``raw`` modes.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import paddle

from fastdeploy_spec.ops import speculate_get_accept_tokens_and_logits, speculate_logprobs_topk
from fastdeploy_spec.transport import layout

LOGPROBS_MODES = ("raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits")


def max_num_logprobs() -> int:
    """The largest top-k of the logprob path (FastDeploy's ``max_logprobs`` default, 20).

    Read from the op library (``kMaxLogprobTopK``, which is also the top-k a logprob message carries),
    so that Python does not restate it.
    """
    return layout().k


def _place_tensor(array: np.ndarray, place, dtype: str | None = None) -> paddle.Tensor:
    """A host array copied to ``place``, cast on the host first (``bfloat16`` has no NumPy dtype, and
    no Paddle kernel may run on the device here: copies only)."""
    tensor = paddle.to_tensor(array, place=paddle.CPUPlace())
    if dtype is not None and dtype != "float32":
        tensor = tensor.astype(dtype)
    if isinstance(place, paddle.CPUPlace) or (
        hasattr(place, "is_cpu_place") and place.is_cpu_place()
    ):
        return tensor
    return tensor.cuda()


@dataclass
class LogprobsBuffers:
    """The in-place buffers of one logprob step, for a batch of B slots and K draft tokens.

    ``N = B * (K + 1)`` rows: every token a step can accept. Allocate once per batch size (e.g. per
    captured CUDA graph) with :meth:`allocate` and pass to :func:`build_output_logprobs`.
    """

    token_ids: paddle.Tensor  # int64 [N]
    target_logits: paddle.Tensor  # logits dtype [N, V]
    cu_batch_token_offset: paddle.Tensor  # int32 [B + 1]
    logprob_token_ids: paddle.Tensor  # int64 [N, k + 1]
    logprob_scores: paddle.Tensor  # float32 [N, k + 1]
    logprob_ranks: paddle.Tensor  # int64 [N]

    @classmethod
    def allocate(
        cls,
        batch: int,
        num_speculative_tokens: int,
        vocab_size: int,
        num_logprobs: int,
        dtype: str = "float32",
        place=None,
    ) -> LogprobsBuffers:
        """Zero-filled buffers on ``place`` (default: Paddle's current place).

        ``dtype`` is the logits dtype: ``float32``, ``float16`` or ``bfloat16``.
        """
        limit = max_num_logprobs()
        if not 0 <= num_logprobs <= limit:
            raise ValueError(f"num_logprobs must be in [0, {limit}], got {num_logprobs}")
        if dtype not in ("float32", "float16", "bfloat16"):
            raise ValueError(f"dtype must be float32, float16 or bfloat16, got {dtype!r}")
        place = paddle.framework._current_expected_place() if place is None else place
        n = batch * (num_speculative_tokens + 1)
        host_dtype = np.float16 if dtype == "float16" else np.float32
        return cls(
            token_ids=_place_tensor(np.zeros(n, np.int64), place),
            target_logits=_place_tensor(np.zeros((n, vocab_size), host_dtype), place, dtype),
            cu_batch_token_offset=_place_tensor(np.zeros(batch + 1, np.int32), place),
            logprob_token_ids=_place_tensor(np.zeros((n, num_logprobs + 1), np.int64), place),
            logprob_scores=_place_tensor(np.zeros((n, num_logprobs + 1), np.float32), place),
            logprob_ranks=_place_tensor(np.zeros(n, np.int64), place),
        )


@dataclass
class SpeculativeLogprobs:
    """Upstream's ``LogprobsTensors`` plus the packed offsets (views of the buffers, not copies)."""

    logprob_token_ids: paddle.Tensor  # int64 [N, k + 1]: accepted token, then the top-k ids
    logprobs: paddle.Tensor  # float32 [N, k + 1]
    selected_token_ranks: paddle.Tensor  # int64 [N]
    cu_batch_token_offset: paddle.Tensor  # int32 [B + 1]: slot b owns rows cu[b] .. cu[b+1]-1


def build_output_logprobs(
    logits: paddle.Tensor,
    accept_tokens: paddle.Tensor,
    accept_num: paddle.Tensor,
    seq_lens_this_time: paddle.Tensor,
    seq_lens_encoder: paddle.Tensor,
    cu_seqlens_q_output: paddle.Tensor,
    num_logprobs: int,
    *,
    logprobs_mode: str = "raw_logprobs",
    temperature: paddle.Tensor | None = None,
    buffers: LogprobsBuffers | None = None,
) -> SpeculativeLogprobs:
    """Logprobs of a speculative step's accepted tokens, packed slot after slot.

    Parameters
    ----------
    logits : float32, float16 or bfloat16 [R, V]
        Target model output rows (raw or processed, per ``logprobs_mode``).
    accept_tokens : int64 [B, K + 1]
    accept_num : int32 [B]
        Accepted tokens per slot (clamped to ``[0, K + 1]``).
    seq_lens_this_time, seq_lens_encoder : int32 [B] or [B, 1]
    cu_seqlens_q_output : int32 [>= B]
        First row of each slot in ``logits``.
    num_logprobs : int
        k, 0 .. 20: top-k columns after the accepted token's.
    logprobs_mode : str
        ``raw_logprobs`` / ``processed_logprobs``: log-softmax values; ``raw_logits`` /
        ``processed_logits``: the logits themselves (temperature not applied, as upstream).
    temperature : float32 [B] or [B, 1], optional
        Per-slot temperature for the logprob modes (below 1e-5, a greedy slot: none). Upstream
        scales only slots with ``temp_scaled_logprobs`` set: pass 1 for the others.
    buffers : LogprobsBuffers, optional
        Preallocated outputs for ``B`` slots and ``K``; allocated on ``logits``' place if omitted.

    Returns
    -------
    SpeculativeLogprobs
        ``[N, k + 1]`` ids and logprobs (column 0 the accepted token), ``[N]`` ranks and the
        ``[B + 1]`` offsets, N = B * (K + 1). Rows past ``cu[B]`` are padding (ids -1, 0, rank 0).

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.logprobs import build_output_logprobs
    >>> t = lambda a, d: paddle.to_tensor(np.array(a, d))
    >>> logits = t([[0.0, 1.0, 3.0], [2.0, 0.0, 0.0]], np.float32)   # one decoding slot, 2 rows
    >>> out = build_output_logprobs(logits, t([[2, 0]], np.int64), t([2], np.int32), t([2], np.int32),
    ...                             t([0], np.int32), t([0, 2], np.int32), 1)
    >>> out.logprob_token_ids.numpy().tolist(), out.selected_token_ranks.numpy().tolist()
    ([[2, 2], [0, 0]], [1, 1])
    """
    if logprobs_mode not in LOGPROBS_MODES:
        raise ValueError(f"logprobs_mode must be one of {LOGPROBS_MODES}, got {logprobs_mode!r}")
    batch = int(seq_lens_this_time.shape[0])
    num_speculative_tokens = int(accept_tokens.shape[1]) - 1
    if buffers is None:
        dtype = str(logits.dtype).replace("paddle.", "")
        buffers = LogprobsBuffers.allocate(
            batch, num_speculative_tokens, int(logits.shape[1]), num_logprobs, dtype, logits.place
        )
    n = batch * (num_speculative_tokens + 1)
    if (
        int(buffers.token_ids.shape[0]) != n
        or int(buffers.cu_batch_token_offset.shape[0]) != batch + 1
        or int(buffers.logprob_token_ids.shape[1]) != num_logprobs + 1
    ):
        raise ValueError(
            f"buffers were allocated for another shape: need N = B * (K + 1) = {n} rows, B + 1 = "
            f"{batch + 1} offsets and num_logprobs + 1 = {num_logprobs + 1} columns"
        )
    speculate_get_accept_tokens_and_logits(
        buffers.token_ids,
        buffers.target_logits,
        logits,
        buffers.cu_batch_token_offset,
        cu_seqlens_q_output,
        seq_lens_this_time,
        seq_lens_encoder,
        accept_num,
        accept_tokens,
    )
    raw_logits = logprobs_mode.endswith("_logits")
    speculate_logprobs_topk(
        buffers.target_logits,
        buffers.token_ids,
        buffers.cu_batch_token_offset,
        buffers.logprob_token_ids,
        buffers.logprob_scores,
        buffers.logprob_ranks,
        temperature=None if raw_logits else temperature,
        raw_logits=raw_logits,
    )
    return SpeculativeLogprobs(
        buffers.logprob_token_ids,
        buffers.logprob_scores,
        buffers.logprob_ranks,
        buffers.cu_batch_token_offset,
    )
