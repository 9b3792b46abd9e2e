"""speculate_draft_length_policy against its NumPy reference (tests/reference/draft_length_policy.py), on
every place: random cases, random histories, the opt-out, named edge cases, the optimum (brute force,
hypothesis: tests/test_speculate_draft_length_policy_property.py) and bad inputs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fastdeploy_spec.ops import speculate_draft_length_policy
from tests.helpers import PLACES, assert_mixed_places_rejected, grid, to_place
from tests.reference.draft_length_policy import (
    ATTRS,
    MUTATED,
    ONE,
    ORDER,
    _cost,
    check,
    expected,
    gains_of,
    random_case,
    run,
)

# 256 / 257: the kernel's two block sizes (256 and 512 threads); 1100 > 512: a thread owns three slots
BATCHES = [0, 1, 3, 7, 33, 130, 256, 257, 1100]
DRAFT_COUNTS = [0, 1, 5, 8]
SEEDS = [0, 1, 2]


@grid(("place", PLACES), ("seed", SEEDS), ("K", DRAFT_COUNTS), ("B", BATCHES))
def test_matches_reference(B, K, seed, place):
    check(random_case(np.random.default_rng([B, K, seed]), B, K), place)


def next_step(rng, case, got):
    """The next step of a history: the op's outputs as state, new drafts, the acceptance of the kept ones."""
    case = dict(case, **got)
    B = len(case["seq_lens_this_time"])
    K = case["accept_ewma"].shape[1]
    kept = np.maximum(case["draft_len"], 0)
    case["accept_num"] = (1 + (rng.random(B) * (kept + 1)).astype(np.int64)).astype(np.int32)
    enc = case["seq_lens_encoder"].copy()
    dec = case["seq_lens_decoder"].copy()
    decodes = (enc > 0) & (rng.random(B) < 0.5)  # a prefill finishes: the slot decodes next
    dec[decodes], enc[decodes] = enc[decodes], 0
    case["seq_lens_encoder"], case["seq_lens_decoder"] = enc, dec
    case["seq_lens_this_time"] = np.where(enc > 0, enc, 1 + rng.integers(0, K + 2, B)).astype(
        np.int32
    )
    case["draft_tokens"] = rng.integers(0, 3, (B, K + 1)).astype(np.int64)
    return case


@grid(("place", PLACES), ("seed", SEEDS), ("B", [1, 7, 130, 600]))
def test_random_histories(B, seed, place):
    """Ten steps, each learning from the previous one's kept drafts, against the reference."""
    rng = np.random.default_rng([B, seed, 7])
    case = random_case(rng, B, 5)
    for _ in range(10):
        got = check(case, place)
        case = next_step(rng, case, {k: got[k].reshape(case[k].shape) for k in MUTATED})


def decoding(B, K, *, ewma=ONE - 500, table=None, **changes):
    """B decoding slots, each with K drafts proposed and all of last step's K drafts accepted."""
    case = dict(
        accept_num=np.full(B, K + 1, np.int32),
        draft_tokens=np.tile(np.arange(K + 1, dtype=np.int64), (B, 1)),
        draft_len=np.full(B, K, np.int32),
        draft_probe=np.full(B, -1, np.int64),
        accept_ewma=np.full((B, K), ewma, np.int32),
        draft_opt_out=np.zeros(B, bool),
        seq_lens_this_time=np.full(B, K + 1, np.int32),
        seq_lens_encoder=np.zeros(B, np.int32),
        seq_lens_decoder=np.full(B, 100, np.int32),
        stop_flags=np.zeros((B, 1), bool),
        cost_table=np.array(
            [5_000_000 + 1_000 * i for i in range(64)] if table is None else table, np.int64
        ),
        alpha=16384,
        prior=39322,
        seq_cost_ns=40_000,
        step_cost_ns=20_000,
    )
    case.update(changes)
    return case


@pytest.mark.parametrize("place", PLACES)
def test_opted_out_request_never_drafts(place):
    """A flagged request gets k = 0 at every step, while its neighbours, always accepted, keep drafting."""
    B, K = 6, 4
    case = decoding(B, K, draft_opt_out=np.array([False, False, True, False, False, False]))
    for _ in range(12):
        got = check(case, place)
        assert got["draft_len"].tolist() == [K, K, 0, K, K, K]
        assert got["seq_lens_this_time"].tolist() == [K + 1, K + 1, 1, K + 1, K + 1, K + 1]
        # verification accepted every kept draft; the proposer drafts K again
        case = dict(
            case,
            draft_len=got["draft_len"],
            accept_ewma=got["accept_ewma"],
            draft_probe=got["draft_probe"],
            accept_num=(got["draft_len"] + 1).astype(np.int32),
            seq_lens_this_time=np.full(B, K + 1, np.int32),
        )


