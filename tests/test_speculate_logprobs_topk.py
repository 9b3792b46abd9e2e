"""speculate_logprobs_topk against the float64 NumPy reference: ids and ranks exactly, scores within
the tolerance below."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from fastdeploy_spec.ops import speculate_logprobs_topk
from tests.helpers import (
    FLOAT32_MIN,
    LOGITS_DTYPES,
    PLACES,
    assert_bad_input,
    grid,
    make_logits,
    on_gpu_only,
    to_place,
)
from tests.reference.logprobs_topk import SCORE_TOL, check, make_case, run_op

VOCABS = [1, 7, 64, 1000]
TOP_KS = [0, 1, 5, 20]
BATCH_SIZES = [0, 1, 4, 9]


@grid(("place", PLACES), ("dtype", LOGITS_DTYPES), ("k", TOP_KS), ("V", VOCABS), ("B", BATCH_SIZES))
def test_matches_reference(place, dtype, k, V, B):
    rng = np.random.default_rng([B, V, k])
    check(make_case(rng, B, V, dtype), dtype, place, k)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("raw_logits", [False, True])
def test_temperature_per_slot(place, dtype, raw_logits):
    # Slots with temperature 0 are left unscaled; the others divide their rows' logits.
    rng = np.random.default_rng(5)
    check(
        make_case(rng, 8, 300, dtype, temperature=True, accept=[3, 0, 2, 1, 3, 3, 0, 2]),
        dtype,
        place,
        20,
        raw_logits,
    )


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("V", [40, 2048, 5000])
def test_topk_ties_lower_id_first(place, dtype, V):
    rng = np.random.default_rng(V)
    case = make_case(rng, 4, V, dtype, tie_range=3, accept=[3, 3, 3, 3])
    ids, scores, ranks = check(case, dtype, place, 20)
    same = np.diff(scores[:, 1:], axis=1) == 0
    assert (
        same.sum() > 0 and (np.diff(ids[:, 1:], axis=1)[same] > 0).all()
    )  # equal scores: ids ascend
    assert (np.diff(scores[:, 1:], axis=1) <= 0).all() and (ranks >= 1).all()


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("V, tie_range", [(20000, 1000), (152064, 7000)])
def test_ties_spread_over_the_row(place, V, tie_range):
    # About 20 entries share each value, spread over the whole row: the GPU splits a long row over
    # several blocks, so the top-20 and its ties come from different blocks and must merge in id order.
    rng = np.random.default_rng(V)
    ids, _, _ = check(
        make_case(rng, 2, V, "float32", tie_range=tie_range, accept=[3, 2]), "float32", place, 20
    )
    assert (np.ptp(ids[:5, 1:], axis=1) > V // 2).all()  # the winners do span the row


@pytest.mark.parametrize("place", PLACES)
def test_raw_logits_scores_are_the_logits(place):
    case = make_case(np.random.default_rng(6), 2, 50, "float32", accept=[2, 1])
    ids, scores, _ = check(case, "float32", place, 4, raw_logits=True)
    x = case["logits"]
    rows = np.arange(3)[:, None]
    np.testing.assert_array_equal(scores[:3], x[rows, ids[:3]])


@pytest.mark.parametrize("place", PLACES)
def test_padding_rows_and_bad_tokens(place):
    # cu[B] = 3 of N = 6: rows 3.. are padding. Row 1's token is outside the vocabulary.
    case = make_case(np.random.default_rng(7), 2, 16, "float32", accept=[2, 1])
    case["tokens"][1] = 16
    case["tokens"][2] = -1
    ids, scores, ranks = check(case, "float32", place, 3)
    assert (ids[3:] == -1).all() and (scores[3:] == 0).all() and (ranks[3:] == 0).all()
    assert ids[1, 0] == 16 and scores[1, 0] == 0 and ranks[1] == 0 and (ids[1, 1:] >= 0).all()


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("cu_end", [-4, 0, 100])
def test_offsets_out_of_range(place, cu_end):
    # cu[B] is clamped to [0, N]: negative means no valid row, past N means every row.
    case = make_case(np.random.default_rng(8), 2, 16, "float32", accept=[1, 1])
    case["cu"][-1] = cu_end
    ids, _, _ = check(case, "float32", place, 2)
    assert (ids[:, 0] == -1).all() == (cu_end <= 0)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
def test_masked_logits_clip_to_float32_min(place, dtype):
    # -inf logits (masked tokens) give clipped scores, ranks count them only for a -inf token.
    case = make_case(np.random.default_rng(9), 1, 32, "float32", accept=[3])
    values = case["logits"]
    values[:, 5:] = -np.inf
    case["logits"] = make_logits(values, dtype) if dtype != "bfloat16" else _bf16_with_inf(values)
    case["tokens"][:] = [1, 30, 4]
    ids, scores, ranks = check(case, dtype, place, 8)
    assert (scores[:, 6:] == FLOAT32_MIN).all() and scores[1, 0] == FLOAT32_MIN and ranks[1] == 32


def _bf16_with_inf(values):
    from tests.helpers import bf16_bits

    bits = bf16_bits(np.where(np.isinf(values), 0, values))
    return np.where(np.isinf(values), np.uint16(0xFF80), bits).astype(np.uint16)


@pytest.mark.parametrize("place", PLACES)
def test_k_larger_than_vocab(place):
    case = make_case(np.random.default_rng(10), 1, 3, "float32", accept=[2])
    ids, scores, _ = check(case, "float32", place, 5)
    assert (ids[:2, 4:] == -1).all() and (scores[:2, 4:] == 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("V", [32000, 32003, 152064])
def test_real_vocabularies_gpu(dtype, V):
    rng = np.random.default_rng(V)
    check(make_case(rng, 3, V, dtype, temperature=True, accept=[3, 2, 3]), dtype, "gpu", 20)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
def test_cpu_and_gpu_agree(dtype):
    # Ids and ranks bit-identical across places; scores within the tolerance of each other.
    case = make_case(np.random.default_rng(11), 5, 4096, dtype, temperature=True)
    cpu, gpu = run_op(case, dtype, "cpu", 20), run_op(case, dtype, "gpu", 20)
    np.testing.assert_array_equal(cpu[0], gpu[0])
    np.testing.assert_array_equal(cpu[2], gpu[2])
    np.testing.assert_allclose(
        cpu[1], gpu[1], atol=2 * SCORE_TOL[dtype][0], rtol=2 * SCORE_TOL[dtype][1]
    )


# Bad inputs


def good_cpu_inputs(k=3):
    case = make_case(np.random.default_rng(0), 2, 16, "float32", accept=[2, 1])
    N = case["tokens"].shape[0]
    return dict(
        logits=to_place(case["logits"], "cpu"),
        tokens=to_place(case["tokens"], "cpu"),
        cu=to_place(case["cu"], "cpu"),
        ids=to_place(np.zeros((N, k + 1), np.int64), "cpu"),
        scores=to_place(np.zeros((N, k + 1), np.float32), "cpu"),
        ranks=to_place(np.zeros(N, np.int64), "cpu"),
        temperature=None,
    )


def call(t):
    speculate_logprobs_topk(
        t["logits"],
        t["tokens"],
        t["cu"],
        t["ids"],
        t["scores"],
        t["ranks"],
        temperature=t["temperature"],
    )


BAD_INPUTS = [
    (
        "logits",
        lambda t: paddle.cast(t["logits"], "float64"),
        "target_logits must be float32, float16 or bfloat16",
    ),
    ("tokens", lambda t: t["tokens"][:4], r"token_ids must have shape \[6\]"),
    ("cu", lambda t: paddle.cast(t["cu"], "int64"), "cu_batch_token_offset must be int32"),
    ("ids", lambda t: to_place(np.zeros((6, 22), np.int64), "cpu"), "k <= 20"),
    (
        "scores",
        lambda t: to_place(np.zeros((6, 3), np.float32), "cpu"),
        "logprob_scores must have the shape",
    ),
    ("scores", lambda t: paddle.cast(t["scores"], "float64"), "logprob_scores must be float32"),
    ("ranks", lambda t: t["ranks"][:5], r"logprob_ranks must have shape \[6\]"),
    (
        "temperature",
        lambda t: to_place(np.ones(3, np.float32), "cpu"),
        r"temperature must have shape \[2\]",
    ),
    (
        "temperature",
        lambda t: to_place(np.ones(2, np.float64), "cpu"),
        "temperature must be float32",
    ),
    on_gpu_only("ranks", "logprob_ranks is on GPU but target_logits is on CPU"),
]


@pytest.mark.parametrize("name, corrupt, message", BAD_INPUTS)
def test_bad_inputs(name, corrupt, message):
    assert_bad_input(call, good_cpu_inputs(), name, corrupt, message)
