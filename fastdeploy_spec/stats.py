"""Per-request acceptance statistics of speculative decoding (what vLLM reports per request).

A runner calls :meth:`AcceptanceStats.record` once per decoding step of each request with the drafts
the request proposed and how many of them the target accepted. For each request and overall:

- ``drafts_proposed``, ``drafts_accepted``;
- ``acceptance_rate`` = accepted / proposed;
- ``mean_acceptance_length`` = 1 + accepted / decode steps: tokens a verification step yields on
  average (the target's own token plus the accepted drafts; 1.0 without speculation);
- ``histogram[n]``: decode steps that accepted exactly n drafts, n = 0 .. K.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Dict, Hashable, List


@dataclass
class Acceptance:
    """The counters of one request (or of all of them)."""

    num_speculative_tokens: int
    decode_steps: int = 0
    drafts_proposed: int = 0
    drafts_accepted: int = 0
    histogram: List[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.histogram:
            self.histogram = [0] * (self.num_speculative_tokens + 1)

    def add(self, proposed: int, accepted: int) -> None:
        if not 0 <= accepted <= proposed <= self.num_speculative_tokens:
            raise ValueError(
                f"need 0 <= accepted ({accepted}) <= proposed ({proposed}) <= K "
                f"({self.num_speculative_tokens})"
            )
        self.decode_steps += 1
        self.drafts_proposed += proposed
        self.drafts_accepted += accepted
        self.histogram[accepted] += 1

    def merge(self, other: Acceptance) -> None:
        self.decode_steps += other.decode_steps
        self.drafts_proposed += other.drafts_proposed
        self.drafts_accepted += other.drafts_accepted
        self.histogram = [a + b for a, b in zip(self.histogram, other.histogram)]

    @property
    def acceptance_rate(self) -> float:
        return self.drafts_accepted / self.drafts_proposed if self.drafts_proposed else 0.0

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + self.drafts_accepted / self.decode_steps if self.decode_steps else 0.0

    def to_dict(self) -> dict:
        # The fields as they are (a field added later is reported too), then the derived figures.
        return dict(
            asdict(self),
            acceptance_rate=self.acceptance_rate,
            mean_acceptance_length=self.mean_acceptance_length,
        )


class AcceptanceStats:
    """Acceptance counters per request and overall.

    Examples
    --------
    >>> from fastdeploy_spec.stats import AcceptanceStats
    >>> stats = AcceptanceStats(num_speculative_tokens=3)
    >>> for proposed, accepted in [(3, 3), (3, 1), (2, 0)]:
    ...     stats.record("a", proposed, accepted)
    >>> a = stats.per_request["a"]
    >>> a.drafts_accepted, round(a.acceptance_rate, 3), round(a.mean_acceptance_length, 3), a.histogram
    (4, 0.5, 2.333, [1, 1, 0, 1])
    >>> print(stats.table())
    request    steps  proposed  accepted   rate  mean len  accepted drafts per step (0..3)
    a              3         8         4  50.0%      2.33  1 1 0 1
    all            3         8         4  50.0%      2.33  1 1 0 1
    """

    def __init__(self, num_speculative_tokens: int) -> None:
        self.num_speculative_tokens = int(num_speculative_tokens)
        self.per_request: Dict[Hashable, Acceptance] = {}

    def record(self, request_id: Hashable, proposed: int, accepted: int) -> None:
        """One decoding step of ``request_id``: ``proposed`` drafts, ``accepted`` of them accepted."""
        entry = self.per_request.get(request_id)
        if entry is None:
            entry = self.per_request[request_id] = Acceptance(self.num_speculative_tokens)
        entry.add(int(proposed), int(accepted))

    def add_step(self, record) -> None:
        """The decoding slots of one runner step (a ``fastdeploy_spec.runner.StepRecord``)."""
        for b in record.slots():
            if not record.is_prefill[b]:
                self.record(
                    record.request_ids[b],
                    int(record.num_tokens[b]) - 1,
                    max(int(record.accept_num[b]) - 1, 0),
                )

    @property
    def overall(self) -> Acceptance:
        total = Acceptance(self.num_speculative_tokens)
        for entry in self.per_request.values():
            total.merge(entry)
        return total

    def to_dict(self) -> dict:
        return dict(
            overall=self.overall.to_dict(),
            per_request={str(k): v.to_dict() for k, v in self.per_request.items()},
        )

    def table(self) -> str:
        """A text table: one row per request, then the overall row."""
        K = self.num_speculative_tokens
        lines = [
            f"{'request':<9} {'steps':>6} {'proposed':>9} {'accepted':>9} {'rate':>6} {'mean len':>9}"
            f"  accepted drafts per step (0..{K})"
        ]
        rows = list(self.per_request.items()) + [("all", self.overall)]
        for rid, a in rows:
            lines.append(
                f"{str(rid):<9} {a.decode_steps:>6} {a.drafts_proposed:>9} {a.drafts_accepted:>9} "
                f"{100 * a.acceptance_rate:>5.1f}% {a.mean_acceptance_length:>9.2f}  "
                + " ".join(str(n) for n in a.histogram)
            )
        return "\n".join(lines)