def one(**changes):
    return decoding(1, 3, **changes)


def learned(case):
    return expected(case)["accept_ewma"][0].tolist()


@pytest.mark.parametrize("place", PLACES)
def test_learning_rule(place):
    """Of 3 verified drafts, 1 accepted: position 1 moves toward 1, position 2 toward 0, position 3 (not
    seen) keeps its estimate; all floored Q16."""
    case = one(
        accept_ewma=np.array([[40000, 40000, 40000]], np.int32), accept_num=np.array([2], np.int32)
    )
    got = run(case, place)["accept_ewma"][0].tolist()
    a = 16384
    assert got == [(40000 * (ONE - a) + ONE * a) >> 16, (40000 * (ONE - a)) >> 16, 40000]
    assert got == learned(case)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("probe, bonus, want", [(5, 5, "up"), (5, 6, "down"), (-1, 5, "kept")])
def test_probe_learns_the_first_cut_position(probe, bonus, want, place):
    """1 draft verified and accepted: position 2, cut last step, is learned from the probe (the cut
    draft) against the bonus token (draft_tokens[b, 0]); no probe, no observation."""
    drafts = np.array([[bonus, 1, 2, 3]], np.int64)
    case = one(
        accept_ewma=np.array([[40000, 40000, 40000]], np.int32),
        accept_num=np.array([2], np.int32),
        draft_len=np.array([1], np.int32),
        draft_probe=np.array([probe], np.int64),
        draft_tokens=drafts,
    )
    second = run(case, place)["accept_ewma"][0][1]
    assert (
        second
        == {
            "up": (40000 * (ONE - 16384) + ONE * 16384) >> 16,
            "down": (40000 * (ONE - 16384)) >> 16,
            "kept": 40000,
        }[want]
    )


@pytest.mark.parametrize("place", PLACES)
def test_probe_is_the_first_cut_draft(place):
    """A slot cut to k keeps its draft at position k + 1 as the next step's probe; a slot that keeps
    all its drafts, or a prefill, has none (-1)."""
    case = decoding(
        3,
        4,
        table=[1_000_000 * (i + 1) for i in range(64)],
        ewma=30000,
        accept_num=np.ones(3, np.int32),
        seq_lens_encoder=np.array([0, 0, 7], np.int32),
        draft_tokens=np.array([[9, 11, 12, 13, 14]] * 3, np.int64),
    )
    got = check(case, place)
    assert got["draft_len"].tolist() == [0, 0, 0]
    assert got["draft_probe"].tolist() == [11, 11, -1]
    kept = check(decoding(2, 3), place)
    assert kept["draft_probe"].tolist() == [-1, -1]


