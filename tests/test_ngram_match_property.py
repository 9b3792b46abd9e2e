"""Property test of ``ngram_match`` on CPU: small random batches drawn by hypothesis, any values
(negative or too long lengths, negative counts, -1 tokens), against the NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("hypothesis")  # a test-only dependency; the GPU machine may lack it

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.reference.ngram_match import THRESHOLD_ENV, check, sentinels  # noqa: E402


@pytest.fixture(autouse=True)
def _no_threshold_env(monkeypatch):
    monkeypatch.delenv(THRESHOLD_ENV, raising=False)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_property_cpu_matches_reference(data):
    B = data.draw(st.integers(0, 6), label="B")
    W = data.draw(st.integers(0, 16), label="W")
    k = data.draw(st.integers(0, 5), label="K")
    vocab = data.draw(st.integers(1, 3), label="vocab")
    rows = B + data.draw(st.integers(0, 2), label="extra rows")

    def per_slot(strategy, label):
        return data.draw(st.lists(strategy, min_size=B, max_size=B), label=label)

    tokens = data.draw(
        st.lists(st.integers(-1, vocab - 1), min_size=rows * W, max_size=rows * W), label="tokens"
    )
    d = {
        "token_ids_all": np.array(tokens, np.int64).reshape(rows, W),
        "prompt_lens": np.array(per_slot(st.integers(-2, W + 2), "P"), np.int64).reshape(B, 1),
        "step_idx": np.array(per_slot(st.integers(-2, W + 2), "s"), np.int64).reshape(B, 1),
        "draft_token_num": np.array(per_slot(st.integers(-1, k + 2), "draft_token_num"), np.int32),
        "draft_tokens": sentinels(B, k),
        "seq_lens_this_time": np.array(per_slot(st.integers(-3, 12), "slt"), np.int32),
        "seq_lens_encoder": np.array(per_slot(st.sampled_from([0, 0, 0, 3, -1]), "enc"), np.int32),
        "seq_lens_decoder": np.array(per_slot(st.sampled_from([0, 5, 5, 5, -1]), "dec"), np.int32),
        "max_dec_len": np.array(per_slot(st.integers(-1, 24), "max_dec_len"), np.int64).reshape(
            B, 1
        ),
    }
    n = data.draw(st.integers(1, 5), label="max_ngram_size")
    threshold = data.draw(st.one_of(st.none(), st.integers(0, 30)), label="threshold")
    pad_to_max = data.draw(st.booleans(), label="pad_to_max")
    max_draft_tokens = data.draw(st.integers(-1, k + 2), label="max_draft_tokens")
    check(d, "cpu", n, threshold, pad_to_max, max_draft_tokens)
