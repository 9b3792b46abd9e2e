"""NumPy references of FastDeploy's MTP bookkeeping ops under their upstream contracts
(docs/contract/mtp_state.md): draft_model_preprocess, draft_model_update, draft_model_postprocess,
draft_model_set_value_by_flags, eagle_get_hidden_states, eagle_get_self_hidden_states. Plain loops over
slots, written from the contract; each mutates the arrays of its dict in place (as the op does) or
returns the gather's outputs."""

from __future__ import annotations

import numpy as np

from fastdeploy_spec.ops.mtp_state import (
    HIDDEN,
    POSTPROCESS,
    PREPROCESS,
    SELF_HIDDEN,
    SET_VALUE_BY_FLAGS,
    UPDATE,
)

# Each op's tensors in the binding's order: the wrappers' specs, declared once.
PRE_ORDER = PREPROCESS.tensors
UPD_ORDER = UPDATE.tensors
POST_ORDER = POSTPROCESS.tensors
SVF_ORDER = SET_VALUE_BY_FLAGS.tensors
HIDDEN_ORDER = HIDDEN.tensors
SELF_ORDER = SELF_HIDDEN.tensors

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _sub_sat(a: int, b: int) -> int:
    return min(max(a - b, I64_MIN), I64_MAX)


def _add_sat(a: int, b: int) -> int:
    return min(max(a + b, I64_MIN), I64_MAX)


def _i32(v: int) -> np.int32:
    """Saturated to int32 (the kernels' sums of lengths saturate)."""
    return np.int32(min(max(v, -(2**31)), 2**31 - 1))


def preprocess_ref(t: dict, num_model_step: int, is_splitwise_prefill: bool) -> None:
    B = t["seq_lens_this_time"].reshape(-1).shape[0]
    flat = {
        k: t[k].reshape(-1)
        for k in (
            "stop_flags",
            "seq_lens_this_time",
            "seq_lens_encoder",
            "seq_lens_decoder",
            "step_idx",
            "accept_num",
            "target_model_seq_lens_decoder",
            "target_model_step_idx",
            "target_model_stop_flags",
            "max_dec_len",
        )
    }
    draft, ids, pre, acc = t["draft_tokens"], t["input_ids"], t["pre_ids"], t["accept_tokens"]
    D = pre.shape[1]
    any_runs = False
    for b in range(B):
        t["target_model_draft_tokens"][b, 1:] = -1
        tstep = int(flat["target_model_step_idx"][b])
        at_end = not is_splitwise_prefill and tstep >= _sub_sat(
            int(flat["max_dec_len"][b]), num_model_step
        )
        if flat["target_model_stop_flags"][b] or at_end:
            flat["stop_flags"][b] = True
            for k in ("seq_lens_this_time", "seq_lens_decoder", "seq_lens_encoder", "step_idx"):
                flat[k][b] = 0
            continue
        any_runs = True
        flat["stop_flags"][b] = False
        enc = int(flat["seq_lens_encoder"][b])
        if enc > 0:
            pre[b, 0] = acc[b, 0]
            if enc - 1 < ids.shape[1]:
                ids[b, enc - 1] = acc[b, 0]
            flat["seq_lens_this_time"][b] = enc
            flat["step_idx"][b] = _sub_sat(tstep, 1)
        else:
            n = min(max(int(flat["accept_num"][b]), 0), acc.shape[1], draft.shape[1])
            flat["seq_lens_decoder"][b] = _i32(int(flat["target_model_seq_lens_decoder"][b]) - n)
            flat["step_idx"][b] = _sub_sat(tstep, n)
            for i in range(n):
                draft[b, i] = acc[b, i]
                pos = _sub_sat(tstep, n - i)
                if 0 <= pos < D:
                    pre[b, pos] = acc[b, i]
            flat["seq_lens_this_time"][b] = n
    t["not_need_stop"].reshape(-1)[0] = any_runs


