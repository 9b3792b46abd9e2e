"""CUDA-graph capture and replay of a decode step: ngram_match, verify_draft_tokens (GREEDY) and
unified_update_model_status, captured once on fixed device buffers; and of a whole MTP decode step
(MTPProposer.run: draft_model_greedy_preprocess, two draft-model steps with draft_model_greedy_update,
hybrid_mtp_ngram; then verification, MTPProposer.accept and the update), its draft model returning
logits prepared on the device.

Each replay follows new inputs copied into those same buffers with ``Tensor.copy_(src, True)``: in
Paddle 2.6 and 3.x that is ``phi::Copy``, a cudaMemcpy into the tensor's existing allocation (no
Paddle kernel, which matters where Paddle's own GPU kernels cannot run, and no reallocation, which a
graph needs: it replays on the pointers it captured; the test checks the pointers where Paddle
exposes them). The results must equal eager calls on fresh tensors, and the CPU ops.

Two capture paths are tested:
  * ``paddle``: Paddle's graph API, ``paddle.device.cuda.graphs.CUDAGraph`` (capture_begin,
    capture_end, replay);
  * ``cudart``: the fallback where Paddle's graph API cannot capture: the CUDA runtime itself,
    through ctypes (cudaStreamBeginCapture in relaxed mode on a side stream made current with
    ``paddle.device.cuda.stream_guard``, cudaStreamEndCapture, cudaGraphInstantiateWithFlags,
    cudaGraphLaunch). Only the plugin's ops are inside the graph, so this path depends on nothing of
    Paddle but the stream its ops are launched on.

Both are ``benchmarks.gpu_timer.Graph``, the graphs the benchmarks time.

Last, FastDeploy's step ops (verify_draft_tokens with the TOPP strategy, then
unified_update_model_status): a captured step replayed twice draws different tokens, each replay
equal to the CPU ops from the same state (the Philox counter is the device's step_idx).
"""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from benchmarks.gpu_timer import Graph
from fastdeploy_spec.ops import ngram_match, unified_update_model_status, verify_draft_tokens
from tests.helpers import MTP_BUFFERS, RUNNER_NAMES, call_named, to_place, unified_update

pytestmark = pytest.mark.gpu

S, W, K, VOCAB, END = 37, 64, 4, 4, 3
THRESHOLD = 128
OUTPUTS = (
    "draft_tokens",
    "seq_lens_this_time",
    "accept_tokens",
    "accept_num",
    "token_ids_all",
    "step_idx",
    "stop_flags",
    "seq_lens_encoder",
    "seq_lens_decoder",
    "has_running_seqs",
)


def random_state(rng: np.random.Generator) -> dict:
    """A runner state of S slots (prefill, decoding, empty, stopped) over a vocabulary of 4, and the
    target model's tokens for the step."""
    ids = np.full((S, W), -1, np.int64)
    prompt_lens = np.zeros((S, 1), np.int64)
    step_idx = np.zeros((S, 1), np.int64)
    enc, dec, slt = np.zeros(S, np.int32), np.zeros(S, np.int32), np.zeros(S, np.int32)
    stop = np.zeros((S, 1), bool)
    for b in range(S):
        kind = rng.choice(["prefill", "decoding", "decoding", "empty", "stopped"])
        P, s = int(rng.integers(1, 24)), int(rng.integers(1, 16))
        if kind == "empty":
            stop[b] = True
            continue
        prompt_lens[b] = P
        ids[b, :P] = rng.integers(0, VOCAB, P)
        if kind == "prefill":
            enc[b] = slt[b] = P
            continue
        ids[b, P : P + s] = rng.integers(0, VOCAB, s)
        step_idx[b] = s
        dec[b] = P + s - 1
        slt[b] = 1
        stop[b] = kind == "stopped"
    draft_tokens = rng.integers(0, VOCAB, (S, K + 1))
    for b in range(S):
        if step_idx[b] > 0:
            draft_tokens[b, 0] = ids[b, prompt_lens[b, 0] + step_idx[b, 0] - 1]
    return dict(
        token_ids_all=ids,
        prompt_lens=prompt_lens,
        step_idx=step_idx,
        max_dec_len=step_idx + rng.integers(1, 12, (S, 1)),
        actual_draft_token_num=np.full(S, K, np.int32),
        draft_tokens=draft_tokens.astype(np.int64),
        seq_lens_this_time=slt,
        seq_lens_encoder=enc,
        seq_lens_decoder=dec,
        stop_flags=stop,
        accept_tokens=np.full((S, K + 1), -1, np.int64),
        accept_num=np.zeros(S, np.int32),
        target_tokens=target_rows(rng),
        # FastDeploy's step inputs: slot b's target rows start at b (K + 1); nothing blocked or paused
        cu_seqlens_q_output=(np.arange(S) * (K + 1)).astype(np.int32),
        is_block_step=np.zeros(S, bool),
        reasoning_status=np.zeros(S, np.int32),
        topp=np.ones(S, np.float32),
        has_running_seqs=np.zeros(1, bool),
        end_tokens=np.array([END], np.int64),
    )


