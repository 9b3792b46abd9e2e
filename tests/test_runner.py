"""The runner mirror against a plain-Python model of the speculative decode loop, and end to end."""

from __future__ import annotations

import collections
import importlib.util
import json
import math

import numpy as np
import paddle
import pytest

from examples import LogprobChecker, OracleTarget, oracle_logits
from fastdeploy_spec import transport
from fastdeploy_spec.config import SpeculativeConfig
from fastdeploy_spec.proposers import Proposer
from fastdeploy_spec.runner import Request, SpecRunner, StepObserver
from tests.helpers import PLACES

EOS = 0
VOCAB = 6  # small, so that n-gram matches and chance agreements are common


def answers_and_requests(rng, n, W):
    """Random prompts and answers; caps below, at and above the answer length (+ EOS)."""
    answers, requests = {}, []
    for rid in range(n):
        P = int(rng.integers(1, 12))
        ans = rng.integers(1, VOCAB, int(rng.integers(0, 20))).tolist()
        cap = [len(ans) + 1, len(ans) // 2 + 1, len(ans) + 5, W][rid % 4]
        answers[rid] = ans
        requests.append(Request(rid, rng.integers(1, VOCAB, P).tolist(), cap))
    return answers, requests


def scripted_drafts(ans, rid, s, K):
    """Drafts of request rid at step count s: the true continuation, of a length and with one wrong
    token at a place that vary with (rid, s)."""
    k = (rid + s) % (K + 1)
    d = [(ans[i] if i < len(ans) else EOS) for i in range(s, s + k)]
    bad = (rid * 7 + s) % (K + 1)
    if bad < k:
        d[bad] = (d[bad] + 1) % VOCAB
    return d


class ScriptedProposer(Proposer):
    """Writes scripted_drafts into the share-inputs (host round trip, fine for a test)."""

    def __init__(self, config, answers, slots):
        super().__init__(config)
        self.answers, self.slots = answers, slots

    def _run_impl(self, share_inputs, **_):
        s = share_inputs
        drafts, slt = s["draft_tokens"].numpy(), s["seq_lens_this_time"].numpy()
        enc, dec, step = (
            s["seq_lens_encoder"].numpy(),
            s["seq_lens_decoder"].numpy(),
            s["step_idx"].numpy(),
        )
        for b, req in enumerate(self.slots):
            if req is None or enc[b] > 0 or dec[b] == 0:
                continue
            d = scripted_drafts(
                self.answers[req.request_id],
                req.request_id,
                int(step[b, 0]),
                self.max_draft_token_num,
            )
            drafts[b, 1 : 1 + len(d)] = d
            slt[b] = 1 + len(d)
        for name, host in (("draft_tokens", drafts), ("seq_lens_this_time", slt)):
            s[name].copy_(paddle.to_tensor(host, place=paddle.CPUPlace()), True)


class LoopModel:
    """The decode loop, request by request, in plain Python: FIFO into the lowest free slot; a prefill
    step yields the first answer token; a decoding step accepts the drafts that equal the answer,
    then the answer's next token; a request ends at EOS, at max_dec_len or when its row is full (the
    last two by FastDeploy's length rule: the last token becomes the end token)."""

    def __init__(self, answers, requests, S, W, K):
        self.answers, self.S, self.W, self.K = answers, S, W, K
        self.pending = collections.deque(requests)
        self.slots = [None] * S
        self.prefilled, self.gen, self.done = set(), {}, {}

    def token(self, rid, i):
        ans = self.answers[rid]
        return ans[i] if i < len(ans) else EOS

    def step(self):
        for b in range(self.S):
            if self.slots[b] is None and self.pending:
                req = self.pending.popleft()
                self.slots[b] = req
                self.gen[req.request_id] = []
        for b, req in enumerate(self.slots):
            if req is None:
                continue
            rid, g = req.request_id, self.gen[req.request_id]
            if rid not in self.prefilled:
                self.prefilled.add(rid)
                new = [self.token(rid, 0)]
            else:
                new = []
                for d in scripted_drafts(self.answers[rid], rid, len(g), self.K):
                    if d != self.token(rid, len(g) + len(new)) or d == EOS:
                        break
                    new.append(d)
                if not new or new[-1] != EOS:
                    new.append(self.token(rid, len(g) + len(new)))
            limit = min(req.max_dec_len, self.W - len(req.prompt))
            new = new[: max(0, limit - len(g))]
            g += new
            if len(g) >= limit and EOS not in new:
                g[-1] = (
                    EOS  # FastDeploy's length rule: the token at max_dec_len becomes end_tokens[0]
                )
            if EOS in new or len(g) >= req.max_dec_len or len(req.prompt) + len(g) >= self.W:
                self.done[rid] = list(g)
                self.slots[b] = None


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize(
    "S,K,W,n,seed", [(1, 0, 64, 3, 0), (3, 2, 64, 9, 1), (4, 5, 24, 14, 2), (5, 3, 40, 20, 3)]
)
def test_runner_follows_the_loop_model(S, K, W, n, seed, place):
    rng = np.random.default_rng(seed)
    answers, requests = answers_and_requests(rng, n, W)
    cfg = SpeculativeConfig(method="ngram", num_speculative_tokens=K)
    runner = oracle_runner(cfg, answers, VOCAB, S, W, place)
    runner.proposer = ScriptedProposer(cfg, answers, runner.slots)
    model = LoopModel(answers, requests, S, W, K)
    for r in requests:
        runner.add_request(r)
    steps = 0
    while runner.has_work():
        runner.step()
        model.step()
        steps += 1
        assert [r and r.request_id for r in runner.slots] == [
            r and r.request_id for r in model.slots
        ]
        ids, step_idx = runner.buffers["token_ids_all"].numpy(), runner.buffers["step_idx"].numpy()
        for b, req in enumerate(model.slots):
            if req is not None:
                g, P = model.gen[req.request_id], len(req.prompt)
                assert step_idx[b, 0] == len(g)
                assert ids[b, P : P + len(g)].tolist() == g
        assert steps < 1000
    assert model.slots == [None] * S and not model.pending
    assert runner.outputs == model.done
    for req in requests:  # speculation never changes the output
        full = answers[req.request_id] + [EOS]
        want = full[: min(req.max_dec_len, W - len(req.prompt))]
        want[-1] = EOS  # the answer's end, or the length rule's end token
        assert runner.outputs[req.request_id] == want


def copy_task(n):
    """Prompts whose answers repeat them: what n-gram drafting is for."""
    rng = np.random.default_rng(7)
    prompts = {rid: rng.integers(1, 50, 40).tolist() for rid in range(n)}
    answers = {rid: p[5:] + p[:20] for rid, p in prompts.items()}
    return prompts, answers


def oracle_runner(cfg, answers, vocab, S, W, place, **kw) -> SpecRunner:
    """A runner of S slots and W tokens whose target answers ``answers`` (OracleTarget), ending at
    EOS."""
    target = OracleTarget(answers, vocab, EOS)
    return SpecRunner(
        cfg, target, max_num_seqs=S, max_model_len=W, end_tokens=[EOS], place=place, **kw
    )


def run_copy_task(method, K, place, n=6):
    prompts, answers = copy_task(n)
    cfg = SpeculativeConfig(method=method, num_speculative_tokens=K, max_ngram_size=3)
    runner = oracle_runner(cfg, answers, 50, 4, 128, place)
    out = runner.run([Request(rid, p, 100) for rid, p in prompts.items()])
    return runner, out, answers


@pytest.mark.parametrize("place", PLACES)
def test_ngram_saves_steps_without_changing_output(place):
    naive, naive_out, answers = run_copy_task("naive", 0, place)
    ngram, ngram_out, _ = run_copy_task("ngram", 4, place)
    want = {rid: a + [EOS] for rid, a in answers.items()}
    assert naive_out == want and ngram_out == want
    assert naive.stats.acceptance_rate == 0 and naive.stats.tokens_per_decode_step == 1.0
    assert ngram.stats.steps < naive.stats.steps / 2
    assert ngram.stats.acceptance_rate > 0.5


@pytest.mark.gpu
def test_gpu_run_equals_cpu_run():
    cpu, cpu_out, _ = run_copy_task("ngram", 4, "cpu")
    gpu, gpu_out, _ = run_copy_task("ngram", 4, "gpu")
    assert gpu_out == cpu_out
    assert (gpu.stats.steps, gpu.stats.drafts_proposed, gpu.stats.drafts_accepted) == (
        cpu.stats.steps,
        cpu.stats.drafts_proposed,
        cpu.stats.drafts_accepted,
    )


def test_oracle_goes_off_track_after_a_wrong_input():
    from fastdeploy_spec.runner import VerifyBatch

    oracle = OracleTarget({"r": [3, 4, 5, 6]}, vocab_size=1000, end_token=EOS)
    batch = VerifyBatch(
        ["r"], np.array([[3, 4, 9, 6]]), np.array([4], np.int32), np.array([False]), np.array([1])
    )
    out = oracle(batch)[0].tolist()
    assert out[:2] == [4, 5]  # on track: column 0 = answer[0], draft 4 = answer[1]
    assert out[2] != 6 and out[3] != EOS  # after the wrong draft 9: unrelated tokens


class NoLogits:
    vocab_size = VOCAB

    def __call__(self, batch):
        return np.zeros(batch.tokens.shape, np.int64)


@pytest.mark.parametrize(
    "target,K,k,error,match",
    [
        (OracleTarget({}, VOCAB, EOS), 6, 2, ValueError, r"K \+ 1 = 7 tokens per slot.*K <= 5"),
        (OracleTarget({}, VOCAB, EOS), 2, 21, ValueError, r"logprobs must be in \[0, 20\]"),
        (NoLogits(), 2, 2, TypeError, r"target.logits\(batch, tokens\)"),
    ],
)
def test_logprobs_bad_setup(target, K, k, error, match):
    with pytest.raises(error, match=match):
        SpecRunner(
            SpeculativeConfig(num_speculative_tokens=K),
            target,
            max_num_seqs=1,
            max_model_len=8,
            end_tokens=[EOS],
            logprobs=k,
        )


def log_softmax_row(token, position, V):
    """Pure Python: the oracle's logits row (as oracle_logits documents it), its log-softmax."""
    row = [((v * 40503 + position * 7919) % 65521) / 65521 for v in range(V)]
    row[token] = 1.0 + math.log(V)
    top = max(row)
    lse = top + math.log(sum(math.exp(x - top) for x in row))
    return [x - lse for x in row]


def test_oracle_logits_peak_at_the_token_without_ties():
    tokens, positions = np.array([0, 5, 2, 5]), np.array([0, 0, 7, 300])
    logits = oracle_logits(tokens, positions, 6)
    assert logits.dtype == np.float32 and logits.shape == (4, 6)
    assert np.argmax(logits, axis=1).tolist() == tokens.tolist()
    assert all(len(set(row.tolist())) == 6 for row in logits)
    big = oracle_logits(np.array([1234]), np.array([3]), 65521)
    assert len(np.unique(big)) == 65521
    with pytest.raises(ValueError, match="vocab_size must be in"):
        oracle_logits(tokens, positions, 65522)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize(
    "S,K,k,W,n,seed", [(3, 3, 2, 64, 7, 11), (2, 5, 0, 40, 5, 12), (4, 1, 20, 48, 9, 13)]
)
def test_logprobs_arrive_for_every_accepted_token(S, K, k, W, n, seed, place):
    """Step by step against LoopModel: after each step (drained), each request's received tokens are
    its tokens so far; every logprob, rank and top-k is the pure-Python log-softmax of its row."""
    rng = np.random.default_rng(seed)
    answers, requests = answers_and_requests(rng, n, W)
    cfg = SpeculativeConfig(method="ngram", num_speculative_tokens=K)
    with oracle_runner(cfg, answers, VOCAB, S, W, place, logprobs=k) as runner:
        runner.proposer = ScriptedProposer(cfg, answers, runner.slots)
        checker = LogprobChecker()
        runner.observers.append(checker)
        model = LoopModel(answers, requests, S, W, K)
        for r in requests:
            runner.add_request(r)
        while runner.has_work():
            runner.step()
            model.step()
            runner.drain_logprobs(timeout_s=30)
            for rid, gen in model.gen.items():
                assert [t.token for t in runner.logprobs.get(rid, [])] == gen
        st = runner.stats
        assert (
            st.logprob_messages_sent
            == st.logprob_messages_received
            == checker.messages_checked
            == st.steps
        )
        assert st.logprob_tokens_received == checker.tokens_verified == st.tokens_generated
        queue_id = runner.logprob_queue_id
    assert transport.queue_stats(queue_id) is None  # removed by close()
    for rid, got in runner.logprobs.items():
        for i, t in enumerate(got):
            if t.token == EOS and i < len(answers[rid]):
                continue  # FastDeploy's length rule put the end token where the row has another
            row = log_softmax_row(t.token, i, VOCAB)
            order = sorted(range(VOCAB), key=lambda v: -row[v])
            # float32 log-softmax of the op vs the float64 one here
            assert t.logprob == pytest.approx(row[t.token], rel=1e-6, abs=1e-6)
            pad = max(k - VOCAB, 0)  # k > V: the op leaves the columns past V at -1 / 0
            assert t.rank == 1 and t.topk_token_ids == order[:k] + [-1] * pad
            assert t.topk_logprobs == pytest.approx(
                [row[v] for v in order[:k]] + [0.0] * pad, rel=1e-6, abs=1e-6
            )


def test_mtp_needs_its_proposer():
    with pytest.raises(NotImplementedError, match="pass its proposer"):
        SpecRunner(
            SpeculativeConfig(method="mtp"),
            OracleTarget({}, 2, EOS),
            max_num_seqs=1,
            max_model_len=8,
            end_tokens=[EOS],
        )


@pytest.mark.parametrize("prompt", [[], list(range(1, 9))])
def test_bad_prompt_length(prompt):
    runner = SpecRunner(
        SpeculativeConfig(),
        OracleTarget({}, 10, EOS),
        max_num_seqs=1,
        max_model_len=8,
        end_tokens=[EOS],
    )
    with pytest.raises(ValueError, match=r"prompt length \d+ must be in \[1, 7\]"):
        runner.add_request(Request("r", prompt, 4))


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_demo_runs_and_checks_its_output(tmp_path, device, capsys):
    from examples import demo

    rc = demo.main(
        [
            "--requests",
            "5",
            "--slots",
            "3",
            "--max-prompt-tokens",
            "300",
            "--device",
            device,
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "output check (ngram): 5/5 requests identical" in out
    assert (tmp_path / "demo.json").exists()
    if importlib.util.find_spec("matplotlib") is not None:  # the plot is the optional `demo` extra
        assert (tmp_path / "demo.png").exists()


@pytest.mark.parametrize(
    "extra,label", [([], "mtp"), (["--mtp-strategy", "with_ngram", "--logprobs", "3"], "mtp+ngram")]
)
def test_demo_mtp(tmp_path, capsys, extra, label):
    from examples import demo

    rc = demo.main(
        [
            "--method",
            "mtp",
            "--requests",
            "3",
            "--slots",
            "2",
            "--max-prompt-tokens",
            "150",
            "--device",
            "cpu",
            "--out",
            str(tmp_path),
        ]
        + extra
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert f"output check ({label}): 3/3 requests identical" in out
    report = json.loads((tmp_path / "demo.json").read_text())
    mtp = report["results"][1]
    assert mtp["method"] == label and mtp["drafts_accepted"] > 0
    assert mtp["steps"] < report["results"][0]["steps"]
    if "--logprobs" in extra:
        lp = mtp["logprobs"]
        assert lp["messages_received"] == mtp["steps"]
        assert lp["tokens_match_oracle"] == lp["tokens_bit_exact"] == mtp["tokens_generated"]
        assert f"logprob check ({label}, top-3): {mtp['steps']}/{mtp['steps']} messages" in out


def test_demo_device_auto_is_cpu_without_gpu():
    from examples import demo
    from tests.helpers import gpu_available

    assert demo.resolve_device("auto") == ("gpu" if gpu_available() else "cpu")
    assert demo.resolve_device("cpu") == "cpu"


def test_bigram_draft():
    from examples.demo import BigramDraft

    draft = BigramDraft([[1, 2, 1, 3, 1, 2], [4, 5]], vocab_size=7)
    logits = draft(paddle.to_tensor(np.array([[1], [4], [2], [6], [-1]], np.int64)))
    assert logits.shape == (5, 7) and (logits.sum(axis=1) == 1).all()
    # 1 -> 2 (twice, over 3 once); 4 -> 5; 2 -> 1; 6 never followed, -1 no token: the end token 0
    assert logits.argmax(axis=1).tolist() == [2, 5, 1, 0, 0]


def test_library_never_imports_the_test_machinery():
    """Every library module loads without the examples, the benchmarks or the tests."""
    import subprocess
    import sys

    from fastdeploy_spec.transport import child_env

    library = [
        "fastdeploy_spec." + m
        for m in ("buffers", "config", "logprobs", "ops", "proposers", "runner", "transport")
    ]
    code = (
        f"import sys, zlib; [__import__(m) for m in {library!r}]; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('examples', "
        "'benchmarks', 'tests')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), check=True
    ).stdout
    assert out.strip() == "[]"


class TamperedRows(LogprobChecker):
    """Changes one bit of a score the device computed, before the message arrives."""

    def on_step(self, runner, record):
        super().on_step(runner, record)
        want = self.expected[record.index]
        if want["cu"][-1] > 0:
            want["scores"].view(np.int32)[0, 0] ^= 1


def test_logprob_checker_finds_a_changed_row():
    answers = {0: [1, 2, 3]}
    with SpecRunner(
        SpeculativeConfig(method="ngram", num_speculative_tokens=2),
        OracleTarget(answers, VOCAB, EOS),
        max_num_seqs=1,
        max_model_len=16,
        end_tokens=[EOS],
        logprobs=2,
    ) as runner:
        runner.observers.append(TamperedRows())
        runner.add_request(Request(0, [1, 2], 8))
        with pytest.raises(RuntimeError, match="the rows received differ from the rows computed"):
            runner.step()
            runner.drain_logprobs(timeout_s=30)


class _MessagesBySlot(StepObserver):
    """Per step: the tokens each slot's logprob message carried, and the lengths it was sent with."""

    def __init__(self):
        self.tokens, self.lengths = {}, {}

    def on_step(self, runner, record):
        s = runner.buffers
        self.lengths[record.index] = (
            s["seq_lens_decoder"].numpy().copy(),
            s["prompt_lens"].numpy().ravel(),
        )

    def on_logprob_message(self, runner, message, record):
        self.tokens[record.index] = [list(slot.token_ids) for slot in message.slots]


@pytest.mark.parametrize("place", PLACES)
def test_logprob_messages_carry_first_and_last_tokens_with_real_prompt_lens(place):
    """The message goes out with the real prompt lengths. A prefill step's message carries the
    request's first token (seq_lens_decoder has reached the prompt after the update), and the step
    that finishes a request carries its last tokens, EOS included (the finishing slot keeps its
    lengths until the next step); a slot released at the previous step carries nothing."""
    answers = {0: [3, 4, 5, 1, 2, 3], 1: [2], 2: [4, 4]}
    prompts = {0: [3, 4, 5, 1, 2, 3, 4, 5], 1: [5, 5, 1], 2: [1, 2, 3, 4, 5]}
    cfg = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    with SpecRunner(
        cfg,
        OracleTarget(answers, VOCAB, EOS),
        max_num_seqs=2,
        max_model_len=32,
        end_tokens=[EOS],
        place=place,
        logprobs=1,
    ) as runner:
        seen = _MessagesBySlot()
        runner.observers.append(seen)
        records = []
        runner.observers.append(
            type(
                "Records",
                (StepObserver,),
                {"on_step": lambda self, r, record: records.append(record)},
            )()
        )
        runner.run([Request(rid, prompts[rid], 20) for rid in sorted(answers)])
    got = collections.defaultdict(list)
    first_step, last_step = {}, {}
    for rec in records:
        dec, prompt_lens = seen.lengths[rec.index]
        for b, rid in enumerate(rec.request_ids):
            tokens = seen.tokens[rec.index][b]
            if rid is None:
                assert tokens == []
                continue
            assert prompt_lens[b] == len(prompts[rid]) and dec[b] >= prompt_lens[b]
            assert len(tokens) == rec.accept_num[b]
            got[rid] += tokens
            first_step.setdefault(rid, rec)
            if rid in rec.finished:
                last_step[rid] = (rec, tokens)
    for rid, ans in answers.items():
        assert got[rid] == ans + [EOS] == runner.outputs[rid]
        rec = first_step[rid]
        b = rec.request_ids.index(rid)
        assert rec.is_prefill[b] and seen.tokens[rec.index][b] == ans[:1]
        rec, tokens = last_step[rid]
        assert tokens and tokens[-1] == EOS and tokens == (ans + [EOS])[-len(tokens) :]
    assert any(rid is None for r in records for rid in r.request_ids)  # released slots were seen
