"""Python entry point of the ``verify_draft_tokens`` op (docs/contract/decode_step.md)."""

from __future__ import annotations

from enum import IntEnum

import paddle

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import BOOL, INT32, ArgumentError, OpSpec

_TENSORS = (
    "step_output_ids",
    "step_output_len",
    "step_input_ids",
    "target_tokens",
    "candidate_ids",
    "candidate_scores",
    "candidate_lens",
    "topp",
    "stop_flags",
    "seq_lens_encoder",
    "seq_lens_this_time",
    "end_tokens",
    "is_block_step",
    "cu_seqlens_q_output",
    "reasoning_status",
    "max_dec_len",
    "step_idx",
)
_OPTIONAL = frozenset(
    {
        "target_tokens",
        "candidate_ids",
        "candidate_scores",
        "candidate_lens",
        "max_dec_len",
        "step_idx",
    }
)
_OUTPUTS = frozenset({"step_output_ids", "step_output_len"})
_ATTR_TYPES = (
    ("max_seq_len", INT32),
    ("verify_window", INT32),
    ("verify_strategy", INT32),
    ("reject_all", BOOL),
    ("accept_all", BOOL),
)

# FastDeploy's registration (its 17 inputs), and ours with each slot's Philox key as an 18th input
# under a name of our own (docs/contract/names.md).
SPEC = OpSpec(
    "verify_draft_tokens", tensors=_TENSORS, outputs=_OUTPUTS, attrs=_ATTR_TYPES, optional=_OPTIONAL
)
SEEDED_SPEC = OpSpec(
    "verify_draft_tokens_seeded",
    tensors=_TENSORS + ("seeds",),
    outputs=_OUTPUTS,
    attrs=_ATTR_TYPES,
    optional=_OPTIONAL | {"seeds"},
    caller="verify_draft_tokens",
)

_ATTRS = ("max_seq_len", "verify_window", "verify_strategy", "reject_all", "accept_all")


class VerifyStrategy(IntEnum):
    """``verify_strategy`` values (FastDeploy's ``fastdeploy.spec_decode.VerifyStrategy``)."""

    TOPP = 0  # draft in the position's top-p candidate set; the last token drawn from that set
    GREEDY = 1  # draft == the target's argmax (target_tokens)
    TARGET_MATCH = 2  # draft == the target's sampled token (target_tokens)

    @classmethod
    def from_string(cls, value: str) -> VerifyStrategy:
        """The strategy named ``value`` (case-insensitive): ``"topp"``, ``"greedy"``, ``"target_match"``."""
        if not isinstance(value, str):
            raise TypeError(f"VerifyStrategy.from_string takes a str, got {type(value).__name__}")
        try:
            return cls[value.upper()]
        except KeyError:
            raise ValueError(
                f"invalid verify strategy {value!r}; one of {[s.name for s in cls]}"
            ) from None


def _check_strategy_inputs(values: dict) -> None:
    """The strategy's own tensors are given (for a non-empty batch, as upstream checks)."""
    strategy, rows = values["verify_strategy"], values["step_output_len"]
    if not isinstance(rows, paddle.Tensor) or rows.size == 0 or strategy not in (0, 1, 2):
        return  # the binding names what is wrong
    if strategy == VerifyStrategy.TOPP:
        missing = [
            k for k in ("candidate_ids", "candidate_scores", "candidate_lens") if values[k] is None
        ]
        if missing:
            raise ArgumentError(
                f"verify_draft_tokens: verify_strategy TOPP (0) needs candidate_ids, "
                f"candidate_scores and candidate_lens; {', '.join(missing)} is None"
            )
    elif values["target_tokens"] is None:
        raise ArgumentError(
            f"verify_draft_tokens: verify_strategy {VerifyStrategy(strategy).name} "
            f"({strategy}) needs target_tokens; it is None"
        )