NGRAM_NAMES = {"draft_token_num": "actual_draft_token_num"}  # the runner's name


def decode_step(t: dict, pad_to_max: bool = False) -> None:
    call_named(ngram_match, t, 3, K, pad_to_max, names=NGRAM_NAMES, threshold=THRESHOLD)
    verify(t)
    unified_update(t)


def target_rows(rng: np.random.Generator) -> np.ndarray:
    """The target model's greedy tokens, packed: K + 1 rows per slot (slot b's from b (K + 1))."""
    return rng.integers(0, VOCAB, S * (K + 1)).astype(np.int64)


def verify(t: dict) -> None:
    call_named(verify_draft_tokens, t, W, 0, 1, False, False, names=RUNNER_NAMES)


def eager_steps(state: dict, targets: list, place: str, pad_to_max: bool = False) -> dict:
    """Fresh tensors on `place`, one decode step per entry of `targets` (its target tokens)."""
    t = {k: to_place(v, place) for k, v in state.items()}
    for target in targets:
        t["target_tokens"] = to_place(target, place)
        decode_step(t, pad_to_max)
    return {k: t[k].numpy() for k in OUTPUTS}


def copy_into(buffers: dict, name: str, host: np.ndarray) -> None:
    buffers[name].copy_(paddle.to_tensor(np.ascontiguousarray(host), place=paddle.CPUPlace()), True)


BACKENDS = {"paddle": dict(backend="paddle"), "cudart": dict(backend="cudart", side_stream=True)}


def pointers(buffers: dict):
    return (
        {k: t.data_ptr() for k, t in buffers.items()}
        if hasattr(paddle.Tensor, "data_ptr")
        else None
    )


