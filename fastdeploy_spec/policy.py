"""Per-slot draft lengths from measured acceptance and a measured verification cost.

:class:`DraftLengthPolicy` owns the state of ``speculate_draft_length_policy`` (each slot's acceptance
estimates and last draft count, the opt-out flags, the cost table as a device tensor) and runs the
op after a proposer: attach it to a proposer (``proposer.draft_length_policy = policy``) and every
``proposer.run`` cuts each slot's drafts to the number that pays (docs/contract/policy.md). The cost
table is a JSON written by ``benchmarks/cost_table.py`` (the shipped one:
``fastdeploy_spec/data/cost_table_llama3_8b_h100.json``); a user supplies their own of the same keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Optional, Union

import numpy as np
import paddle

from fastdeploy_spec.buffers import copy_from_host
from fastdeploy_spec.ops import speculate_draft_length_policy

DEFAULT_COST_TABLE = Path(__file__).resolve().parent / "data" / "cost_table_llama3_8b_h100.json"
Q16 = 65536


def load_cost_table(source: Union[str, Path, dict, None] = None) -> dict:
    """A cost table: a dict with ``tokens`` (increasing token counts from 1), ``dense_us`` (the step
    time at each, us) and ``attn_us_per_seq`` (attention per decoding sequence, us), from a JSON path
    or as given; None: the shipped table."""
    if isinstance(source, dict):
        table = dict(source)
    else:
        table = json.loads(Path(source or DEFAULT_COST_TABLE).read_text())
    tokens, dense = table.get("tokens"), table.get("dense_us")
    if not tokens or not dense or len(tokens) != len(dense) or "attn_us_per_seq" not in table:
        raise ValueError(
            "a cost table needs 'tokens' and 'dense_us' of one length and 'attn_us_per_seq'"
        )
    if tokens[0] != 1 or any(b <= a for a, b in zip(tokens, tokens[1:])):
        raise ValueError("cost table 'tokens' must start at 1 and increase")
    table.setdefault("source", "user-supplied")
    return table


def table_ns(table: dict) -> np.ndarray:
    """The op's ``cost_table``: int64 ns for n = 1 .. the table's last token count (linear in between)."""
    n = np.arange(1, int(table["tokens"][-1]) + 1)
    return np.rint(np.interp(n, table["tokens"], table["dense_us"]) * 1000.0).astype(np.int64)


def _q16(name: str, v: float) -> int:
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {v}")
    return int(round(v * Q16))


class DraftLengthPolicy:
    """The draft-length policy of a runner's slots.

    Parameters
    ----------
    table : dict, path or None
        The cost table (:func:`load_cost_table`; None: the shipped Llama-3.1-8B / H100 table).
    max_drafts : int
        K, the most drafts per slot (the proposer's ``num_speculative_tokens``).
    alpha, prior : float
        Weight of a new observation and the acceptance estimate of a new request (each in [0, 1],
        held in Q16).
    step_cost_ns : int
        Time per step that drafting adds whatever the drafts (the proposer's ops), ns.

    Examples
    --------
    >>> import numpy as np
    >>> from fastdeploy_spec.buffers import copy_from_host, make_share_inputs
    >>> from fastdeploy_spec.config import SpeculativeConfig
    >>> from fastdeploy_spec.policy import DraftLengthPolicy
    >>> bufs = make_share_inputs(2, 16, SpeculativeConfig(num_speculative_tokens=3))
    >>> policy = DraftLengthPolicy(max_drafts=3)
    >>> policy.set_opt_out(1)                       # request in slot 1 asked for no speculation
    >>> copy_from_host(bufs["seq_lens_decoder"], np.array([7, 7], np.int32))
    >>> copy_from_host(bufs["stop_flags"], np.array([[False], [False]]))
    >>> copy_from_host(bufs["seq_lens_this_time"], np.array([4, 4], np.int32))  # 3 drafts each
    >>> policy.apply(bufs)
    >>> bufs["seq_lens_this_time"].numpy().tolist()   # slot 0 keeps its drafts, slot 1 verifies 1 token
    [4, 1]
    """

    def __init__(
        self,
        table: Union[str, Path, dict, None] = None,
        *,
        max_drafts: int,
        alpha: float = 0.125,
        prior: float = 0.5,
        step_cost_ns: int = 0,
    ) -> None:
        self.table = load_cost_table(table)
        self.max_drafts = int(max_drafts)
        self.alpha, self.prior = _q16("alpha", alpha), _q16("prior", prior)
        self.seq_cost_ns = int(round(float(self.table["attn_us_per_seq"]) * 1000.0))
        self.step_cost_ns = int(step_cost_ns)
        self.cost_table = paddle.to_tensor(table_ns(self.table))
        self.state: Optional[Dict[str, paddle.Tensor]] = None
        self._opt_out: Dict[int, bool] = {}

    def _allocate(self, slt: paddle.Tensor) -> None:
        S, K, place = slt.shape[0], self.max_drafts, slt.place
        self.state = dict(
            draft_len=paddle.to_tensor(np.zeros(S, np.int32), place=place),
            draft_probe=paddle.to_tensor(np.full(S, -1, np.int64), place=place),
            accept_ewma=paddle.to_tensor(np.full((S, K), self.prior, np.int32), place=place),
            draft_opt_out=paddle.to_tensor(np.zeros(S, bool), place=place),
        )
        if self.cost_table.place != place:
            self.cost_table = paddle.to_tensor(table_ns(self.table), place=place)
        if self._opt_out:
            self._write_opt_out()

    def _write_opt_out(self) -> None:
        flags = np.zeros(self.state["draft_opt_out"].shape[0], bool)
        for slot, flag in self._opt_out.items():
            flags[slot] = flag
        copy_from_host(self.state["draft_opt_out"], flags)

    def set_opt_out(self, slot: int, flag: bool = True) -> None:
        """The request in ``slot`` drafts nothing (``flag``) or drafts again (a host write, between steps)."""
        self._opt_out[int(slot)] = bool(flag)
        if self.state is not None:
            self._write_opt_out()

    def draft_step_caps(self) -> Optional[paddle.Tensor]:
        """What a drafter that pays per draft (MTP: a draft-model step each) reads before drafting:
        int32 [S] on the runner's place, last step's k per slot (``draft_len``; 0 for a new request
        and an opted-out one), None before the first :meth:`apply`. A slot that kept k drafts needs
        at most k + 1 this step: the k the policy chose and the one after them, which its probe
        learns from and which lets k grow one position per step (docs/contract/policy.md, MTP)."""
        return None if self.state is None else self.state["draft_len"]

    def apply(self, share_inputs: Dict[str, paddle.Tensor]) -> None:
        """Runs the op on the runner's buffers, after the proposer wrote its drafts."""
        s = share_inputs
        if self.state is None:
            self._allocate(s["seq_lens_this_time"])
        st = self.state
        speculate_draft_length_policy(
            s["accept_num"],
            s["draft_tokens"],
            st["draft_len"],
            st["draft_probe"],
            st["accept_ewma"],
            st["draft_opt_out"],
            s["seq_lens_this_time"],
            s["seq_lens_encoder"],
            s["seq_lens_decoder"],
            s["stop_flags"],
            self.cost_table,
            self.alpha,
            self.prior,
            self.seq_cost_ns,
            self.step_cost_ns,
        )
