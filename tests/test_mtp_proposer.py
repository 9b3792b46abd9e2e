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
from fastdeploy_spec.proposers import (
    MTPProposer,
    NgramProposer,
    create_proposer,
    last_input_tokens,
)
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


# ---- ops="upstream": FastDeploy's MTPProposer op sequence on FastDeploy's buffer names


class PackedPlusOne:
    """The upstream-ops draft model: (token + 1) mod VOCAB of each active slot's newest input token,
    logits rows packed over the active slots (-1 rows: a zero row), from the host."""

    def __init__(self, slots: int = 3, place: str = "cpu"):
        self.logits = to_place(np.zeros((slots, VOCAB), np.float32), place)
        self.calls = []

    def __call__(self, model_inputs, hidden_states=None):
        ids = last_input_tokens(model_inputs)[:, 0]
        self.calls.append((ids.copy(), hidden_states))
        rows = np.eye(VOCAB, dtype=np.float32)[(ids + 1) % VOCAB]
        rows[ids < 0] = 0
        copy_from_host(self.logits, rows)
        return self.logits


def upstream_setup(strategy="default", place="cpu", model=None):
    """Slots 0 and 2 start requests (slot 0: PROMPT, first token 1; slot 2: 7 tokens, first token
    5); slot 1 stays empty. Returns after the target's prefill step, with the drafts of none."""
    cfg = SpeculativeConfig(
        method="mtp",
        num_speculative_tokens=K,
        num_model_steps=2,
        mtp_strategy=strategy,
        max_ngram_size=2,
        min_ngram_size=1,
    )
    bufs = make_share_inputs(3, 32, cfg, place)
    model = model or PackedPlusOne(place=place)
    mtp = MTPProposer(cfg, model, max_num_seqs=3, max_model_len=32, place=place, ops="upstream")
    ids = np.full((3, 32), -1, np.int64)
    ids[0, : len(PROMPT)] = PROMPT
    ids[2, :7] = [3, 1, 4, 1, 5, 9, 2]
    mtp.reset([0, 2])  # the runner's schedule: the requests take slots 0 and 2
    write(
        bufs,
        token_ids_all=ids,
        prompt_lens=[[len(PROMPT)], [0], [7]],
        seq_lens_encoder=[len(PROMPT), 0, 7],
        seq_lens_decoder=[0, 0, 0],
        seq_lens_this_time=[len(PROMPT), 0, 7],
        max_dec_len=[[100]] * 3,
        stop_flags=[[False], [True], [False]],
    )
    mtp.run(share_inputs=bufs)  # before the target's prefill: nothing to draft yet
    if isinstance(model, PackedPlusOne):  # called each step (no host read of the count): no rows
        assert [c[0].tolist() for c in model.calls] == [[-1, -1, -1]] * 2
        model.calls.clear()
    assert bufs["seq_lens_this_time"].numpy().tolist() == [len(PROMPT), 0, 7]
    # The target's prefill, verification and update: first tokens 1 and 5.
    verified(mtp, bufs, {0: [1], 2: [5]}, [1, 0, 1], [len(PROMPT), 0, 7], seq_lens_encoder=[0] * 3)
    return cfg, bufs, model, mtp


def verified(mtp, bufs, accepted, step_idx, seq_lens_decoder, **more):
    """The target's verification and update as the proposer reads them: ``accepted`` {slot: tokens}
    into accept_tokens / accept_num, the last one into draft_tokens[b, 0], the target's step_idx
    and lengths; then the runner's accept hook."""
    tokens, drafts = np.full((2, 3, K + 1), -1, np.int64)
    num = [0] * 3
    for b, row in accepted.items():
        tokens[b, : len(row)], drafts[b, 0], num[b] = row, row[-1], len(row)
    write(
        bufs,
        draft_tokens=drafts,
        step_idx=step_idx,
        seq_lens_decoder=seq_lens_decoder,
        **more,
    )
    accept(mtp, bufs, tokens, num)