# pad_to_max: graph mode of ngram_match (FastDeploy #7849), what a runner whose target model is
# captured passes; every decoding slot then verifies K drafts.
@pytest.mark.parametrize("pad_to_max", [False, True], ids=["unpadded", "pad_to_max"])
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_decode_step_replays_like_eager(backend, pad_to_max):
    rng = np.random.default_rng(0)
    states = [random_state(rng) for _ in range(3)]
    buffers = {k: to_place(v, "gpu") for k, v in random_state(rng).items()}
    before = pointers(buffers)
    graph = Graph(lambda: decode_step(buffers, pad_to_max), **BACKENDS[backend])

    # New inputs into the captured buffers, one replay each.
    for state in states:
        for k, v in state.items():
            copy_into(buffers, k, v)
        graph.replay()
        want = eager_steps(state, [state["target_tokens"]], "gpu", pad_to_max)
        want_cpu = eager_steps(state, [state["target_tokens"]], "cpu", pad_to_max)
        for k in OUTPUTS:
            np.testing.assert_array_equal(buffers[k].numpy(), want[k], err_msg=f"{backend}: {k}")
            np.testing.assert_array_equal(want[k], want_cpu[k], err_msg=f"GPU vs CPU: {k}")

    # The decode loop as a runner drives it: the state stays on the device, only the target model's
    # tokens change between replays.
    state = states[0]
    for k, v in state.items():
        copy_into(buffers, k, v)
    targets = [target_rows(rng) for _ in range(5)]
    for target in targets:
        copy_into(buffers, "target_tokens", target)
        graph.replay()
    want = eager_steps(state, targets, "cpu", pad_to_max)
    if pad_to_max:  # the captured shape: every decoding slot verifies K drafts
        t = {k: to_place(v, "gpu") for k, v in state.items()}
        call_named(ngram_match, t, 3, K, True, names=NGRAM_NAMES, threshold=THRESHOLD)
        decoding = (state["seq_lens_encoder"] <= 0) & (state["seq_lens_decoder"] != 0)
        assert decoding.any() and (t["seq_lens_this_time"].numpy()[decoding] == K + 1).all()
    for k in OUTPUTS:
        np.testing.assert_array_equal(buffers[k].numpy(), want[k], err_msg=f"{backend} loop: {k}")
    assert pointers(buffers) == before


# ---- A whole MTP decode step: draft steps, hybrid_mtp_ngram extension, verification, update ---------

MTP_STEPS = 2


class PreparedLogits:
    """The draft model of the captured step: its forward returns logits prepared on the device (one
    buffer per draft step, refilled by copies between replays), so the graph holds only plugin ops."""

    def __init__(self, logits: list) -> None:
        self.logits = logits
        self.substep = 0

    def __call__(self, input_ids, hidden_states=None):
        out = self.logits[self.substep % len(self.logits)]
        self.substep += 1
        return out


def mtp_state(rng: np.random.Generator):
    """A runner state (random_state), the proposer's draft side consistent with it (pre_ids holds each
    slot's generated tokens, some slots with unverified drafts left over), the previous step's
    verified tokens (accept_tokens / accept_num: what a deferred accept applies first), and the draft
    logits of each draft step over a vocabulary of 4 (ties everywhere)."""
    state = random_state(rng)
    state["accept_num"] = rng.integers(0, K + 2, S).astype(np.int32)
    state["accept_tokens"] = rng.integers(0, VOCAB, (S, K + 1)).astype(np.int64)
    pre = np.full((S, W), -1, np.int64)
    step = state["step_idx"].copy()
    drafted = np.zeros(S, np.int32)
    for b in range(S):
        P, s = int(state["prompt_lens"][b, 0]), int(step[b, 0])
        pre[b, 1 : s + 1] = state["token_ids_all"][b, P : P + s]
        if s and rng.random() < 0.3:  # an earlier step's drafts, never verified
            drafted[b] = int(rng.integers(1, 3))
            pre[b, s + 1 : s + 1 + drafted[b]] = rng.integers(0, VOCAB, drafted[b])
            step[b, 0] += drafted[b]
    draft_side = dict(
        pre_ids=pre,
        step_idx=step,
        seq_lens_decoder=np.zeros(S, np.int32),
        max_dec_len=np.zeros((S, 1), np.int64),
        input_ids=np.zeros((S, 1), np.int64),
        mtp_draft_num=drafted,
    )
    logits = [rng.integers(0, 3, (S, VOCAB)).astype(np.float32) for _ in range(MTP_STEPS)]
    return state, draft_side, logits


def make_mtp_proposer(place: str, logits: list, defer_accept: bool):
    from fastdeploy_spec.config import SpeculativeConfig
    from fastdeploy_spec.proposers import MTPProposer

    cfg = SpeculativeConfig(
        method="mtp",
        num_speculative_tokens=K,
        num_model_steps=MTP_STEPS,
        mtp_strategy="with_ngram",
        max_ngram_size=3,
        min_ngram_size=1,
        hybrid_threshold=THRESHOLD,
    )
    model = PreparedLogits([to_place(v, place) for v in logits])
    return MTPProposer(
        cfg, model, max_num_seqs=S, max_model_len=W, place=place, defer_accept=defer_accept
    ), model


