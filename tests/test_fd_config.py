"""FastDeploy-shaped proposers: NgramProposer(fd_config) and MTPProposer(fd_config, ...) with an object
shaped like FastDeploy's FDConfig, and proposer.run(share_inputs) called positionally, as FastDeploy's
runner and its tests/spec_decode/test_ngram_proposer.py call them (the cases below restate those)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import paddle
import pytest

from fastdeploy_spec.config import ProposerConfig, SpecMethod, SpeculativeConfig, proposer_config
from fastdeploy_spec.proposers import MTPProposer, NgramProposer, SuffixProposer, create_proposer
from tests.helpers import PLACES, to_place
from tests.reference.ngram_match import upstream_proposer_batch

BSZ, K, MAX_MODEL_LEN = 2, 5, 256


def fd_config(use_cudagraph=False, method="ngram", **spec):
    fields = dict(method=method, num_speculative_tokens=K, max_ngram_size=3, min_ngram_size=1)
    fields.update(spec)
    return NS(
        speculative_config=NS(**fields),
        graph_opt_config=NS(use_cudagraph=use_cudagraph),
        scheduler_config=NS(max_num_seqs=BSZ),
        model_config=NS(max_model_len=MAX_MODEL_LEN),
    )


def share_inputs(place, prompt=(), gen=(), max_dec_len=200):
    """Upstream's share_inputs of the proposer test: zeros, ones, K drafts allowed per slot."""
    arrays = upstream_proposer_batch(prompt, gen, max_dec_len, BSZ, K, MAX_MODEL_LEN)
    arrays["actual_draft_token_num"] = arrays.pop("draft_token_num")  # FastDeploy's buffer name
    return {k: to_place(v, place) for k, v in arrays.items()}


def test_config_binding():
    proposer = NgramProposer(fd_config())
    assert proposer.max_ngram_size == 3 and proposer.max_draft_token_num == K
    assert proposer.max_num_seqs == BSZ and proposer.max_model_len == MAX_MODEL_LEN
    assert proposer.pad_to_max is False and NgramProposer(fd_config(True)).pad_to_max is True
    assert proposer.config == SpeculativeConfig(
        method="ngram", num_speculative_tokens=K, max_ngram_size=3, min_ngram_size=1
    )
    typed = NgramProposer(SpeculativeConfig(method="ngram", num_speculative_tokens=4))
    assert (
        typed.pad_to_max is False and typed.max_num_seqs is None and typed.max_draft_token_num == 4
    )


def test_proposer_config_forms():
    # Missing fields take SpeculativeConfig's defaults; an enum method is read by its value; upstream's
    # default method (None) is naive.
    cfg = NS(speculative_config=NS(method=SpecMethod.MTP, num_speculative_tokens=3))
    pc = proposer_config(cfg)
    assert pc.speculative.method is SpecMethod.MTP and pc.speculative.max_ngram_size == 5
    assert pc.pad_to_max is False and pc.max_num_seqs is None
    assert (
        proposer_config(NS(speculative_config=NS(method=None))).speculative.method
        is SpecMethod.NAIVE
    )
    pc = ProposerConfig(SpeculativeConfig(), pad_to_max=True)
    assert proposer_config(pc) is pc
    with pytest.raises(TypeError, match="FDConfig-shaped"):
        proposer_config(object())
    with pytest.raises(ValueError, match="unknown speculative method"):
        proposer_config(fd_config(method="eagle"))
    assert type(create_proposer(fd_config())).__name__ == "NgramProposer"
    assert create_proposer(fd_config(True)).pad_to_max


@pytest.mark.parametrize("place", PLACES)
def test_upstream_proposer_cases(place):
    # step_idx 0: nothing to match, seq_lens_this_time stays 1.
    s = share_inputs(place)
    NgramProposer(fd_config()).run(s)
    assert s["seq_lens_this_time"].numpy().tolist() == [1, 1]
    # Generated tokens absent from the prompt: no drafts.
    s = share_inputs(place, [1, 2, 3, 4, 5, 6], [100, 200, 300])
    NgramProposer(fd_config()).run(s)
    assert s["seq_lens_this_time"].numpy().tolist() == [1, 1]
    # [40, 50, 10] recurs in the prompt: drafts 20 30.
    s = share_inputs(place, [10, 20, 30, 40, 50, 10, 20, 30], [40, 50, 10])
    NgramProposer(fd_config()).run(s)
    assert s["seq_lens_this_time"].numpy().tolist() == [3, 3]
    assert s["draft_tokens"].numpy()[:, 1:3].tolist() == [[20, 30], [20, 30]]
    # max_dec_len - step_idx - 1 = 0: no drafts.
    s = share_inputs(place, [10, 20, 30, 40, 50, 10, 20, 30], [40, 50, 10], max_dec_len=4)
    NgramProposer(fd_config()).run(s)
    assert s["seq_lens_this_time"].numpy().tolist() == [1, 1]