def verify_draft_tokens(
    step_output_ids: paddle.Tensor,
    step_output_len: paddle.Tensor,
    step_input_ids: paddle.Tensor,
    target_tokens: paddle.Tensor | None,
    candidate_ids: paddle.Tensor | None,
    candidate_scores: paddle.Tensor | None,
    candidate_lens: paddle.Tensor | None,
    topp: paddle.Tensor,
    stop_flags: paddle.Tensor,
    seq_lens_encoder: paddle.Tensor,
    seq_lens_this_time: paddle.Tensor,
    end_tokens: paddle.Tensor,
    is_block_step: paddle.Tensor,
    cu_seqlens_q_output: paddle.Tensor,
    reasoning_status: paddle.Tensor,
    *rest,
    seeds: paddle.Tensor | None = None,
) -> None:
    """Verify one decode step's drafts against the target model and emit each slot's tokens.

    FastDeploy's op of this name, positional arguments in its order. ``rest`` is its 17-tensor tail
    ``max_dec_len, step_idx, max_seq_len, verify_window, verify_strategy, reject_all, accept_all`` or
    its earlier 15-tensor tail ``max_seq_len, verify_window, verify_strategy, reject_all,
    accept_all`` (no length limit; GREEDY and TARGET_MATCH only). Per slot: stopped, blocked and
    unscheduled slots emit nothing; prefill and ``reasoning_status == 1`` slots emit the target's
    token only; otherwise drafts are accepted left to right while they pass the strategy, and the
    first failing (or last) position emits the target's token (TOPP: a draw from that position's
    candidate set). An end token, or reaching ``max_dec_len``, ends the row (a non-end token at
    ``max_dec_len`` becomes ``end_tokens[0]``). Runs on the place of ``step_output_ids``; on the GPU
    one thread per row, any batch, without host synchronisation.

    Parameters
    ----------
    step_output_ids : int64 [>= R, W]
        **Mutated.** Every row set to -1, then the emitted tokens from column 0.
    step_output_len : int32 [R]
        **Mutated.** Tokens emitted per row (R rows; slots past B emit nothing).
    step_input_ids : int64 [>= R, W]
        Column 0 the last accepted token, columns ``1 .. seq_lens_this_time - 1`` the drafts.
    target_tokens : int64 [T] or None
        Packed per position (slot b's rows start at ``cu_seqlens_q_output[b]``): the target's argmax
        (GREEDY) or sampled token (TARGET_MATCH). Unused by TOPP.
    candidate_ids, candidate_scores, candidate_lens : int64 [T, C], float32 [T, C], int32 [T], or None
        TOPP's candidate sets per packed position (``top_p_candidates``); lengths clamped to [0, C].
    topp : float32 [R]
        Slot's top_p: the TOPP draw is a uniform in [0, top_p) walked along the scores.
    stop_flags, is_block_step : bool [R]
        Stopped or blocked slots emit nothing.
    seq_lens_encoder, reasoning_status : int32 [R]
        ``encoder != 0`` (prefill) or ``reasoning_status == 1``: the target's token only.
    seq_lens_this_time : int32 [B], B <= R
        ``1 + drafts`` per slot; <= 0 emits nothing.
    end_tokens : int64 [E] or [E, 1]
    cu_seqlens_q_output : int32 [>= B]
        First packed row of each slot.
    rest
        See above; ``max_dec_len, step_idx`` int64 [R]. ``verify_strategy`` a :class:`VerifyStrategy`
        or its int. ``verify_window`` and ``max_seq_len`` are accepted and unused (upstream's newest
        GPU kernel reads neither).
    seeds : int64 [R], optional
        Philox key per slot for the TOPP draw (the request's seed); default: the slot index. The
        counter is the output position ``step_idx + i``, so a replayed CUDA graph draws new numbers
        once ``unified_update_model_status`` has advanced ``step_idx`` (docs/design/randomness.md).

    Examples
    --------
    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import verify_draft_tokens
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> out_ids, out_len = t([[0, 0, 0, 0]], np.int64), t([0], np.int32)
    >>> verify_draft_tokens(
    ...     out_ids, out_len, t([[4, 7, 8, 9]], np.int64),  # last token 4, drafts 7 8 9
    ...     t([7, 8, 5, 6], np.int64), None, None, None,   # the target's argmax per position
    ...     t([1.0], np.float32), t([False], np.bool_), t([0], np.int32), t([4], np.int32),
    ...     t([2], np.int64), t([False], np.bool_), t([0], np.int32), t([0], np.int32),
    ...     t([100], np.int64), t([3], np.int64), 1024, 2, 1, False, False)
    >>> out_ids.numpy().tolist(), out_len.numpy().tolist()  # 7 8 agree, 9 != 5: emit 5
    ([[7, 8, 5, -1]], [3])
    """
    if len(rest) == 7:
        max_dec_len, step_idx, attrs = rest[0], rest[1], rest[2:]
    elif len(rest) == 5 and not isinstance(rest[0], paddle.Tensor):
        max_dec_len, step_idx, attrs = None, None, rest
    else:
        raise ArgumentError(
            f"verify_draft_tokens: expected 17 tensors and 5 attributes (or the earlier "
            f"15 tensors and 5 attributes), got {15 + len(rest)} positional arguments"
        )
    values = dict(locals())
    values.update(zip(_ATTRS, (int(a) if isinstance(a, IntEnum) else a for a in attrs)))
    _check_strategy_inputs(values)
    if seeds is None:
        _loader.load().verify_draft_tokens(*SPEC.args(values))
    else:
        _loader.load().verify_draft_tokens_seeded(*SEEDED_SPEC.args(values))
