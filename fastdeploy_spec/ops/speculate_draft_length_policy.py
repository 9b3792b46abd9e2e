"""Python entry point of the ``speculate_draft_length_policy`` op (docs/contract/policy.md)."""

from __future__ import annotations

from paddle import Tensor

from fastdeploy_spec.ops import _loader
from fastdeploy_spec.ops._common import IntAttr, OpSpec

Q16 = IntAttr("int32, Q16 in [0, 65536]", 0, 65536)
NS = IntAttr("int64, ns in [0, 2^32 - 1]", 0, 2**32 - 1)

SPEC = OpSpec(
    "speculate_draft_length_policy",
    tensors=(
        "accept_num",
        "draft_tokens",
        "draft_len",
        "draft_probe",
        "accept_ewma",
        "draft_opt_out",
        "seq_lens_this_time",
        "seq_lens_encoder",
        "seq_lens_decoder",
        "stop_flags",
        "cost_table",
    ),
    outputs=frozenset({"draft_len", "draft_probe", "accept_ewma", "seq_lens_this_time"}),
    attrs=(("alpha", Q16), ("prior", Q16), ("seq_cost_ns", NS), ("step_cost_ns", NS)),
)


def speculate_draft_length_policy(
    accept_num: Tensor,
    draft_tokens: Tensor,
    draft_len: Tensor,
    draft_probe: Tensor,
    accept_ewma: Tensor,
    draft_opt_out: Tensor,
    seq_lens_this_time: Tensor,
    seq_lens_encoder: Tensor,
    seq_lens_decoder: Tensor,
    stop_flags: Tensor,
    cost_table: Tensor,
    alpha: int = 8192,
    prior: int = 32768,
    seq_cost_ns: int = 0,
    step_cost_ns: int = 0,
) -> None:
    """Cut each decoding slot's drafts to the number that pays, from its own measured acceptance.

    Run after a proposer (``seq_lens_this_time = 1 + drafts``) and before verification. First each
    decoding slot learns from the previous step: of the ``draft_len[b]`` drafts verified then,
    ``accept_num[b] - 1`` were accepted; when all were, the first draft the policy cut
    (``draft_probe[b]``) is compared with the token the target gave in its place (the bonus token,
    ``draft_tokens[b, 0]`` after the step update). Its per-position acceptance estimates
    (``accept_ewma``, Q16 fixed point: 65536 = 1, the probability that draft i + 1 is accepted when
    drafts 1..i were) move toward what was seen by ``alpha`` / 65536. A prefill slot (a new
    request) starts from ``prior``. Then every slot's k (0 ..
    its drafts) is chosen to maximise the batch's expected output tokens per ns of step time, the step
    time of n verified tokens read from ``cost_table[n - 1]`` (ns) plus ``seq_cost_ns`` per scheduled
    slot and ``step_cost_ns``: exactly, over every choice of per-slot k (the expected gain of a slot's
    j-th draft is the product of its first j estimates). A slot flagged in ``draft_opt_out`` gets
    k = 0. Writes ``seq_lens_this_time = 1 + k`` on decoding slots and ``draft_len = k`` on every slot
    (0 where nothing is verified) and ``draft_probe`` (the draft at position k + 1, -1 when none).
    Integer arithmetic only: the CPU and the GPU give the same bits; on
    the GPU one kernel, no host synchronisation.

    Parameters
    ----------
    accept_num : int32 [B]
        Tokens accepted per slot by the previous verification (the bonus token included).
    draft_tokens : int64 [>= B, K + 1]
        The proposer's drafts (columns 1..), after the last accepted token (column 0).
    draft_len : int32 [B]
        **Mutated.** On entry the drafts each slot verified last step (this op's previous output); on
        exit this step's k.
    draft_probe : int64 [B]
        **Mutated.** The first draft cut last step (-1: none), then this step's.
    accept_ewma : int32 [>= B, K]
        **Mutated.** Per-position acceptance estimates, Q16; K is the most drafts per slot.
    draft_opt_out : bool [B]
        Requests that must not draft (k = 0 every step).
    seq_lens_this_time : int32 [B]
        **Mutated.** Tokens of each slot this step; decoding slots are cut to ``1 + k``.
    seq_lens_encoder, seq_lens_decoder : int32 [B]
        Slot lengths (prefill: ``seq_lens_encoder > 0``; decoding: ``seq_lens_decoder != 0``).
    stop_flags : bool [B] or [B, 1]
        Finished slots (idle).
    cost_table : int64 [L]
        ns of a step verifying 1 .. L tokens (extended along its last segment past L).
    alpha, prior : int
        Q16 weight of an observation and the prior, each in [0, 65536].
    seq_cost_ns, step_cost_ns : int
        ns per scheduled slot (its attention) and per step (drafting), in [0, 2^32 - 1].

    Examples
    --------
    Three decoding slots with 3 drafts each, slot 2 opted out. Slot 0 has always been accepted, slot
    1 never; a verified token costs 30 us once the step holds more than 2 tokens. Slot 0 keeps its
    drafts, slot 1's do not pay, slot 2 drafts nothing; the first cut draft of each is kept as its
    probe:

    >>> import numpy as np, paddle
    >>> from fastdeploy_spec.ops import speculate_draft_length_policy
    >>> t = lambda v, d: paddle.to_tensor(np.array(v, d))
    >>> ewma = t([[65000] * 3, [2000] * 3, [65000] * 3], np.int32)
    >>> draft_len, probe, slt = t([3, 3, 0], np.int32), t([-1, -1, -1], np.int64), t([4, 4, 4], np.int32)
    >>> drafts = t([[7, 1, 2, 3], [7, 1, 2, 3], [7, 1, 2, 3]], np.int64)
    >>> table = t([5_000_000, 5_000_000] + [5_000_000 + 30_000 * i for i in range(1, 30)], np.int64)
    >>> speculate_draft_length_policy(t([4, 1, 1], np.int32), drafts, draft_len, probe, ewma,
    ...     t([False, False, True], bool), slt, t([0, 0, 0], np.int32), t([9, 9, 9], np.int32),
    ...     t([False] * 3, bool), table)
    >>> slt.numpy().tolist(), draft_len.numpy().tolist(), probe.numpy().tolist()
    ([4, 1, 1], [3, 0, 0], [-1, 1, 1])
    """
    _loader.load().speculate_draft_length_policy(*SPEC.args(locals()))