@pytest.mark.parametrize("place", PLACES)
def test_cudagraph_pads_to_k_plus_1(place):
    """use_cudagraph=True: pad_to_max, every decoding slot verifies K + 1 tokens, match or not."""
    s = share_inputs(place)  # no match possible
    NgramProposer(fd_config(use_cudagraph=True)).run(s)
    assert s["seq_lens_this_time"].numpy().tolist() == [K + 1] * BSZ
    assert (s["draft_tokens"].numpy() == 0).all()  # column 0 (0 here) repeated
    s = share_inputs(place, [10, 20, 30, 40, 50, 10, 20, 30], [40, 50, 10])
    NgramProposer(fd_config(use_cudagraph=True)).run(share_inputs=s)  # the keyword form too
    assert s["seq_lens_this_time"].numpy().tolist() == [K + 1] * BSZ
    assert s["draft_tokens"].numpy().tolist() == [[0, 20, 30, 30, 30, 30]] * BSZ


def test_mtp_proposer_from_fd_config():
    """MTPProposer takes S and D from the config, and use_cudagraph pads its hybrid extension."""

    def plus_one(ids, hidden):
        return paddle.nn.functional.one_hot((ids[:, 0] + 1) % 16, 16)

    for use_cudagraph in (False, True):
        cfg = fd_config(use_cudagraph, method="mtp", num_model_steps=1, mtp_strategy="with_ngram")
        mtp = MTPProposer(cfg, plus_one)
        assert (mtp.max_num_seqs, mtp.max_model_len, mtp.pad_to_max) == (
            BSZ,
            MAX_MODEL_LEN,
            use_cudagraph,
        )
        assert mtp.pre_ids.shape == [BSZ, MAX_MODEL_LEN]
        s = share_inputs("cpu", [9, 9, 9], [])
        s["seq_lens_decoder"] = to_place(np.full(BSZ, 4, np.int32), "cpu")
        s["stop_flags"] = to_place(np.zeros((BSZ, 1), bool), "cpu")
        mtp.accept(
            to_place(np.array([[3] + [-1] * K] * BSZ, np.int64), "cpu"),
            to_place(np.ones(BSZ, np.int32), "cpu"),
        )
        # What the hybrid op will see after the MTP step: one MTP draft (4), no n-gram match.
        mtp.run(s)
        slt = s["seq_lens_this_time"].numpy().tolist()
        drafts = s["draft_tokens"].numpy()
        if use_cudagraph:
            assert slt == [K + 1] * BSZ and drafts[:, 1:].tolist() == [[4] * K] * BSZ
        else:
            assert slt == [2] * BSZ and drafts[:, 1].tolist() == [4] * BSZ
    with pytest.raises(ValueError, match="needs max_num_seqs and max_model_len"):
        MTPProposer(SpeculativeConfig(method="mtp"), plus_one)


@pytest.mark.parametrize("place", PLACES)
def test_suffix_proposer_from_fd_config(place):
    """FastDeploy's suffix_decoding_* keys reach the proposer; use_cudagraph pads every decoding slot.

    History 1 2 3 4 5 1 2 3 6 7 1 2 (the contract's worked example): the draft is 3 4, padded to K
    with its last token when use_cudagraph is on."""
    hist = [1, 2, 3, 4, 5, 1, 2, 3, 6, 7, 1, 2]
    for use_cudagraph in (False, True):
        cfg = fd_config(
            use_cudagraph,
            method="suffix",
            suffix_decoding_max_tree_depth=32,
            suffix_decoding_min_token_prob=0.1,
            suffix_decoding_max_spec_factor=1.0,
        )
        proposer = create_proposer(cfg)
        assert isinstance(proposer, SuffixProposer) and proposer.max_tree_depth == 32
        assert proposer.pad_to_max is use_cudagraph
        s = share_inputs(place, hist[:10], hist[10:])
        s["seq_lens_decoder"] = to_place(np.full(BSZ, len(hist), np.int32), place)
        proposer.run(s)
        slt = s["seq_lens_this_time"].numpy().tolist()
        drafts = s["draft_tokens"].numpy()[:, 1:]
        if use_cudagraph:
            assert slt == [K + 1] * BSZ and drafts.tolist() == [[3, 4] + [4] * (K - 2)] * BSZ
        else:
            assert slt == [3] * BSZ and drafts[:, :2].tolist() == [[3, 4]] * BSZ
