"""The share-inputs buffers of a FastDeploy-style GPU model runner (docs/contract/runner.md).

Names, shapes and dtypes follow upstream, so the proposers and ops can run on a real runner's dict.
Buffers are made in NumPy and copied to their place once: no Paddle kernel runs on device data (on a
GPU whose architecture the installed Paddle lacks, Paddle's own kernels cannot be trusted).
"""

from __future__ import annotations

from typing import Dict

import numpy as np
import paddle

from fastdeploy_spec.config import SpeculativeConfig

# name -> (shape from (S, W, K + 1), dtype, fill value; None fills with K)
_LAYOUT = {
    "token_ids_all": (lambda S, W, K1: (S, W), np.int64, -1),
    "prompt_lens": (lambda S, W, K1: (S, 1), np.int64, 0),
    "step_idx": (lambda S, W, K1: (S, 1), np.int64, 0),
    "max_dec_len": (lambda S, W, K1: (S, 1), np.int64, 0),
    "seq_lens_this_time": (lambda S, W, K1: (S,), np.int32, 0),
    "seq_lens_encoder": (lambda S, W, K1: (S,), np.int32, 0),
    "seq_lens_decoder": (lambda S, W, K1: (S,), np.int32, 0),
    "stop_flags": (lambda S, W, K1: (S, 1), np.bool_, True),
    "draft_tokens": (lambda S, W, K1: (S, K1), np.int64, -1),
    "accept_tokens": (lambda S, W, K1: (S, K1), np.int64, -1),
    "accept_num": (lambda S, W, K1: (S,), np.int32, 0),
    "actual_draft_token_num": (lambda S, W, K1: (S,), np.int32, None),
    "cu_seqlens_q_output": (lambda S, W, K1: (S + 1,), np.int32, 0),
    "cu_batch_token_offset": (lambda S, W, K1: (S + 1,), np.int32, 0),
}

BUFFER_NAMES = tuple(_LAYOUT)


def resolve_place(place: str | paddle.CPUPlace | paddle.CUDAPlace | None):
    """'cpu', 'gpu', 'gpu:N' or a Paddle place -> a Paddle place."""
    if place is None or isinstance(place, str):
        name = (place or "cpu").lower()
        if name == "cpu":
            return paddle.CPUPlace()
        if name.startswith("gpu"):
            return paddle.CUDAPlace(int(name.split(":")[1]) if ":" in name else 0)
        raise ValueError(f"unknown place {place!r}; expected 'cpu', 'gpu' or 'gpu:N'")
    return place


def copy_from_host(tensor: paddle.Tensor, host: np.ndarray) -> None:
    """Writes ``host`` (the tensor's shape and dtype) into ``tensor``'s allocation, where it lives.

    A memcpy (host->device for a GPU tensor), no Paddle kernel; the allocation stays the same, so a
    captured CUDA graph keeps seeing the buffer. ``Tensor.set_value`` is no substitute: it re-allocates
    the tensor on Paddle's *default* place, which moves a GPU buffer to the host under
    ``paddle.set_device("cpu")`` (and a CPU buffer to the GPU under a GPU Paddle's default).
    """
    src = paddle.to_tensor(np.ascontiguousarray(host), place=paddle.CPUPlace())
    if src.dtype != tensor.dtype or list(src.shape) != list(tensor.shape):
        raise ValueError(
            f"copy_from_host: host data {src.dtype} {list(src.shape)} does not match the "
            f"tensor's {tensor.dtype} {list(tensor.shape)}"
        )
    tensor.copy_(src, True)


def make_share_inputs(
    max_num_seqs: int, max_model_len: int, config: SpeculativeConfig, place=None
) -> Dict[str, paddle.Tensor]:
    """Allocate the speculative-decoding share-inputs buffers of ``max_num_seqs`` slots.

    Parameters
    ----------
    max_num_seqs : int
        S, the slots of the runner.
    max_model_len : int
        W, the width of ``token_ids_all`` (prompt plus generated tokens of a slot).
    config : SpeculativeConfig
        Gives K (``num_speculative_tokens``): draft buffers are [S, K + 1].
    place : str or Paddle place, optional
        Where the buffers live ('cpu' by default, 'gpu').

    Returns
    -------
    dict of str to paddle.Tensor
        ``token_ids_all`` [S, W] int64 (-1), ``prompt_lens``, ``step_idx``, ``max_dec_len`` [S, 1]
        int64, ``seq_lens_this_time/encoder/decoder`` [S] int32, ``stop_flags`` [S, 1] bool (True:
        every slot starts free), ``draft_tokens``, ``accept_tokens`` [S, K + 1] int64,
        ``accept_num`` [S] int32, ``actual_draft_token_num`` [S] int32 (= K),
        ``cu_seqlens_q_output``, ``cu_batch_token_offset`` [S + 1] int32.

    Examples
    --------
    >>> from fastdeploy_spec.buffers import make_share_inputs
    >>> from fastdeploy_spec.config import SpeculativeConfig
    >>> bufs = make_share_inputs(4, 64, SpeculativeConfig(num_speculative_tokens=3))
    >>> list(bufs["draft_tokens"].shape), str(bufs["seq_lens_this_time"].dtype)
    ([4, 4], 'paddle.int32')
    """
    if max_num_seqs < 0 or max_model_len < 1:
        raise ValueError(
            f"need max_num_seqs >= 0 and max_model_len >= 1, got {max_num_seqs}, {max_model_len}"
        )
    target = resolve_place(place)
    k1 = config.draft_width
    out = {}
    for name, (shape, dtype, fill) in _LAYOUT.items():
        value = config.num_speculative_tokens if fill is None else fill
        host = np.full(shape(max_num_seqs, max_model_len, k1), value, dtype=dtype)
        out[name] = paddle.to_tensor(host, place=target)
    return out