@pytest.mark.parametrize("place", PLACES)
def test_upstream_ops_draft_prefill_then_decode(place):
    _, bufs, model, mtp = upstream_setup(place=place)
    mi = mtp.model_inputs
    # The draft model's prefill: input_ids = the prompt shifted by one, then the first token.
    assert mi["seq_lens_encoder"].numpy().tolist() == [len(PROMPT), 0, 7]
    mtp.run(share_inputs=bufs)
    assert [c[0].tolist() for c in model.calls] == [[1, 5, -1], [2, 6, -1]]
    assert mi["input_ids"].numpy()[0, : len(PROMPT)].tolist() == PROMPT[1:] + [1]
    assert bufs["draft_tokens"].numpy()[:, :3].tolist() == [[1, 2, 3], [-1, -1, -1], [5, 6, 7]]
    assert bufs["seq_lens_this_time"].numpy().tolist() == [3, 0, 3]  # draft_model_postprocess
    assert mi["pre_ids"].numpy()[0, :4].tolist() == [1, 2, 3, -1]
    assert mi["step_idx"].numpy()[:, 0].tolist() == [2, 0, 2]
    assert mi["seq_lens_decoder"].numpy().tolist() == [len(PROMPT) + 1, 0, 8]
    # Decode: slot 0 accepts both drafts and the target's 4; slot 2 accepts 6, then the target's 9.
    verified(mtp, bufs, {0: [2, 3, 4], 2: [6, 9]}, [4, 0, 3], [len(PROMPT) + 3, 0, 9])
    model.calls.clear()
    mtp.run(share_inputs=bufs)
    assert [c[0].tolist() for c in model.calls] == [[4, 9, -1], [5, 10, -1]]
    assert bufs["draft_tokens"].numpy()[:, :3].tolist() == [[4, 5, 6], [-1, -1, -1], [9, 10, 11]]
    assert bufs["seq_lens_this_time"].numpy().tolist() == [3, 0, 3]
    assert mi["pre_ids"].numpy()[0, :7].tolist() == [1, 2, 3, 4, 5, 6, -1]
    assert mi["pre_ids"].numpy()[2, :5].tolist() == [5, 6, 9, 10, 11]
    assert mi["step_idx"].numpy()[:, 0].tolist() == [5, 0, 4]
    assert mi["seq_lens_decoder"].numpy().tolist() == [len(PROMPT) + 4, 0, 10]
    assert bool(mi["not_need_stop"].numpy()[0])


@pytest.mark.parametrize("place", PLACES)
def test_upstream_ops_ngram_extension(place):
    cfg, bufs, _, mtp = upstream_setup("with_ngram", place=place)
    mtp.run(share_inputs=bufs)
    # Slot 0: drafts 2 3 after the first token 1; the prompt continues "2 3" with "9 9".
    assert bufs["draft_tokens"].numpy()[0].tolist() == [1, 2, 3, 9, 9]
    assert bufs["seq_lens_this_time"].numpy().tolist()[0] == K + 1


@pytest.mark.parametrize("place", PLACES)
def test_upstream_ops_no_host_sync_in_run(place, monkeypatch):
    """run (no request starting) launches only plugin ops: no device->host read, no host->device
    copy, no tensor creation (the draft model's logits are prepared on the place)."""
    rng = np.random.default_rng(0)
    prepared = PreparedLogits(
        [to_place(rng.standard_normal((3, VOCAB)).astype(np.float32), place) for _ in range(2)]
    )
    _, bufs, _, mtp = upstream_setup(place=place, model=prepared)
    before = {n: t.data_ptr() for n, t in mtp.model_inputs.items()}
    calls = prepared.calls
    with monkeypatch.context() as m:
        for name in ("numpy", "tolist", "item", "cpu", "cuda", "copy_", "__array__", "__bool__"):
            if hasattr(paddle.Tensor, name):
                m.setattr(paddle.Tensor, name, lambda *a, _n=name, **k: pytest.fail(_n))
        for name in ("to_tensor", "zeros", "full", "empty", "ones"):
            m.setattr(paddle, name, lambda *a, _n=name, **k: pytest.fail(_n))
        for _ in range(2):
            mtp.run(share_inputs=bufs)
            mtp.accept(bufs["accept_tokens"], bufs["accept_num"])
    assert {n: t.data_ptr() for n, t in mtp.model_inputs.items()} == before
    assert prepared.calls == calls + 4


