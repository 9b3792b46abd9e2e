"""speculate_get_accept_tokens_and_logits and speculate_compute_cu_batch_offset against the NumPy
reference: exact equality (token ids, offsets, and the raw bits of the copied logits rows)."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from fastdeploy_spec.ops import (
    speculate_compute_cu_batch_offset,
)
from tests.helpers import LOGITS_DTYPES, PLACES, assert_bad_input, grid, on_gpu_only, to_place
from tests.reference.get_accept_tokens import (
    SENTINEL_OFFSET,
    SENTINEL_TOKEN,
    call,
    check,
    make_case,
    ref_cu_batch_offset,
)

BATCH_SIZES = [0, 1, 3, 17]
VOCABS = [1, 5, 8, 33]  # odd sizes force the narrow-vector paths; 8 allows 16-byte vectors
STRIDES = [1, 3, 6]  # K + 1
MIXES = ["decode", "prefill", "mixed"]


@grid(
    ("place", PLACES),
    ("dtype", LOGITS_DTYPES),
    ("mix", MIXES),
    ("stride", STRIDES),
    ("V", VOCABS),
    ("B", BATCH_SIZES),
)
def test_matches_reference(place, dtype, mix, stride, V, B):
    rng = np.random.default_rng([B, V, stride, len(mix)])
    check(make_case(rng, B, V, stride, mix, dtype), dtype, place)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
def test_exact_rows_upstream_layout(place, dtype):
    # Upstream's tests allocate exactly sum(accept_num) rows; nothing is padding.
    rng = np.random.default_rng(1)
    case = make_case(rng, 5, 16, 4, "mixed", dtype, accept_lo=1)
    n = int(np.minimum(case["accept_num"], 4).sum())
    case["token_ids"] = case["token_ids"][:n].copy()
    case["target_logits"] = case["target_logits"][:n].copy()
    ids, cu = check(case, dtype, place)
    assert cu[-1] == n and (ids != SENTINEL_TOKEN).all()


@pytest.mark.parametrize("place", PLACES)
def test_upstream_partial_decode_example(place):
    # Upstream's test_partial_decode: a prefill slot's single row, then two decoding slots.
    logits = np.repeat(np.arange(5, dtype=np.float32)[:, None], 8, axis=1)
    case = dict(
        token_ids=np.zeros(4, np.int64),
        target_logits=np.full((4, 8), -1, np.float32),
        logits=logits,
        cu=np.zeros(4, np.int32),
        cu_q=np.array([0, 1, 3, 5], np.int32),
        slt=np.array([10, 2, 2], np.int32),
        enc=np.array([10, 0, 0], np.int32),
        accept_num=np.array([1, 2, 1], np.int32),
        accept_tokens=np.array([[10, -1], [20, 21], [30, -1]], np.int64),
    )
    ids, cu = check(case, "float32", place)
    assert ids.tolist() == [10, 20, 21, 30] and cu.tolist() == [0, 1, 3, 4]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("mix", MIXES)
def test_accept_num_clamped(place, dtype, mix):
    # accept_num outside [0, K + 1]: clamped in the offsets and in the copies alike (a prefill slot
    # still copies its single row, but writes every accepted token).
    rng = np.random.default_rng(2)
    case = make_case(rng, 6, 8, 3, mix, dtype)
    case["accept_num"] = np.array([7, -2, 3, 100, 0, -100], np.int32)
    _, cu = check(case, dtype, place)
    assert cu.tolist() == [0, 3, 3, 6, 9, 9, 9]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("n_rows", [0, 1, 4])
def test_fewer_rows_than_accepted(place, dtype, n_rows):
    # N smaller than the accepted total: rows at or past N are dropped, nothing written outside.
    rng = np.random.default_rng(3)
    case = make_case(rng, 4, 8, 3, "decode", dtype, n_rows=n_rows, accept_lo=2)
    _, cu = check(case, dtype, place)
    assert cu[-1] > n_rows


@pytest.mark.parametrize("place", PLACES)
def test_source_rows_outside_logits_are_skipped(place):
    # cu_seqlens_q_output pointing past (or before) logits: token ids still written, rows not read.
    rng = np.random.default_rng(4)
    case = make_case(rng, 3, 8, 3, "decode", "float32", accept_lo=2)
    case["cu_q"] = np.array([-1, 1, 1000, 1001], np.int32)
    ids, _ = check(case, "float32", place)
    assert (ids != SENTINEL_TOKEN).sum() == int(np.minimum(case["accept_num"], 3).sum())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("B", [1024, 1025, 3000])
def test_large_batch_gpu(dtype, B):
    # Above 1024 slots the GPU runs the offset scan first (several scan chunks at 3000).
    rng = np.random.default_rng(B)
    check(make_case(rng, B, 40, 4, "mixed", dtype), dtype, "gpu")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LOGITS_DTYPES)
@pytest.mark.parametrize("V", [32000, 32001, 152064])
def test_real_vocabularies_gpu(dtype, V):
    # Several row chunks per block grid; 32001 forces narrow vectors on every dtype.
    rng = np.random.default_rng(V)
    check(make_case(rng, 9, V, 6, "mixed", dtype), dtype, "gpu")


# speculate_compute_cu_batch_offset


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("max_accept", [None, 0, 3])
@pytest.mark.parametrize("B", [0, 1, 7, 1023, 1024, 2500])
def test_cu_batch_offset(place, max_accept, B):
    rng = np.random.default_rng(B)
    accept = rng.integers(-3, 9, B + 2).astype(np.int32)  # longer than real_bsz: the tail is unread
    cu = np.full(B + 3, SENTINEL_OFFSET, np.int32)
    t_cu = to_place(cu, place)
    speculate_compute_cu_batch_offset(t_cu, to_place(accept, place), B, max_accept_num=max_accept)
    want = cu.copy()
    want[: B + 1] = ref_cu_batch_offset(accept[:B], max_accept)  # B = 0 too: cu[0] = 0
    np.testing.assert_array_equal(t_cu.numpy(), want)


# Bad inputs


def good_cpu_inputs():
    case = make_case(np.random.default_rng(0), 3, 8, 3, "decode", "float32")
    return dict(
        token_ids=to_place(case["token_ids"], "cpu"),
        target_logits=to_place(case["target_logits"], "cpu"),
        logits=to_place(case["logits"], "cpu"),
        cu=to_place(case["cu"], "cpu"),
        cu_q=to_place(case["cu_q"], "cpu"),
        slt=to_place(case["slt"], "cpu"),
        enc=to_place(case["enc"], "cpu"),
        accept_num=to_place(case["accept_num"], "cpu"),
        accept_tokens=to_place(case["accept_tokens"], "cpu"),
    )


BAD_INPUTS = [
    (
        "logits",
        lambda t: paddle.cast(t["logits"], "int32"),
        "logits must be float32, float16 or bfloat16",
    ),
    (
        "target_logits",
        lambda t: paddle.cast(t["target_logits"], "float16"),
        "target_logits must have the dtype of logits",
    ),
    (
        "target_logits",
        lambda t: to_place(t["target_logits"].numpy()[:, :4], "cpu"),
        r"target_logits must have shape \[N, V\]",
    ),
    ("token_ids", lambda t: paddle.cast(t["token_ids"], "int32"), "token_ids must be int64"),
    ("accept_num", lambda t: t["accept_num"][:2], r"accept_num must have shape \[3\]"),
    ("accept_tokens", lambda t: t["accept_tokens"][:2], "accept_tokens must have at least 3 rows"),
    ("cu", lambda t: t["cu"][:3], "cu_batch_token_offset must have at least B \\+ 1 = 4"),
    ("cu_q", lambda t: paddle.cast(t["cu_q"], "int64"), "cu_seqlens_q_output must be int32"),
    ("logits", lambda t: t["logits"].reshape([-1]), "logits must have rank 2"),
    on_gpu_only("accept_num", "accept_num is on GPU but token_ids is on CPU"),
]


@pytest.mark.parametrize("name, corrupt, message", BAD_INPUTS)
def test_bad_inputs(name, corrupt, message):
    assert_bad_input(call, good_cpu_inputs(), name, corrupt, message)


def test_cu_batch_offset_bad_inputs():
    cu = to_place(np.zeros(3, np.int32), "cpu")
    accept = to_place(np.ones(4, np.int32), "cpu")
    with pytest.raises(Exception, match=r"real_bsz \+ 1 = 4"):
        speculate_compute_cu_batch_offset(cu, accept, 3)
    with pytest.raises(Exception, match="accept_num must be int32"):
        speculate_compute_cu_batch_offset(cu, paddle.cast(accept, "int64"), 2)
    with pytest.raises(ValueError, match="max_accept_num must be >= 0"):
        speculate_compute_cu_batch_offset(cu, accept, 2, max_accept_num=-1)
