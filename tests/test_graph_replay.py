"""CUDA-graph capture and replay of a decode step: ngram_match, speculate_verify_greedy and
speculate_step_update, captured once on fixed device buffers.

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
"""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np
import paddle
import pytest

from fastdeploy_spec.ops import ngram_match, speculate_step_update, speculate_verify_greedy
from tests.conftest import to_place

pytestmark = pytest.mark.gpu

S, W, K, VOCAB, END = 37, 64, 4, 4, 3
THRESHOLD = 128
OUTPUTS = ("draft_tokens", "seq_lens_this_time", "accept_tokens", "accept_num", "token_ids_all",
           "step_idx", "stop_flags", "seq_lens_encoder", "seq_lens_decoder")


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
        ids[b, P:P + s] = rng.integers(0, VOCAB, s)
        step_idx[b] = s
        dec[b] = P + s - 1
        slt[b] = 1
        stop[b] = kind == "stopped"
    draft_tokens = rng.integers(0, VOCAB, (S, K + 1))
    for b in range(S):
        if step_idx[b] > 0:
            draft_tokens[b, 0] = ids[b, prompt_lens[b, 0] + step_idx[b, 0] - 1]
    return dict(
        token_ids_all=ids, prompt_lens=prompt_lens, step_idx=step_idx,
        max_dec_len=step_idx + rng.integers(1, 12, (S, 1)),
        actual_draft_token_num=np.full(S, K, np.int32), draft_tokens=draft_tokens.astype(np.int64),
        seq_lens_this_time=slt, seq_lens_encoder=enc, seq_lens_decoder=dec, stop_flags=stop,
        accept_tokens=np.full((S, K + 1), -1, np.int64), accept_num=np.zeros(S, np.int32),
        target_tokens=rng.integers(0, VOCAB, (S, K + 1)).astype(np.int64),
        end_tokens=np.array([END], np.int64),
    )


def decode_step(t: dict, pad_to_max: bool = False) -> None:
    ngram_match(t["token_ids_all"], t["prompt_lens"], t["step_idx"], t["actual_draft_token_num"],
                t["draft_tokens"], t["seq_lens_this_time"], t["seq_lens_encoder"],
                t["seq_lens_decoder"], t["max_dec_len"], 3, K, pad_to_max, threshold=THRESHOLD)
    speculate_verify_greedy(t["target_tokens"], t["accept_tokens"], t["accept_num"], t["step_idx"],
                            t["stop_flags"], t["seq_lens_encoder"], t["seq_lens_decoder"],
                            t["draft_tokens"], t["seq_lens_this_time"], t["max_dec_len"],
                            t["end_tokens"])
    speculate_step_update(t["accept_tokens"], t["accept_num"], t["token_ids_all"], t["prompt_lens"],
                          t["step_idx"], t["max_dec_len"], t["end_tokens"], t["stop_flags"],
                          t["seq_lens_this_time"], t["seq_lens_encoder"], t["seq_lens_decoder"],
                          t["draft_tokens"])


def eager_steps(state: dict, targets: list, place: str, pad_to_max: bool = False) -> dict:
    """Fresh tensors on `place`, one decode step per entry of `targets` (its target tokens)."""
    t = {k: to_place(v, place) for k, v in state.items()}
    for target in targets:
        t["target_tokens"] = to_place(target, place)
        decode_step(t, pad_to_max)
    return {k: t[k].numpy() for k in OUTPUTS}


def copy_into(buffers: dict, name: str, host: np.ndarray) -> None:
    buffers[name].copy_(paddle.to_tensor(np.ascontiguousarray(host), place=paddle.CPUPlace()), True)


class PaddleGraph:
    def __init__(self, fn):
        from paddle.device.cuda.graphs import CUDAGraph

        self.graph = CUDAGraph()
        self.graph.capture_begin()
        fn()
        self.graph.capture_end()

    def replay(self) -> None:
        self.graph.replay()
        paddle.device.cuda.synchronize()