def mtp_step(t: dict, proposer) -> None:
    proposer.draft_model.substep = 0
    proposer.run(share_inputs=t)
    verify(t)
    proposer.accept(t["accept_tokens"], t["accept_num"])
    unified_update(t)


def mtp_results(t: dict, proposer) -> dict:
    out = {k: t[k].numpy() for k in OUTPUTS}
    out.update({f"proposer.{k}": getattr(proposer, k).numpy() for k in MTP_BUFFERS})
    return out


def eager_mtp_steps(
    state: dict, draft_side: dict, steps: list, place: str, defer_accept: bool
) -> dict:
    """Fresh tensors and a fresh proposer on `place`; one MTP step per (target tokens, logits). A
    deferring proposer starts with the state's accept_tokens / accept_num pending."""
    t = {k: to_place(v, place) for k, v in state.items()}
    proposer, model = make_mtp_proposer(place, steps[0][1], defer_accept)
    for k, v in draft_side.items():
        copy_into(vars(proposer), k, v)
    if defer_accept:
        proposer.accept(t["accept_tokens"], t["accept_num"])
    for target, logits in steps:
        t["target_tokens"] = to_place(target, place)
        for buf, v in zip(model.logits, logits):
            buf.copy_(paddle.to_tensor(v, place=paddle.CPUPlace()), True)
        mtp_step(t, proposer)
    return mtp_results(t, proposer)


@pytest.mark.parametrize("defer_accept", [True, False], ids=["deferred-accept", "accept-at-once"])
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_mtp_step_replays_like_eager(backend, defer_accept):
    rng = np.random.default_rng(1)
    cases = [mtp_state(rng) for _ in range(3)]
    state0, draft0, logits0 = mtp_state(rng)
    buffers = {k: to_place(v, "gpu") for k, v in state0.items()}
    proposer, model = make_mtp_proposer("gpu", logits0, defer_accept)
    for k, v in draft0.items():
        copy_into(vars(proposer), k, v)
    if (
        defer_accept
    ):  # the captured run then starts with the fused accept + preprocess on these buffers
        proposer.accept(buffers["accept_tokens"], buffers["accept_num"])
    tensors = dict(buffers, **{f"proposer.{k}": getattr(proposer, k) for k in MTP_BUFFERS})
    before = pointers(tensors)
    graph = Graph(lambda: mtp_step(buffers, proposer), **BACKENDS[backend])

    def load(state, draft_side, logits):
        for k, v in state.items():
            copy_into(buffers, k, v)
        for k, v in draft_side.items():
            copy_into(vars(proposer), k, v)
        for buf, v in zip(model.logits, logits):
            buf.copy_(paddle.to_tensor(v, place=paddle.CPUPlace()), True)

    # New inputs into the captured buffers, one replay each.
    for state, draft_side, logits in cases:
        load(state, draft_side, logits)
        graph.replay()
        step = [(state["target_tokens"], logits)]
        want = eager_mtp_steps(state, draft_side, step, "gpu", defer_accept)
        want_cpu = eager_mtp_steps(state, draft_side, step, "cpu", defer_accept)
        got = mtp_results(buffers, proposer)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{backend}: {k}")
            np.testing.assert_array_equal(want[k], want_cpu[k], err_msg=f"GPU vs CPU: {k}")
        assert (got["seq_lens_this_time"] > 0).any()

    # The decode loop: the state stays on the device, only the target's tokens and the draft logits
    # change between replays.
    state, draft_side, logits = cases[0]
    load(state, draft_side, logits)
    steps = [
        (
            target_rows(rng),
            [rng.integers(0, 3, (S, VOCAB)).astype(np.float32) for _ in range(MTP_STEPS)],
        )
        for _ in range(5)
    ]
    for target, step_logits in steps:
        copy_into(buffers, "target_tokens", target)
        for buf, v in zip(model.logits, step_logits):
            buf.copy_(paddle.to_tensor(v, place=paddle.CPUPlace()), True)
        graph.replay()
    want = eager_mtp_steps(state, draft_side, steps, "cpu", defer_accept)
    got = mtp_results(buffers, proposer)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"{backend} MTP loop: {k}")
    assert pointers(tensors) == before


