"""MTPProposer end to end with a deterministic Paddle draft model (on the CPU; with the buffers on the
GPU too, the draft model staying on the CPU), and create_proposer."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from fastdeploy_spec.buffers import copy_from_host, make_share_inputs
from fastdeploy_spec.config import SpeculativeConfig
from fastdeploy_spec.proposers import MTPProposer, NgramProposer, create_proposer
from tests.helpers import PLACES
from tests.reference.hybrid_mtp_ngram import hybrid_mtp_ngram_ref

VOCAB = 16
K = 4
PROMPT = [1, 2, 3, 9, 9, 4]


class PlusOne(paddle.nn.Layer):
    """A draft model whose greedy output is (token + 1) mod VOCAB: a one-hot shift embedding."""

    def __init__(self):
        super().__init__()
        self.embed = paddle.nn.Embedding(VOCAB, VOCAB)
        shift = np.roll(np.eye(VOCAB, dtype=np.float32), 1, axis=1)  # row t -> one-hot of t + 1
        copy_from_host(self.embed.weight, shift)
        self.calls = []

    def forward(self, input_ids, hidden_states=None):
        self.calls.append((input_ids.numpy().copy(), hidden_states, input_ids.place.is_cpu_place()))
        return self.embed(input_ids)[:, 0, :]


def setup(strategy, steps=2, place="cpu"):
    """Slot 0 decodes (prompt PROMPT, first token 1); slot 1 is empty; slot 2 is prefilling. The
    buffers live on ``place``; the draft model runs on the CPU."""
    cfg = SpeculativeConfig(method="mtp", num_speculative_tokens=K, num_model_steps=steps,
                            mtp_strategy=strategy, max_ngram_size=2, min_ngram_size=1)
    bufs = make_share_inputs(3, 32, cfg, place)
    ids = np.full((3, 32), -1, np.int64)
    ids[0, :len(PROMPT)] = PROMPT
    copy_from_host(bufs["token_ids_all"], ids)
    copy_from_host(bufs["prompt_lens"], np.array([[len(PROMPT)], [0], [7]], np.int64))
    copy_from_host(bufs["seq_lens_encoder"], np.array([0, 0, 7], np.int32))
    copy_from_host(bufs["seq_lens_decoder"], np.array([len(PROMPT), 0, 0], np.int32))
    copy_from_host(bufs["seq_lens_this_time"], np.array([1, 0, 7], np.int32))
    copy_from_host(bufs["max_dec_len"], np.full((3, 1), 100, np.int64))
    model = PlusOne()
    mtp = MTPProposer(cfg, model, max_num_seqs=3, max_model_len=32, place=place, draft_place="cpu")
    first = np.full((3, K + 1), -1, np.int64)
    first[0, 0] = 1
    mtp.accept(first, np.array([1, 0, 0], np.int32))
    return cfg, bufs, model, mtp


@pytest.mark.parametrize("place", PLACES)
def test_greedy_drafts_default_strategy(place):
    _, bufs, model, mtp = setup("default", place=place)
    mtp.run(share_inputs=bufs)
    assert bufs["draft_tokens"].numpy().tolist() == [[-1, 2, 3, -1, -1]] + [[-1] * (K + 1)] * 2
    assert bufs["seq_lens_this_time"].numpy().tolist() == [3, 0, 7]
    assert mtp.pre_ids.numpy()[0, :5].tolist() == [-1, 1, 2, 3, -1]
    assert mtp.step_idx.numpy()[:, 0].tolist() == [3, 0, 0]
    assert [int(c[0][0, 0]) for c in model.calls] == [1, 2]  # each step feeds the newest token


@pytest.mark.parametrize("place", PLACES)
def test_ngram_extension_after_mtp_drafts(place):
    cfg, bufs, _, mtp = setup("with_ngram", place=place)
    mtp.run(share_inputs=bufs)
    # MTP drafts 2 3; pre_ids ends in 2 3, which the prompt continues with 9 9 (K = 4 in all).
    assert bufs["draft_tokens"].numpy()[0].tolist() == [-1, 2, 3, 9, 9]
    assert bufs["seq_lens_this_time"].numpy().tolist() == [5, 0, 7]
    # The same as the reference op applied to the state after the MTP steps.
    drafts = np.full((3, K + 1), -1, np.int64)
    drafts[0, 1:3] = [2, 3]
    want_d, want_s = hybrid_mtp_ngram_ref(
        bufs["token_ids_all"].numpy(), bufs["prompt_lens"].numpy(), mtp.pre_ids.numpy(),
        mtp.step_idx.numpy(), drafts, np.array([3, 0, 7], np.int32),
        bufs["seq_lens_decoder"].numpy(), bufs["max_dec_len"].numpy(), cfg.max_ngram_size,
        cfg.min_ngram_size, K, 1024)
    np.testing.assert_array_equal(bufs["draft_tokens"].numpy(), want_d)
    np.testing.assert_array_equal(bufs["seq_lens_this_time"].numpy(), want_s)


def test_no_extension_when_model_steps_fill_k():
    _, bufs, _, mtp = setup("with_ngram", steps=K)
    mtp.run(share_inputs=bufs)
    assert bufs["draft_tokens"].numpy()[0].tolist() == [-1, 2, 3, 4, 5]
    assert bufs["seq_lens_this_time"].numpy().tolist() == [K + 1, 0, 7]


@pytest.mark.parametrize("place", PLACES)
def test_accept_replaces_drafts_with_verified_tokens(place):
    _, bufs, model, mtp = setup("default", place=place)
    mtp.run(share_inputs=bufs)
    accepted = np.full((3, K + 1), -1, np.int64)
    accepted[0, :2] = [2, 7]  # draft 2 accepted, then the target's own token 7
    mtp.accept(paddle.to_tensor(accepted), paddle.to_tensor(np.array([2, 0, 0], np.int32)))
    assert mtp.pre_ids.numpy()[0, :5].tolist() == [-1, 1, 2, 7, -1]
    assert mtp.step_idx.numpy()[:, 0].tolist() == [3, 0, 0]
    mtp.run(share_inputs=bufs)
    assert bufs["draft_tokens"].numpy()[0, 1:3].tolist() == [8, 9]
    mtp.reset([0])
    assert (mtp.pre_ids.numpy()[0] == -1).all() and mtp.step_idx.numpy()[0, 0] == 0


def test_hidden_states_are_threaded():
    seen = []

    def model(ids, hidden):
        seen.append(hidden)
        logits = paddle.nn.functional.one_hot((ids[:, 0] + 1) % VOCAB, VOCAB)
        return logits, f"h{len(seen)}"

    cfg = SpeculativeConfig(method="mtp", num_speculative_tokens=3, num_model_steps=3)
    bufs = make_share_inputs(1, 16, cfg)
    copy_from_host(bufs["seq_lens_decoder"], np.array([4], np.int32))
    mtp = MTPProposer(cfg, model, max_num_seqs=1, max_model_len=16)
    mtp.accept(np.array([[5, -1, -1, -1]]), np.array([1]))
    mtp.run(share_inputs=bufs, hidden_states="target")
    assert seen == ["target", "h1", "h2"]
    assert bufs["draft_tokens"].numpy()[0].tolist() == [-1, 6, 7, 8]


def test_full_pre_ids_row_stops_drafting():
    cfg = SpeculativeConfig(method="mtp", num_speculative_tokens=3, num_model_steps=3)
    bufs = make_share_inputs(1, 16, cfg)
    copy_from_host(bufs["seq_lens_decoder"], np.array([4], np.int32))
    mtp = MTPProposer(cfg, PlusOne(), max_num_seqs=1, max_model_len=4)
    mtp.accept(np.array([[5, 6, -1, -1]]), np.array([2]))  # pre_ids row: -1 5 6 _
    mtp.run(share_inputs=bufs)
    assert mtp.pre_ids.numpy()[0].tolist() == [-1, 5, 6, 7]
    assert bufs["draft_tokens"].numpy()[0].tolist() == [-1, 7, -1, -1]
    assert bufs["seq_lens_this_time"].numpy().tolist() == [2]


def test_create_proposer():
    assert create_proposer(SpeculativeConfig(method="naive")) is None
    assert isinstance(create_proposer(SpeculativeConfig(method="ngram_match")), NgramProposer)
    mtp = create_proposer(SpeculativeConfig(method="mtp"), draft_model=PlusOne(), max_num_seqs=2,
                          max_model_len=8)
    assert isinstance(mtp, MTPProposer) and list(mtp.pre_ids.shape) == [2, 8]
    with pytest.raises(ValueError, match="needs draft_model"):
        create_proposer(SpeculativeConfig(method="mtp"), max_num_seqs=2, max_model_len=8)
    with pytest.raises(TypeError, match="draft_model must be callable"):
        MTPProposer(SpeculativeConfig(method="mtp"), object(), 2, 8)


@pytest.mark.parametrize("place", PLACES)
def test_buffers_stay_in_place(place):
    # Every write is a copy into the existing allocation on the buffers' own place (Tensor.set_value
    # would re-allocate on Paddle's default place); the draft model gets its input on draft_place.
    _, bufs, model, mtp = setup("with_ngram", place=place)
    tensors = dict(bufs, pre_ids=mtp.pre_ids, step_idx=mtp.step_idx)
    before = {name: t.data_ptr() for name, t in tensors.items()}
    mtp.run(share_inputs=bufs)
    mtp.accept(np.full((3, K + 1), 5, np.int64), np.array([1, 0, 0], np.int32))
    mtp.reset([1])
    for name, t in tensors.items():
        assert t.place.is_gpu_place() == (place == "gpu"), name
        assert t.data_ptr() == before[name], name
    assert len(model.calls) == 2 and all(on_cpu for _, _, on_cpu in model.calls)


def test_copy_from_host_refuses_another_shape_or_dtype():
    t = paddle.to_tensor(np.zeros((2, 3), np.int64), place=paddle.CPUPlace())
    with pytest.raises(ValueError, match=r"int32 \[2, 3\] does not match the tensor's paddle.int64"):
        copy_from_host(t, np.zeros((2, 3), np.int32))
    with pytest.raises(ValueError, match=r"\[3, 2\] does not match"):
        copy_from_host(t, np.zeros((3, 2), np.int64))