def load_cudart() -> ctypes.CDLL:
    """The CUDA runtime Paddle loaded (same instance), else one found on the system."""
    with open("/proc/self/maps") as f:
        loaded = sorted({line.split()[-1] for line in f if "libcudart.so" in line})
    candidates = loaded + ["libcudart.so", "libcudart.so.12", "libcudart.so.11.0"]
    candidates += glob.glob(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64",
                                         "libcudart.so*"))
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    pytest.fail(f"no libcudart found (tried {candidates})")


class CudartGraph:
    CAPTURE_MODE_RELAXED = 2

    def __init__(self, fn):
        rt = self.rt = load_cudart()
        rt.cudaGetErrorString.restype = ctypes.c_char_p
        self.stream = paddle.device.cuda.Stream()
        self.handle = ctypes.c_void_p(self.stream.cuda_stream)
        paddle.device.cuda.synchronize()
        with paddle.device.cuda.stream_guard(self.stream):
            self.check(rt.cudaStreamBeginCapture(self.handle, self.CAPTURE_MODE_RELAXED), "begin")
            try:
                fn()
            finally:
                graph = ctypes.c_void_p()
                status = rt.cudaStreamEndCapture(self.handle, ctypes.byref(graph))
        self.check(status, "end capture")
        self.graph, self.exec = graph, ctypes.c_void_p()
        self.check(rt.cudaGraphInstantiateWithFlags(ctypes.byref(self.exec), graph,
                                                    ctypes.c_ulonglong(0)), "instantiate")

    def check(self, status: int, what: str) -> None:
        assert status == 0, f"cudart {what}: {self.rt.cudaGetErrorString(status).decode()}"

    def replay(self) -> None:
        paddle.device.cuda.synchronize()  # the input copies ran on Paddle's stream
        self.check(self.rt.cudaGraphLaunch(self.exec, self.handle), "launch")
        self.check(self.rt.cudaStreamSynchronize(self.handle), "synchronize")

    def __del__(self):
        if getattr(self, "exec", None):
            self.rt.cudaGraphExecDestroy(self.exec)
        if getattr(self, "graph", None):
            self.rt.cudaGraphDestroy(self.graph)


BACKENDS = {"paddle": PaddleGraph, "cudart": CudartGraph}


def pointers(buffers: dict):
    return {k: t.data_ptr() for k, t in buffers.items()} if hasattr(paddle.Tensor, "data_ptr") else None


# pad_to_max: graph mode of ngram_match (FastDeploy #7849), what a runner whose target model is
# captured passes; every decoding slot then verifies K drafts.
@pytest.mark.parametrize("pad_to_max", [False, True], ids=["unpadded", "pad_to_max"])
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_decode_step_replays_like_eager(backend, pad_to_max):
    rng = np.random.default_rng(0)
    states = [random_state(rng) for _ in range(3)]
    buffers = {k: to_place(v, "gpu") for k, v in random_state(rng).items()}
    before = pointers(buffers)
    graph = BACKENDS[backend](lambda: decode_step(buffers, pad_to_max))

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
    targets = [rng.integers(0, VOCAB, (S, K + 1)).astype(np.int64) for _ in range(5)]
    for target in targets:
        copy_into(buffers, "target_tokens", target)
        graph.replay()
    want = eager_steps(state, targets, "cpu", pad_to_max)
    if pad_to_max:  # the captured shape: every decoding slot verifies K drafts
        t = {k: to_place(v, "gpu") for k, v in state.items()}
        ngram_match(t["token_ids_all"], t["prompt_lens"], t["step_idx"], t["actual_draft_token_num"],
                    t["draft_tokens"], t["seq_lens_this_time"], t["seq_lens_encoder"],
                    t["seq_lens_decoder"], t["max_dec_len"], 3, K, True, threshold=THRESHOLD)
        decoding = (state["seq_lens_encoder"] <= 0) & (state["seq_lens_decoder"] != 0)
        assert decoding.any() and (t["seq_lens_this_time"].numpy()[decoding] == K + 1).all()
    for k in OUTPUTS:
        np.testing.assert_array_equal(buffers[k].numpy(), want[k], err_msg=f"{backend} loop: {k}")
    assert pointers(buffers) == before
