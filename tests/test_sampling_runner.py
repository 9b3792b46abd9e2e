"""Sampled requests through the runner: with TARGET_MATCH a seeded request's output is the same token for
token with and without speculation (naive, ngram, suffix, MTP), in any order and batch size; drafts
are accepted; TOPP and GREEDY run; unseeded requests get seeds from the runner's generator."""

from __future__ import annotations

import numpy as np
import pytest

from examples import SampledOracle
from examples.sampled_runs import METHODS, run_sampled, synthetic_texts
from fastdeploy_spec.config import SpeculativeConfig
from fastdeploy_spec.runner import Request, SpecRunner
from tests.helpers import PLACES

V, N_REQ = 40, 16
TEXTS = synthetic_texts(N_REQ, V, seed=5)
SEEDS = [1000 + 17 * i for i in range(N_REQ)]


@pytest.fixture(scope="module")
def plain():
    return run_sampled("naive", TEXTS, SEEDS, vocab_size=V, max_dec_len=30)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("method", METHODS)
def test_seeded_outputs_do_not_depend_on_speculation(method, place, plain):
    runners = []
    out = run_sampled(
        method, TEXTS, SEEDS, vocab_size=V, max_dec_len=30, place=place, runner_out=runners
    )
    assert out == plain
    # Another order and another batch size.
    rev = run_sampled(
        method,
        TEXTS,
        SEEDS,
        vocab_size=V,
        max_dec_len=30,
        order=range(N_REQ - 1, -1, -1),
        slots=3,
        k=2,
        place=place,
    )
    assert rev == plain
    if method != "naive":
        assert runners[0].stats.drafts_accepted > 0
    # Sampling happened: the outputs leave the text somewhere, and not every request is the same.
    assert any(plain[i] != list(TEXTS[i][1][: len(plain[i])]) for i in range(N_REQ))


def test_per_request_parameters_and_acceptance_stats():
    texts = TEXTS[:4]
    runners = []
    run_sampled("ngram", texts, SEEDS, vocab_size=V, max_dec_len=20, runner_out=runners)
    acc = runners[0].acceptance
    assert set(acc.per_request) == set(range(4))
    assert acc.overall.drafts_accepted == runners[0].stats.drafts_accepted > 0


def test_greedy_requests_unchanged_and_topp_runs():
    greedy = run_sampled("naive", TEXTS[:6], SEEDS, vocab_size=V, max_dec_len=20, temperature=0.0)
    # Temperature 0: the oracle's successor chain (its argmax).
    oracle = SampledOracle({i: p + a for i, (p, a) in enumerate(TEXTS[:6])}, V, 0)
    for i, toks in greedy.items():
        ctx = list(TEXTS[i][0])
        for tok in toks[:-1]:
            assert tok == oracle.successor(i, ctx)
            ctx.append(tok)
    for strategy in ("greedy", "topp", "target_match"):
        out = run_sampled(
            "ngram",
            TEXTS[:6],
            SEEDS,
            vocab_size=V,
            max_dec_len=20,
            temperature=0.0,
            verify_strategy=strategy,
        )
        assert out == greedy
    topp = run_sampled(
        "ngram", TEXTS[:6], SEEDS, vocab_size=V, max_dec_len=20, verify_strategy="topp"
    )
    assert all(len(v) > 0 for v in topp.values())


def test_unseeded_requests_take_seeds_from_the_runner():
    def run(seed):
        oracle = SampledOracle({i: p + a for i, (p, a) in enumerate(TEXTS[:4])}, V, 0)
        runner = SpecRunner(
            SpeculativeConfig(method="ngram", num_speculative_tokens=2),
            oracle,
            max_num_seqs=4,
            max_model_len=80,
            end_tokens=[0],
            seed=seed,
        )
        out = runner.run([Request(i, TEXTS[i][0], 15, temperature=1.0) for i in range(4)])
        return out, dict(runner.request_seeds)

    a, seeds_a = run(1)
    b, seeds_b = run(1)
    c, seeds_c = run(2)
    assert a == b and seeds_a == seeds_b and seeds_a != seeds_c
    assert len(set(seeds_a.values())) == 4


def test_sampled_request_needs_logits():
    from examples import OracleTarget

    class TokensOnly:
        def __call__(self, batch):
            return np.zeros(batch.tokens.shape, np.int64)

    runner = SpecRunner(
        SpeculativeConfig(method="ngram"),
        TokensOnly(),
        max_num_seqs=1,
        max_model_len=16,
        end_tokens=[0],
    )
    with pytest.raises(TypeError, match="must give its logits rows"):
        runner.add_request(Request(0, [1, 2], 4, temperature=0.7))
    assert OracleTarget({}, 4, 0).vocab_size == 4
