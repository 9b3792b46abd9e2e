"""MTPProposer end to end with deterministic draft models, on every place: drafts, the n-gram
extension, accept, slots that start a request, hidden states, full rows; no host synchronisation
and no allocation in run / accept / reset; create_proposer."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from examples.oracle import PreparedLogits
from fastdeploy_spec.buffers import copy_from_host, make_share_inputs
from fastdeploy_spec.config import SpeculativeConfig
from fastdeploy_spec.proposers import MTPProposer, NgramProposer, create_proposer
from tests.helpers import MTP_BUFFERS, PLACES, to_place
from tests.reference.hybrid_mtp_ngram import hybrid_mtp_ngram_ref

VOCAB = 16
K = 4
PROMPT = [1, 2, 3, 9, 9, 4]


class PlusOne:
    """A draft model whose greedy output is (token + 1) mod VOCAB. It runs on the host (the caller's
    copy: input ids to the host, logits into a buffer on the place), so it works on every place."""

    def __init__(self, slots: int = 3, place: str = "cpu"):
        self.logits = to_place(np.zeros((slots, VOCAB), np.float32), place)
        self.calls = []

    def __call__(self, input_ids, hidden_states=None):
        ids = input_ids.numpy()[:, 0]
        self.calls.append((ids.copy(), hidden_states))
        copy_from_host(self.logits, np.eye(VOCAB, dtype=np.float32)[(ids + 1) % VOCAB])
        return self.logits


def write(bufs, **values):
    for name, v in values.items():
        copy_from_host(
            bufs[name], np.asarray(v, bufs[name].numpy().dtype).reshape(bufs[name].shape)
        )


def accept(mtp, bufs, tokens, num):
    write(bufs, accept_tokens=tokens, accept_num=num)
    mtp.accept(bufs["accept_tokens"], bufs["accept_num"])


def setup(strategy, steps=2, place="cpu", defer_accept=False):
    """Slot 0 decodes (prompt PROMPT, first token 1); slot 1 is empty; slot 2 is prefilling."""
    cfg = SpeculativeConfig(
        method="mtp",
        num_speculative_tokens=K,
        num_model_steps=steps,
        mtp_strategy=strategy,
        max_ngram_size=2,
        min_ngram_size=1,
    )
    bufs = make_share_inputs(3, 32, cfg, place)
    ids = np.full((3, 32), -1, np.int64)
    ids[0, : len(PROMPT)] = PROMPT
    write(
        bufs,
        token_ids_all=ids,
        prompt_lens=[[len(PROMPT)], [0], [7]],
        seq_lens_encoder=[0, 0, 7],
        seq_lens_decoder=[len(PROMPT), 0, 0],
        seq_lens_this_time=[1, 0, 7],
        max_dec_len=[[100]] * 3,
        stop_flags=[[False], [True], [False]],
    )
    model = PlusOne(place=place)
    mtp = MTPProposer(
        cfg, model, max_num_seqs=3, max_model_len=32, place=place, defer_accept=defer_accept
    )
    first = np.full((3, K + 1), -1, np.int64)
    first[0, 0] = 1
    accept(mtp, bufs, first, [1, 0, 0])
    return cfg, bufs, model, mtp


@pytest.mark.parametrize("place", PLACES)
def test_greedy_drafts_default_strategy(place):
    _, bufs, model, mtp = setup("default", place=place)
    mtp.run(share_inputs=bufs)
    assert bufs["draft_tokens"].numpy().tolist() == [[-1, 2, 3, -1, -1]] + [[-1] * (K + 1)] * 2
    assert bufs["seq_lens_this_time"].numpy().tolist() == [3, 0, 7]
    assert mtp.pre_ids.numpy()[0, :5].tolist() == [-1, 1, 2, 3, -1]
    assert mtp.step_idx.numpy()[:, 0].tolist() == [3, 0, 0]
    assert mtp.mtp_draft_num.numpy().tolist() == [2, 0, 0]
    assert mtp.seq_lens_decoder.numpy().tolist() == [len(PROMPT) + 2, 0, 0]  # the draft side's own
    assert mtp.max_dec_len.numpy()[:, 0].tolist() == [100, 100, 100]
    # Each step feeds the newest token; other slots get the safe id 0.
    assert [c[0].tolist() for c in model.calls] == [[1, 0, 0], [2, 0, 0]]


@pytest.mark.parametrize("place", PLACES)
def test_ngram_extension_after_mtp_drafts(place):
    cfg, bufs, _, mtp = setup("with_ngram", place=place)
    mtp.run(share_inputs=bufs)
    # MTP drafts 2 3; pre_ids ends in 2 3, which the prompt continues with 9 9 (K = 4 in all).
    assert bufs["draft_tokens"].numpy()[0].tolist() == [-1, 2, 3, 9, 9]
    assert bufs["seq_lens_this_time"].numpy().tolist() == [5, 0, 7]
    # The same as the reference op applied, with the draft side's lengths, after the MTP steps.
    drafts = np.full((3, K + 1), -1, np.int64)
    drafts[0, 1:3] = [2, 3]
    want_d, want_s = hybrid_mtp_ngram_ref(
        bufs["token_ids_all"].numpy(),
        bufs["prompt_lens"].numpy(),
        mtp.pre_ids.numpy(),
        mtp.step_idx.numpy(),
        drafts,
        np.array([3, 0, 7], np.int32),
        mtp.seq_lens_decoder.numpy(),
        mtp.max_dec_len.numpy(),
        cfg.max_ngram_size,
        cfg.min_ngram_size,
        K,
        1024,
    )
    np.testing.assert_array_equal(bufs["draft_tokens"].numpy(), want_d)
    np.testing.assert_array_equal(bufs["seq_lens_this_time"].numpy(), want_s)


def test_no_extension_when_model_steps_fill_k():
    _, bufs, _, mtp = setup("with_ngram", steps=K)
    mtp.run(share_inputs=bufs)
    assert bufs["draft_tokens"].numpy()[0].tolist() == [-1, 2, 3, 4, 5]
    assert bufs["seq_lens_this_time"].numpy().tolist() == [K + 1, 0, 7]


@pytest.mark.parametrize("place", PLACES)
def test_accept_replaces_drafts_with_verified_tokens(place):
    _, bufs, _, mtp = setup("default", place=place)
    mtp.run(share_inputs=bufs)
    accepted = np.full((3, K + 1), -1, np.int64)
    accepted[0, :2] = [2, 7]  # draft 2 accepted, then the target's own token 7
    accept(mtp, bufs, accepted, [2, 0, 0])
    assert mtp.pre_ids.numpy()[0, :5].tolist() == [-1, 1, 2, 7, -1]
    assert mtp.step_idx.numpy()[:, 0].tolist() == [3, 0, 0]
    assert mtp.mtp_draft_num.numpy().tolist() == [0, 0, 0]
    mtp.run(share_inputs=bufs)
    assert bufs["draft_tokens"].numpy()[0, 1:3].tolist() == [8, 9]


@pytest.mark.parametrize("place", PLACES)
def test_run_without_accept_drops_the_unverified_drafts(place):
    _, bufs, model, mtp = setup("default", place=place)
    mtp.run(share_inputs=bufs)
    mtp.run(share_inputs=bufs)  # the first run's drafts 2 3 were never verified
    assert mtp.pre_ids.numpy()[0, :4].tolist() == [-1, 1, 2, 3]
    assert mtp.step_idx.numpy()[0, 0] == 3
    assert [c[0][0] for c in model.calls] == [1, 2, 1, 2]


@pytest.mark.parametrize("place", PLACES)
def test_slot_starting_a_request_is_cleared(place):
    _, bufs, model, mtp = setup("default", place=place)
    mtp.run(share_inputs=bufs)
    mtp.reset([0])  # nothing to do there: the next run sees the slot in prefill
    write(bufs, seq_lens_encoder=[5, 0, 7], seq_lens_this_time=[5, 0, 7])
    mtp.run(share_inputs=bufs)
    assert (mtp.pre_ids.numpy()[0] == -1).all() and mtp.step_idx.numpy()[0, 0] == 0
    assert bufs["seq_lens_this_time"].numpy().tolist() == [5, 0, 7]  # prefill slots keep theirs
    assert model.calls[-1][0].tolist() == [0, 0, 0]
    accept(mtp, bufs, np.full((3, K + 1), 11, np.int64), [1, 0, 0])  # the new request's first token
    assert mtp.pre_ids.numpy()[0, :3].tolist() == [-1, 11, -1]


def test_hidden_states_are_threaded():
    seen = []
    inner = PlusOne(slots=1)

    def model(ids, hidden):
        seen.append(hidden)
        return inner(ids), f"h{len(seen)}"

    cfg = SpeculativeConfig(method="mtp", num_speculative_tokens=3, num_model_steps=3)
    bufs = make_share_inputs(1, 16, cfg)
    write(bufs, seq_lens_decoder=[4], stop_flags=[[False]])
    mtp = MTPProposer(cfg, model, max_num_seqs=1, max_model_len=16)
    accept(mtp, bufs, [[5, -1, -1, -1]], [1])
    mtp.run(share_inputs=bufs, hidden_states="target")
    assert seen == ["target", "h1", "h2"]
    assert bufs["draft_tokens"].numpy()[0].tolist() == [-1, 6, 7, 8]


def test_full_pre_ids_row_stops_drafting():
    cfg = SpeculativeConfig(method="mtp", num_speculative_tokens=3, num_model_steps=3)
    bufs = make_share_inputs(1, 16, cfg)
    write(bufs, seq_lens_decoder=[4], stop_flags=[[False]])
    mtp = MTPProposer(cfg, PlusOne(slots=1), max_num_seqs=1, max_model_len=4)
    accept(mtp, bufs, [[5, 6, -1, -1]], [2])  # pre_ids row: -1 5 6 _
    mtp.run(share_inputs=bufs)
    assert mtp.pre_ids.numpy()[0].tolist() == [-1, 5, 6, 7]
    assert bufs["draft_tokens"].numpy()[0].tolist() == [-1, 7, -1, -1]
    assert bufs["seq_lens_this_time"].numpy().tolist() == [2]


def test_wrong_inputs_are_named():
    _, bufs, _, mtp = setup("default")
    with pytest.raises(TypeError, match="accept_tokens must be a Paddle tensor"):
        mtp.accept(np.zeros((3, K + 1), np.int64), bufs["accept_num"])
    mtp.draft_model = lambda ids, hidden: np.zeros((3, VOCAB), np.float32)
    with pytest.raises(TypeError, match="must return its logits as a Paddle tensor"):
        mtp.run(share_inputs=bufs)


def test_create_proposer():
    assert create_proposer(SpeculativeConfig(method="naive")) is None
    assert isinstance(create_proposer(SpeculativeConfig(method="ngram_match")), NgramProposer)
    mtp = create_proposer(
        SpeculativeConfig(method="mtp"), draft_model=PlusOne(), max_num_seqs=2, max_model_len=8
    )
    assert isinstance(mtp, MTPProposer) and list(mtp.pre_ids.shape) == [2, 8]
    with pytest.raises(ValueError, match="needs draft_model"):
        create_proposer(SpeculativeConfig(method="mtp"), max_num_seqs=2, max_model_len=8)
    with pytest.raises(TypeError, match="draft_model must be callable"):
        MTPProposer(SpeculativeConfig(method="mtp"), object(), 2, 8)


@pytest.mark.parametrize("strategy", ["default", "with_ngram"])
@pytest.mark.parametrize("place", PLACES)
def test_deferred_accept_gives_the_same_steps(place, strategy):
    """defer_accept (accept kept for the next run, draft_model_accept_preprocess) drafts and leaves the
    state exactly as the default after every run, while slots change kind between steps."""
    names = ("pre_ids", "step_idx", "seq_lens_decoder", "max_dec_len", "input_ids", "mtp_draft_num")
    runs = []
    for defer in (False, True):
        _, bufs, model, mtp = setup(strategy, place=place, defer_accept=defer)
        rng = np.random.default_rng(5)
        seen = []
        for step in range(5):
            if step == 2:  # slot 2's prompt is cached: it decodes from now on
                write(bufs, seq_lens_encoder=[0, 0, 0], seq_lens_decoder=[len(PROMPT) + 4, 0, 7])
            mtp.run(share_inputs=bufs)
            seen.append({n: bufs[n].numpy().copy() for n in ("draft_tokens", "seq_lens_this_time")})
            seen[-1].update({n: getattr(mtp, n).numpy().copy() for n in names})
            accept(mtp, bufs, rng.integers(0, VOCAB, (3, K + 1)), rng.integers(0, K + 2, 3))
        runs.append(seen)
    for step, (want, got) in enumerate(zip(*runs)):
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"step {step}: {name}")


@pytest.mark.parametrize("strategy", ["default", "with_ngram"])
@pytest.mark.parametrize("place", PLACES)
def test_no_host_sync_and_no_allocation(place, strategy, monkeypatch):
    """run / accept / reset launch only plugin ops: any device->host read, host->device copy or
    tensor creation inside them fails the test; every buffer keeps its allocation."""
    cfg, bufs, _, mtp = setup(strategy, place=place)
    rng = np.random.default_rng(0)
    mtp.draft_model = PreparedLogits(
        [to_place(rng.standard_normal((3, VOCAB)).astype(np.float32), place) for _ in range(2)]
    )
    tensors = dict(bufs, **{n: getattr(mtp, n) for n in MTP_BUFFERS})
    before = {name: t.data_ptr() for name, t in tensors.items()}

    def forbidden(name):
        def fail(*args, **kwargs):
            raise AssertionError(f"{name} called inside the proposer")

        return fail

    with monkeypatch.context() as m:
        for name in (
            "numpy",
            "tolist",
            "item",
            "cpu",
            "cuda",
            "copy_",
            "_copy_to",
            "__array__",
            "__bool__",
            "__int__",
            "__index__",
        ):
            if hasattr(paddle.Tensor, name):
                m.setattr(paddle.Tensor, name, forbidden(f"Tensor.{name}"))
        for name in ("to_tensor", "zeros", "full", "empty", "ones"):
            m.setattr(paddle, name, forbidden(f"paddle.{name}"))
        for _ in range(3):
            mtp.run(share_inputs=bufs)
            mtp.accept(bufs["accept_tokens"], bufs["accept_num"])
            mtp.reset([1])
    for name, t in tensors.items():
        assert t.place.is_gpu_place() == (place == "gpu"), name
        assert t.data_ptr() == before[name], name
    assert mtp.draft_model.calls == 6
