"""Sampled requests through the runner mirror, for the tests and the exactness check: synthetic texts
that repeat themselves (so that n-gram and suffix drafts hit), a bigram draft model for MTP, and one
function that runs a list of sampled requests with a method and a verification strategy."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from examples.oracle import SampledOracle

METHODS = ("naive", "ngram", "suffix", "mtp")
END = 0


def synthetic_texts(
    num: int, vocab_size: int, *, prompt_len: int = 24, answer_len: int = 40, seed: int = 0
) -> List[Tuple[List[int], List[int]]]:
    """(prompt, answer) pairs over tokens 1 .. V-1 (0 is the end token): each text a chain of
    phrases of 3 to 6 tokens drawn from a small phrase book, so that its n-grams recur."""
    rng = np.random.default_rng(seed)
    book = [rng.integers(1, vocab_size, int(rng.integers(3, 7))).tolist() for _ in range(6)]
    out = []
    for _ in range(num):
        text: List[int] = []
        while len(text) < prompt_len + answer_len:
            text += book[int(rng.integers(0, len(book)))]
        out.append((text[:prompt_len], text[prompt_len : prompt_len + answer_len]))
    return out


class BigramDraft:
    """The MTP draft model: the most frequent successor of the newest token in ``sequences`` (one-hot
    logits, copied to the place of the proposer's buffers)."""

    def __init__(
        self, sequences: Sequence[Sequence[int]], vocab_size: int, num_slots: int, place
    ) -> None:
        import paddle

        from fastdeploy_spec.buffers import resolve_place

        counts = np.zeros((vocab_size, vocab_size), np.int64)
        for q in sequences:
            for a, b in zip(q[:-1], q[1:]):
                counts[a, b] += 1
        self.next_token = counts.argmax(axis=1)
        self.vocab_size = vocab_size
        self.logits = paddle.to_tensor(
            np.zeros((num_slots, vocab_size), np.float32), place=resolve_place(place)
        )

    def __call__(self, input_ids, hidden_states=None):
        from fastdeploy_spec.buffers import copy_from_host

        ids = np.asarray(input_ids.numpy()).reshape(-1)
        host = np.zeros((len(ids), self.vocab_size), np.float32)
        host[np.arange(len(ids)), self.next_token[np.clip(ids, 0, self.vocab_size - 1)]] = 1.0
        copy_from_host(self.logits, host)
        return self.logits


def run_sampled(
    method: str,
    texts: Sequence[Tuple[Sequence[int], Sequence[int]]],
    seeds: Sequence[int],
    *,
    vocab_size: int,
    max_dec_len: int,
    temperature: float = 0.8,
    top_p: float = 0.9,
    top_k: int = 0,
    order: Optional[Sequence[int]] = None,
    slots: int = 8,
    k: int = 3,
    verify_strategy: str = "target_match",
    place: str = "cpu",
    oracle_seed: int = 0,
    runner_out: Optional[list] = None,
) -> Dict[int, List[int]]:
    """Runs request i (prompt ``texts[i][0]``, seed ``seeds[i]``) for every i, in ``order``, with
    ``method`` (``naive`` is plain decoding) on ``slots`` slots; returns the outputs by request index.
    The target is a :class:`SampledOracle` over each request's text."""
    from fastdeploy_spec.config import SpeculativeConfig
    from fastdeploy_spec.proposers import create_proposer
    from fastdeploy_spec.runner import Request, SpecRunner

    order = range(len(texts)) if order is None else order
    oracle = SampledOracle(
        {i: list(p) + list(a) for i, (p, a) in enumerate(texts)}, vocab_size, END, seed=oracle_seed
    )
    width = max(len(p) for p, _ in texts) + max_dec_len + 2
    cfg = SpeculativeConfig(
        method=method,
        num_speculative_tokens=0 if method == "naive" else k,
        max_ngram_size=3,
        min_ngram_size=1,
        num_model_steps=1,
    )
    draft = (
        BigramDraft([list(p) for p, _ in texts], vocab_size, slots, place)
        if method == "mtp"
        else None
    )
    proposer = create_proposer(
        cfg, draft_model=draft, max_num_seqs=slots, max_model_len=width, place=place
    )
    runner = SpecRunner(
        cfg,
        oracle,
        max_num_seqs=slots,
        max_model_len=width,
        end_tokens=[END],
        place=place,
        proposer=proposer,
        verify_strategy=verify_strategy,
    )
    requests = [
        Request(
            i,
            list(texts[i][0]),
            max_dec_len,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=int(seeds[i]),
        )
        for i in order
    ]
    out = runner.run(requests)
    if runner_out is not None:
        runner_out.append(runner)
    return out