# ---- FastDeploy's step ops: a TOPP step (verify_draft_tokens + unified_update_model_status) ----------

from tests.reference import verify_draft_tokens as vd_ref  # noqa: E402

TOPP_OUTPUTS = (
    "step_output_ids",
    "step_output_len",
    "step_input_ids",
    "step_idx",
    "token_ids_all",
    "seq_lens_decoder",
    "stop_flags",
    "has_running_seqs",
)


def topp_state(rng: np.random.Generator, R: int = 96, K: int = 3, C: int = 6) -> dict:
    """Every slot decoding with K drafts, candidate sets of C ids over a wide vocabulary (so the draws
    differ), no end token and no length limit in reach: each replay verifies and draws again."""
    case = vd_ref.random_case(rng, R, K, 1000, vd_ref.TOPP, C=C, rows=0)
    W = K + 1
    slt = np.full(R, W, np.int32)
    cu = (np.arange(R + 1) * W).astype(np.int32)
    T = R * W
    scores = rng.random((T, C)).astype(np.float32)
    return dict(
        step_output_ids=np.full((R, W), -1, np.int64),
        step_output_len=np.zeros(R, np.int32),
        step_input_ids=case["step_input_ids"],
        candidate_ids=rng.integers(0, 1000, (T, C)).astype(np.int64),
        candidate_scores=scores / scores.sum(axis=1, keepdims=True),
        candidate_lens=np.full(T, C, np.int32),
        topp=np.ones(R, np.float32),
        stop_flags=np.zeros(R, bool),
        seq_lens_encoder=np.zeros(R, np.int32),
        seq_lens_decoder=np.full(R, 50, np.int32),
        seq_lens_this_time=slt,
        end_tokens=np.zeros(0, np.int64),
        is_block_step=np.zeros(R, bool),
        cu_seqlens_q_output=cu[:R].copy(),
        reasoning_status=np.zeros(R, np.int32),
        max_dec_len=np.full(R, 1 << 40, np.int64),
        step_idx=rng.integers(0, 100, R).astype(np.int64),
        seeds=rng.integers(0, 2**62, R).astype(np.int64),
        has_running_seqs=np.zeros(1, bool),
        token_ids_all=np.zeros((R, 512), np.int64),
        prompt_lens=np.full(R, 8, np.int64),
    )


def topp_step(t: dict) -> None:
    call_named(verify_draft_tokens, t, 512, 2, 0, False, False, seeds=t["seeds"])
    call_named(unified_update_model_status, t, names={"is_paused": "is_block_step"})


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_topp_step_replays_draw_new_tokens(backend):
    """A captured TOPP step replayed twice: the update advances step_idx on the device, so the second
    replay draws different tokens; each replay equals the CPU ops run from the same state."""
    state = topp_state(np.random.default_rng(5))
    buffers = {k: to_place(v, "gpu") for k, v in state.items()}
    cpu = {k: to_place(v, "cpu") for k, v in state.items()}
    graph = Graph(lambda: topp_step(buffers), **BACKENDS[backend])
    drawn = []
    for replay in range(2):
        graph.replay()
        topp_step(cpu)
        for k in TOPP_OUTPUTS:
            np.testing.assert_array_equal(
                buffers[k].numpy(), cpu[k].numpy(), err_msg=f"replay {replay}: {k}"
            )
        ids, n = buffers["step_output_ids"].numpy(), buffers["step_output_len"].numpy()
        drawn.append(ids[np.arange(len(n)), n - 1])  # each row's last token: the TOPP draw
    assert (drawn[0] != drawn[1]).mean() > 0.5, "a replay drew the same tokens as the one before"