# name -> (case, expected seq_lens_this_time, expected draft_len)
EDGE_CASES = {
    # verified tokens nearly free, drafts always accepted: keep them all
    "drafts_that_pay_are_kept": (decoding(3, 4), [5, 5, 5], [4, 4, 4]),
    # a verified token costs as much as a whole step: no draft pays
    "drafts_that_do_not_pay_are_cut": (
        decoding(
            3,
            4,
            table=[1_000_000 * (i + 1) for i in range(64)],
            ewma=30000,
            accept_num=np.ones(3, np.int32),
        ),
        [1, 1, 1],
        [0, 0, 0],
    ),
    # equal slots and room for some of their drafts only: the cut takes the first slots first
    "ties_go_to_the_lower_slots": (
        decoding(
            4,
            1,
            ewma=32768,
            accept_num=np.ones(4, np.int32),
            draft_len=np.zeros(4, np.int32),
            table=[1_000_000, 1_000_000, 1_000_000, 1_000_000, 1_000_000, 1_000_000, 9_000_000],
            seq_cost_ns=0,
            step_cost_ns=0,
        ),
        [2, 2, 1, 1],
        [1, 1, 0, 0],
    ),
    # a prefill (new request) keeps its chunk and verifies no draft; an empty slot and an unscheduled
    # one are left alone (draft_len 0)
    "prefill_empty_unscheduled": (
        decoding(
            3,
            2,
            seq_lens_encoder=np.array([9, 0, 0], np.int32),
            seq_lens_decoder=np.array([0, 0, 100], np.int32),
            seq_lens_this_time=np.array([9, 3, 0], np.int32),
        ),
        [9, 3, 0],
        [0, 0, 0],
    ),
    "stopped_slot_idle": (decoding(2, 2, stop_flags=np.array([[True], [False]])), [3, 3], [0, 2]),
    # the proposer found fewer drafts than K: k never exceeds them
    "fewer_drafts_than_K": (
        decoding(2, 4, seq_lens_this_time=np.array([2, 1], np.int32)),
        [2, 1],
        [1, 0],
    ),
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", list(EDGE_CASES))
def test_edge_cases(name, place):
    case, slt, k = EDGE_CASES[name]
    got = check(case, place)
    assert got["seq_lens_this_time"].tolist() == slt
    assert got["draft_len"].tolist() == k


@pytest.mark.parametrize("place", PLACES)
def test_new_request_starts_from_the_batch_mean(place):
    """A prefill slot's estimates become the decoding slots' mean (after their learning), the prior when
    no slot decodes."""
    ewma = np.array([[0, 0, 0], [40000, 20000, 10000], [50000, 30000, 5000]], np.int32)
    case = decoding(
        3,
        3,
        accept_ewma=ewma,
        draft_len=np.zeros(3, np.int32),
        accept_num=np.ones(3, np.int32),
        seq_lens_encoder=np.array([5, 0, 0], np.int32),
        seq_lens_this_time=np.array([5, 4, 4], np.int32),
    )
    got = check(case, place)
    assert got["accept_ewma"][0].tolist() == [45000, 25000, 7500]
    alone = decoding(
        1, 3, seq_lens_encoder=np.array([5], np.int32), seq_lens_this_time=np.array([5], np.int32)
    )
    assert check(alone, place)["accept_ewma"][0].tolist() == [39322] * 3


@pytest.mark.parametrize("place", PLACES)
def test_empty_batch_is_a_no_op(place):
    got = run(random_case(np.random.default_rng(0), 0, 3), place)
    assert got["accept_ewma"].shape == (0, 3)


@pytest.mark.parametrize("place", PLACES)
def test_more_state_rows_than_slots(place):
    """accept_ewma of S > B rows (a runner's buffer): rows >= B are not touched."""
    case = random_case(np.random.default_rng(5), 6, 3)
    case["accept_ewma"] = np.concatenate([case["accept_ewma"], np.full((2, 3), 77, np.int32)])
    got = check(case, place)
    assert got["accept_ewma"][6:].tolist() == [[77] * 3] * 2


def objective(case, ks):
    """The contract's objective of a choice of per-slot k (integers, as the op computes it)."""
    want = expected(dict(case, seq_lens_this_time=case["seq_lens_this_time"].copy()))
    ewma = want["accept_ewma"]
    slt, enc = case["seq_lens_this_time"], case["seq_lens_encoder"]
    scheduled = len(slt)
    gain = sum(sum(gains_of(ewma[b], k)) for b, k in enumerate(ks))
    base = int(sum(int(slt[b]) if enc[b] > 0 else 1 for b in range(scheduled)))
    D = max(
        _cost(case["cost_table"], base + sum(ks))
        + scheduled * case["seq_cost_ns"]
        + case["step_cost_ns"],
        1,
    )
    return ((1024 * scheduled + gain) << 20) // D


def test_choice_is_the_optimum():
    """On small decoding batches the op's k beat (or tie) every other choice of per-slot k."""
    rng = np.random.default_rng(11)
    for _ in range(60):
        B, K = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        case = decoding(
            B,
            K,
            ewma=0,
            accept_ewma=rng.integers(0, ONE + 1, (B, K)).astype(np.int32),
            accept_num=rng.integers(1, K + 2, B).astype(np.int32),
            seq_lens_this_time=(1 + rng.integers(0, K + 1, B)).astype(np.int32),
            table=np.cumsum(rng.integers(0, 3_000_000, 12)) + 1_000_000,
            seq_cost_ns=int(rng.integers(0, 100_000)),
        )
        got = run(case, "cpu")["draft_len"].tolist()
        best = objective(case, got)
        avail = [int(s) - 1 for s in case["seq_lens_this_time"]]
        for ks in itertools.product(*(range(a + 1) for a in avail)):
            assert objective(case, list(ks)) <= best, (ks, got)


def bad(**changes):
    case = random_case(np.random.default_rng(1), 3, 2)
    case.update(changes)
    return case


BAD_INPUTS = {
    "accept_ewma must be int32": bad(accept_ewma=np.zeros((3, 2), np.int64)),
    "cost_table must be int64": bad(cost_table=np.zeros(4, np.int32)),
    "draft_opt_out must be bool": bad(draft_opt_out=np.zeros(3, np.int32)),
    r"draft_len must have shape \[3\] or \[3, 1\]": bad(draft_len=np.zeros(4, np.int32)),
    "accept_ewma must have at least 3 rows": bad(accept_ewma=np.zeros((2, 2), np.int32)),
    "cost_table must have rank 1": bad(cost_table=np.zeros((2, 2), np.int64)),
    "cost_table must have at least one entry": bad(cost_table=np.zeros(0, np.int64)),
    "accept_ewma has 65 columns": bad(
        accept_ewma=np.zeros((3, 65), np.int32), draft_tokens=np.zeros((3, 66), np.int64)
    ),
    "draft_tokens must have K \\+ 1 = 3 columns": bad(draft_tokens=np.zeros((3, 4), np.int64)),
    "draft_probe must be int64": bad(draft_probe=np.zeros(3, np.int32)),
    r"alpha must be <= 65536": bad(alpha=65537),
    r"prior must be >= 0": bad(prior=-1),
    r"seq_cost_ns must be <= 4294967295": bad(seq_cost_ns=2**32),
}


@pytest.mark.parametrize("match", list(BAD_INPUTS))
def test_bad_inputs(match):
    with pytest.raises(
        (OSError, RuntimeError, ValueError), match=f"speculate_draft_length_policy: {match}"
    ):
        run(BAD_INPUTS[match], "cpu")


@pytest.mark.gpu
def test_mixed_places_rejected():
    case = random_case(np.random.default_rng(2), 3, 2)

    def op(*tensors):
        speculate_draft_length_policy(*tensors, *(case[k] for k in ATTRS))

    assert_mixed_places_rejected(op, ORDER, {k: case[k] for k in ORDER}, "cost_table")


def test_order_is_the_wrappers():
    t = {
        k: to_place(v, "cpu")
        for k, v in random_case(np.random.default_rng(3), 2, 2).items()
        if k in ORDER
    }
    speculate_draft_length_policy(**t)  # keyword call with the default attributes


class TokensPerSlot:
    """A runner observer: the tokens each slot verified at each decode step."""

    def __init__(self):
        self.steps = []

    def on_step(self, runner, record):
        self.steps.append([(int(n), bool(p)) for n, p in zip(record.num_tokens, record.is_prefill)])

    def on_logprob_message(self, runner, message, record):
        pass


@pytest.mark.parametrize("place", PLACES)
def test_runner_with_the_policy(place):
    """An n-gram runner with the policy attached (Proposer.run's hook): the output of plain decoding,
    drafts accepted on a copy task, and the request in an opted-out slot verifies one token at every
    step while the others draft."""
    from fastdeploy_spec.config import SpeculativeConfig
    from fastdeploy_spec.policy import DraftLengthPolicy
    from fastdeploy_spec.runner import Request
    from tests.test_runner import EOS, copy_task, oracle_runner

    prompts, answers = copy_task(4)
    cfg = SpeculativeConfig(method="ngram", num_speculative_tokens=4, max_ngram_size=3)
    runner = oracle_runner(cfg, answers, 50, 4, 128, place)
    policy = DraftLengthPolicy(max_drafts=4)
    policy.set_opt_out(2)
    runner.proposer.draft_length_policy = policy
    seen = TokensPerSlot()
    runner.observers.append(seen)
    out = runner.run([Request(rid, p, 100) for rid, p in prompts.items()])
    assert out == {rid: a + [EOS] for rid, a in answers.items()}
    decode = [step for step in seen.steps if not any(p for _, p in step)]
    assert all(step[2][0] <= 1 for step in decode)
    assert any(step[0][0] > 1 for step in decode)
    assert runner.stats.drafts_accepted > 0


def test_mtp_draft_step_caps():
    """The MTP hook: no caps without a policy, under pad_to_max, or before the policy's first step;
    after it, last step's k per slot (the opted-out slot 0), on the runner's place."""
    from fastdeploy_spec.buffers import copy_from_host, make_share_inputs
    from fastdeploy_spec.config import SpeculativeConfig
    from fastdeploy_spec.policy import DraftLengthPolicy
    from fastdeploy_spec.proposers.mtp import MTPProposer

    def plus_one(input_ids, hidden):  # never called: the hook is read before drafting
        raise AssertionError("the draft model ran")

    cfg = SpeculativeConfig(method="mtp", num_speculative_tokens=3, num_model_steps=3)
    mtp = MTPProposer(cfg, plus_one, max_num_seqs=2, max_model_len=16)
    assert mtp._draft_step_caps() is None
    policy = DraftLengthPolicy(max_drafts=3)
    policy.set_opt_out(0)
    mtp.draft_length_policy = policy
    assert mtp._draft_step_caps() is None  # nothing decided yet
    bufs = make_share_inputs(2, 16, cfg)
    copy_from_host(bufs["seq_lens_decoder"], np.array([7, 7], np.int32))
    copy_from_host(bufs["stop_flags"], np.array([[False], [False]]))
    copy_from_host(bufs["seq_lens_this_time"], np.array([4, 4], np.int32))
    policy.apply(bufs)
    assert mtp._draft_step_caps().numpy().tolist() == [0, 3]
    mtp.pad_to_max = True
    assert mtp._draft_step_caps() is None
