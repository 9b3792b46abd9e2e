"""The demo's data: requests made from Python standard-library sources, their answers, and the MTP
draft model learned from the prompts."""

from __future__ import annotations

import builtins
import io
import keyword
import re
import sysconfig
import tokenize as pytokenize
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence

import numpy as np

# Fixed, so that every run decodes the same text; all of them exist in Python 3.8 .. 3.13.
MODULES = (
    "textwrap",
    "shlex",
    "dataclasses",
    "queue",
    "sched",
    "glob",
    "fnmatch",
    "string",
    "contextlib",
    "copy",
    "calendar",
    "functools",
    "pprint",
    "fractions",
    "tempfile",
    "selectors",
)
EOS = "<eos>"
# Identifiers, whitespace runs (a newline with its indentation is one token), single punctuation
# characters: the tokens cover the text exactly, so "".join(tokens) gives it back.
TOKEN_RE = re.compile(r"\w+|\s+|[^\w\s]")
NOT_RENAMED = set(keyword.kwlist) | set(dir(builtins)) | {"self", "cls"}


def tokenize(text: str) -> List[str]:
    return TOKEN_RE.findall(text)


class Vocabulary:
    """Token strings <-> ids; id 0 is the end token, the rest sorted so that ids are reproducible."""

    def __init__(self, texts: Sequence[Sequence[str]]) -> None:
        self.tokens = [EOS] + sorted({t for toks in texts for t in toks})
        self.ids = {t: i for i, t in enumerate(self.tokens)}

    def encode(self, tokens: Sequence[str]) -> List[int]:
        return [self.ids[t] for t in tokens]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.tokens[i] for i in ids if i != 0)

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class Task:
    name: str
    prompt: List[str]  # tokens
    answer: List[str]  # tokens of the edited text
    renamed: str
    new_name: str
    max_dec_len: int  # tokens the request may generate, the end token included


def rename_identifier(source: str, prefix_chars: int) -> tuple[str, str, str]:
    """Renames the identifier most used in code (not in strings or comments) within the first
    ``prefix_chars`` characters (the whole file if that prefix has no code): a refactoring rename.
    Returns (edited source, old, new)."""
    line_starts = np.cumsum([0] + [len(line) for line in source.splitlines(keepends=True)])
    names = [
        (int(line_starts[t.start[0] - 1]) + t.start[1], t.string)
        for t in pytokenize.generate_tokens(io.StringIO(source).readline)
        if t.type == pytokenize.NAME
        and t.string not in NOT_RENAMED
        and len(t.string) >= 3
        and not t.string.startswith("__")
    ]
    counts = Counter(n for off, n in names if off < prefix_chars) or Counter(n for _, n in names)
    old = min(counts, key=lambda n: (-counts[n], n))
    new = f"{old}_v2"
    pieces, prev = [], 0
    for off, n in names:
        if n == old:
            pieces += [source[prev:off], new]
            prev = off + len(old)
    return "".join(pieces) + source[prev:], old, new


def make_tasks(max_prompt_tokens: int, num_requests: int) -> List[Task]:
    """One task per stdlib module (cycling through MODULES): the truncated source, then the same text
    with its most used identifier renamed in code. Every fourth request is capped below its answer's
    length, so that it stops on max_dec_len rather than on the end token."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    tasks = []
    for i in range(num_requests):
        name = MODULES[i % len(MODULES)]
        source = (stdlib / f"{name}.py").read_text(encoding="utf-8")
        prompt = tokenize(source)[:max_prompt_tokens]
        edited, old, new = rename_identifier(source, sum(map(len, prompt)))
        # A rename maps one word token to one word token, so the answer has the prompt's token count.
        answer = tokenize(edited)[: len(prompt)]
        cap = len(answer) + 1 if i % 4 != 3 else (3 * len(answer)) // 4
        tasks.append(Task(f"{name}#{i}", prompt, answer, old, new, cap))
    return tasks


class BigramDraft:
    """The MTP demo's draft model: the most frequent successor of each token in the prompts.

    ``draft(input_ids, hidden_states)`` takes int64 [S, 1] token ids (a Paddle tensor on any place,
    copied to the host, or an array) and returns float32 [S, V] NumPy logits, 1 at the predicted token and 0 elsewhere (ties between
    successors go to the lower id; a token never followed in the prompts predicts the end token 0,
    and so does the -1 of a slot with no token yet). It sees only the newest token: it guesses the
    next one from local statistics, as a real draft head would from its context, and it knows
    nothing of the answer (the renamed identifier never occurs in the prompts).
    """

    def __init__(self, sequences: Sequence[Sequence[int]], vocab_size: int) -> None:
        pairs = np.concatenate(
            [np.stack([np.asarray(q[:-1]), np.asarray(q[1:])], 1) for q in sequences if len(q) > 1]
        ).astype(np.int64)
        pairs, count = np.unique(pairs, axis=0, return_counts=True)
        pairs = pairs[
            np.lexsort((pairs[:, 1], -count, pairs[:, 0]))
        ]  # by token, most frequent first
        head = np.ones(len(pairs), bool)
        head[1:] = pairs[1:, 0] != pairs[:-1, 0]
        self.vocab_size = int(vocab_size)
        self.next_token = np.zeros(self.vocab_size, np.int64)
        self.next_token[pairs[head, 0]] = pairs[head, 1]

    def __call__(self, input_ids, hidden_states=None) -> np.ndarray:
        ids = np.asarray(input_ids.numpy() if hasattr(input_ids, "numpy") else input_ids).reshape(
            -1
        )
        predicted = self.next_token[np.clip(ids, 0, self.vocab_size - 1)]
        predicted[ids < 0] = 0
        logits = np.zeros((len(ids), self.vocab_size), np.float32)
        logits[np.arange(len(ids)), predicted] = 1.0
        return logits