def test_upstream_ops_hidden_states_are_gathered():
    """eagle_get_hidden_states gives the draft model the target's rows of the accepted tokens."""
    seen = []
    inner = PackedPlusOne()

    def model(model_inputs, hidden):
        seen.append(None if hidden is None else hidden.numpy().copy())
        return inner(model_inputs), hidden

    _, bufs, _, mtp = upstream_setup(model=model)
    mtp.run(share_inputs=bufs)  # the draft's prefill; now decode with target rows 0..2 / 3..5
    verified(mtp, bufs, {0: [7, 7], 2: [7]}, [3, 0, 2], [len(PROMPT) + 2, 0, 8])
    seen.clear()
    hidden = to_place(np.arange(6, dtype=np.float32).reshape(6, 1), "cpu")
    mtp.run(share_inputs=bufs, hidden_states=hidden)
    assert seen[0][:, 0].tolist() == [0.0, 1.0, 3.0, 0.0, 0.0, 0.0]


def test_upstream_ops_named_errors():
    cfg = SpeculativeConfig(method="mtp", num_speculative_tokens=2, num_model_steps=2)
    with pytest.raises(ValueError, match="ops must be one of"):
        MTPProposer(cfg, PackedPlusOne(), 2, 8, ops="fastdeploy")


@pytest.mark.parametrize("strategy", ["default", "with_ngram"])
def test_demo_mtp_upstream_ops(tmp_path, capsys, strategy):
    """The demo through FastDeploy's sequence: outputs identical to plain decoding, drafts accepted,
    fewer steps than plain decoding."""
    import json

    from examples import demo

    argv = ["--method", "mtp", "--requests", "3", "--slots", "2", "--max-prompt-tokens", "150"]
    argv += ["--device", "cpu", "--mtp-strategy", strategy, "--mtp-ops", "upstream"]
    assert demo.main(argv + ["--out", str(tmp_path)]) == 0
    assert "3/3 requests identical" in capsys.readouterr().out
    plain, upstream = json.loads((tmp_path / "demo.json").read_text())["results"]
    assert upstream["mtp_ops"] == "upstream" and upstream["drafts_accepted"] > 0
    assert upstream["steps"] < plain["steps"]


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["paddle", "cudart"])
@pytest.mark.parametrize("strategy", ["default", "with_ngram"])
def test_upstream_ops_step_replays_like_eager(backend, strategy):
    """The upstream-ops step captured in a CUDA graph (after a warm-up run) and replayed equals the
    same two runs eager on the GPU and on the CPU, on every buffer."""
    from benchmarks.gpu_timer import Graph

    rng = np.random.default_rng(3)
    logits = [rng.standard_normal((3, VOCAB)).astype(np.float32) for _ in range(2)]

    def two_runs(place, capture):
        model = PreparedLogits([to_place(v, place) for v in logits])
        _, bufs, _, mtp = upstream_setup(strategy, place=place, model=model)
        run = lambda: mtp.run(share_inputs=bufs)  # noqa: E731
        run()
        if capture:
            kw = dict(backend=backend, side_stream=backend == "cudart")
            Graph(run, **kw).replay()
        else:
            run()
        out = {f"model_inputs.{k}": v.numpy() for k, v in mtp.model_inputs.items()}
        out.update({k: bufs[k].numpy() for k in ("draft_tokens", "seq_lens_this_time")})
        return out

    got, eager, cpu = two_runs("gpu", True), two_runs("gpu", False), two_runs("cpu", False)
    for k in cpu:
        np.testing.assert_array_equal(got[k], eager[k], err_msg=f"replay vs eager: {k}")
        np.testing.assert_array_equal(eager[k], cpu[k], err_msg=f"GPU vs CPU: {k}")
