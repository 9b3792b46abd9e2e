"""Property test of ``speculate_draft_length_policy`` on CPU: small batches of any values drawn by
hypothesis, against the NumPy reference (tests/reference/draft_length_policy.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("hypothesis")  # a test-only dependency; the GPU machine may lack it

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.reference.draft_length_policy import ONE, check  # noqa: E402


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_property_matches_reference(data):
    """Any values (estimates, lengths, flags, tables, attributes in range) on CPU: the op equals the
    reference, writes k in 0 .. the slot's drafts, and never lets an opted-out slot draft."""
    B = data.draw(st.integers(0, 12))
    K = data.draw(st.integers(0, 6))
    i32 = st.integers(-(2**31), 2**31 - 1)
    arr = lambda elems, n: np.array(data.draw(st.lists(elems, min_size=n, max_size=n)))  # noqa: E731
    case = dict(
        accept_num=arr(st.integers(-3, K + 3), B).astype(np.int32),
        draft_tokens=arr(st.integers(-1, 2), B * (K + 1)).astype(np.int64).reshape(B, K + 1),
        draft_len=arr(st.integers(-3, K + 3), B).astype(np.int32),
        draft_probe=arr(st.integers(-2, 2), B).astype(np.int64),
        accept_ewma=arr(st.one_of(st.integers(0, ONE), i32), B * K).astype(np.int32).reshape(B, K),
        draft_opt_out=arr(st.booleans(), B).astype(bool),
        seq_lens_this_time=arr(st.integers(-2, K + 3), B).astype(np.int32),
        seq_lens_encoder=arr(st.sampled_from([0, 0, 0, 3, -1]), B).astype(np.int32),
        seq_lens_decoder=arr(st.sampled_from([0, 5, 5, 5]), B).astype(np.int32),
        stop_flags=arr(st.booleans(), B).astype(bool),
        cost_table=np.array(
            data.draw(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=8)), np.int64
        ),
        alpha=data.draw(st.integers(0, ONE)),
        prior=data.draw(st.integers(0, ONE)),
        seq_cost_ns=data.draw(st.integers(0, 2**32 - 1)),
        step_cost_ns=data.draw(st.integers(0, 2**32 - 1)),
    )
    got = check(case, "cpu")
    k = got["draft_len"]
    assert (k >= 0).all() and (k <= max(K, 0)).all()
    assert (k[case["draft_opt_out"]] == 0).all()
