"""Per-request acceptance statistics: the counters, their checks, and the runner's report."""

from __future__ import annotations

import pytest

from examples import OracleTarget
from fastdeploy_spec.config import SpeculativeConfig
from fastdeploy_spec.runner import Request, SpecRunner
from fastdeploy_spec.stats import Acceptance, AcceptanceStats


def test_counters_and_derived_figures():
    stats = AcceptanceStats(num_speculative_tokens=2)
    for rid, proposed, accepted in [("a", 2, 2), ("a", 2, 0), ("b", 1, 1), ("b", 0, 0)]:
        stats.record(rid, proposed, accepted)
    a, b, total = stats.per_request["a"], stats.per_request["b"], stats.overall
    assert (a.decode_steps, a.drafts_proposed, a.drafts_accepted, a.histogram) == (
        2,
        4,
        2,
        [1, 0, 1],
    )
    assert (b.acceptance_rate, b.mean_acceptance_length, b.histogram) == (1.0, 1.5, [1, 1, 0])
    assert (total.decode_steps, total.drafts_proposed, total.drafts_accepted) == (4, 5, 3)
    assert total.histogram == [2, 1, 1] and total.mean_acceptance_length == 1.75
    assert stats.to_dict()["per_request"]["a"]["acceptance_rate"] == 0.5
    assert Acceptance(3).acceptance_rate == 0.0 and Acceptance(3).mean_acceptance_length == 0.0


@pytest.mark.parametrize("proposed,accepted", [(2, 3), (4, 1), (1, -1)])
def test_impossible_counts_are_refused(proposed, accepted):
    with pytest.raises(ValueError, match="need 0 <= accepted"):
        AcceptanceStats(3).record("a", proposed, accepted)


def test_runner_reports_per_request_acceptance():
    cfg = SpeculativeConfig(method="ngram", num_speculative_tokens=3, max_ngram_size=2)
    answers = {"a": [1, 2, 3, 4, 1, 2, 3, 4, 1, 2], "b": [7, 7, 7, 7, 7, 7]}
    runner = SpecRunner(
        cfg,
        OracleTarget(answers, vocab_size=8, end_token=0),
        max_num_seqs=2,
        max_model_len=64,
        end_tokens=[0],
    )
    runner.run([Request("a", prompt=[5, 1, 2, 3, 4], max_dec_len=32), Request("b", [7, 7], 32)])
    acc, st = runner.acceptance, runner.stats
    assert set(acc.per_request) == {"a", "b"}
    total = acc.overall
    assert (total.decode_steps, total.drafts_proposed, total.drafts_accepted) == (
        st.decode_slot_steps,
        st.drafts_proposed,
        st.drafts_accepted,
    )
    assert sum(total.histogram) == st.decode_slot_steps
    # Each decoding step yields 1 + its accepted drafts; decoding yields the answer and the end token
    # but the answer's first token (the prefill step's).
    for rid, a in acc.per_request.items():
        assert a.drafts_accepted > 0, rid
        assert a.decode_steps + a.drafts_accepted == len(answers[rid]), rid
    assert "all" in acc.table().splitlines()[-1]