def update_ref(t: dict, max_seq_len: int, substep: int) -> None:
    B = t["seq_lens_this_time"].reshape(-1).shape[0]
    nxt = t["inter_next_tokens"].reshape(-1)
    slt, enc_a, dec_a = (
        t[k].reshape(-1) for k in ("seq_lens_this_time", "seq_lens_encoder", "seq_lens_decoder")
    )
    step_a, stop, maxd = (t[k].reshape(-1) for k in ("step_idx", "stop_flags", "max_dec_len"))
    draft, pre, base = t["draft_tokens"], t["pre_ids"], t["base_model_draft_tokens"]
    D = pre.shape[1]
    rank = stopped = 0
    for b in range(B):
        n = int(slt[b])
        if n <= 0:
            continue
        token = int(nxt[rank]) if rank < nxt.shape[0] else -1
        rank += 1
        if stop[b]:
            stopped += 1
            draft[b, 0] = -1
            base[b, substep + 1] = -1
            slt[b] = 0
            enc_a[b] = 0
            continue
        enc, dec, step = int(enc_a[b]), int(dec_a[b]), int(step_a[b])
        if enc > 0:
            dec_a[b] = _i32(enc + dec)
            enc_a[b] = 0
            if D > 1:
                pre[b, 1] = token
            step_a[b] = _add_sat(step, 1)
            draft[b, 0] = token
            if _add_sat(step, 1) < int(maxd[b]):
                base[b, substep + 1] = token
        elif dec > 0:
            if step >= _sub_sat(int(maxd[b]), 1):
                base[b, substep + 1] = -1
            else:
                dec_a[b] = _i32(dec + n)
                draft[b, 0] = token
                base[b, substep + 1] = token
                step_a[b] = _add_sat(step, n)
                if 0 <= _add_sat(step, n) < D:
                    pre[b, _add_sat(step, n)] = token
        slt[b] = 1
    t["not_need_stop"].reshape(-1)[0] = stopped < B


def postprocess_ref(t: dict) -> None:
    slt = t["base_model_seq_lens_this_time"].reshape(-1)
    enc, stop = t["base_model_seq_lens_encoder"].reshape(-1), t["base_model_stop_flags"].reshape(-1)
    for b in range(slt.shape[0]):
        if stop[b]:
            slt[b] = 0
        elif enc[b] == 0:
            slt[b] = int((t["base_model_draft_tokens"][b] != -1).sum())


def set_value_by_flags_ref(t: dict) -> None:
    slt, stop, step_a = (t[k].reshape(-1) for k in ("seq_lens_this_time", "stop_flags", "step_idx"))
    draft, pre = t["draft_tokens"], t["pre_ids_all"]
    D = pre.shape[1]
    for b in range(slt.shape[0]):
        if slt[b] == 0 or stop[b]:
            continue
        step = int(step_a[b])
        n = min(max(int(slt[b]), 0), draft.shape[1])
        if step > 1:
            for i in range(n):
                if 0 <= step - i < D:
                    pre[b, step - i] = draft[b, n - 1 - i]
        elif step == 1 and D > 1:
            pre[b, 1] = draft[b, 0]
        slt[b] = 1


def _gather(x: np.ndarray, plans) -> tuple[np.ndarray, int]:
    """plans: per slot (in_count, out_count, first, copy)."""
    N = x.shape[0]
    out = np.zeros_like(x)
    i = o = 0
    for in_count, out_count, first, copy in plans:
        for j in range(out_count):
            if o + j >= N:
                break
            src = i + first + j
            if j < copy and 0 <= src < N:
                out[o + j] = x[src]
        i += in_count
        o += out_count
    return out, o


def hidden_ref(t: dict) -> tuple[np.ndarray, int]:
    slt, enc, acc, base = (
        t[k].reshape(-1)
        for k in (
            "seq_lens_this_time",
            "seq_lens_encoder",
            "accept_nums",
            "base_model_seq_lens_this_time",
        )
    )
    plans = []
    for b in range(slt.shape[0]):
        if enc[b] > 0:
            plans.append((int(enc[b]), int(enc[b]), 0, int(enc[b])))
        elif slt[b] == 0:
            plans.append((max(int(base[b]), 0), 0, 0, 0))
        else:
            inc, outc = max(int(base[b]), 0), max(int(acc[b]), 0)
            plans.append((inc, outc, 0, min(outc, inc) if base[b] != 0 else 0))
    return _gather(t["input"], plans)


def self_hidden_ref(t: dict) -> tuple[np.ndarray, int]:
    last, slt, enc = (
        t[k].reshape(-1)
        for k in ("last_seq_lens_this_time", "seq_lens_this_time", "seq_lens_encoder")
    )
    plans = []
    for b in range(slt.shape[0]):
        ln = max(int(last[b]), 0)
        if slt[b] > 0:
            plans.append((1, 1, 0, 1) if enc[b] > 0 else (ln, 1, ln - 1, 1 if ln > 0 else 0))
        else:
            plans.append(((1 if ln > 0 else 0) if enc[b] > 0 else ln, 0, 0, 0))
    return _gather(t["input"], plans)
