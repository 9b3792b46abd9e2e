"""Child process of tests/test_hostile_inputs.py: runs hostile cases (tests/hostile_cases.py) by id.

    python -m tests.hostile_runner PLACE < ids.json

Reads a JSON list of case ids on stdin and prints, on stdout, one line per event, each prefixed with
``HOSTILE `` (anything else on stdout is Paddle's): ``{"event": "ready"}`` once set up, then for
each case ``{"id": ..., "event": "start"}`` and ``{"id": ..., "event": "done", "outcome": ...,
"detail": ...}``. A case that kills the process leaves a "start" without its "done", one that hangs
stops the stream: the parent tells crashes and hangs apart and restarts a child with the rest.
The child uses a message queue of its own (INFERENCE_MSG_QUEUE_ID) and removes it at exit.
"""

from __future__ import annotations

import json
import re
import sys
import zlib  # noqa: F401  (Paddle 2.6 crashes in zlib unless it is imported first)

PREFIX = "HOSTILE "


def emit(**record) -> None:
    sys.stdout.write(PREFIX + json.dumps(record) + "\n")
    sys.stdout.flush()


def names(message: str, word: str) -> bool:
    """`word` appears in `message` as a whole identifier (token_ids is not logprob_token_ids)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", message) is not None


def classify(case, exc: BaseException | None) -> tuple[str, str]:
    if exc is None:
        return (
            "correct result" if case.expect == "ok" else "silent garbage",
            "" if case.expect == "ok" else "returned without error",
        )
    msg = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, AssertionError):
        return "silent garbage", msg
    if case.expect == "ok":
        return "unexpected error", msg
    named = names(msg, case.op) and (case.arg == "" or names(msg, case.arg))
    return ("named error" if named else "unnamed error"), msg


def main() -> None:
    import os

    import paddle

    paddle.set_device("cpu")  # tensors name their place; Paddle's own kernels stay on the host
    from fastdeploy_spec import transport
    from fastdeploy_spec.transport import free_queue_id, release_queue_id
    from tests.hostile_cases import build_cases

    place = sys.argv[1]
    ids = json.loads(sys.stdin.read())
    qid = free_queue_id()
    os.environ["INFERENCE_MSG_QUEUE_ID"] = str(qid)
    os.environ["FDSPEC_MSG_FRAGMENT_TIMEOUT_MS"] = "300"
    for var in (
        "INFERENCE_MSG_ID",
        "INFER_WITH_REFERENCE_TOKENUM_THRESHOLD",
        "SPEC_TOKENUM_THRESHOLD",
    ):
        os.environ.pop(var, None)
    cases = {c.id: c for c in build_cases(place)}
    emit(event="ready")
    try:
        for cid in ids:
            case = cases[cid]
            emit(id=cid, event="start")
            try:
                case.fn()
                exc = None
            except BaseException as e:  # noqa: BLE001  (every outcome is reported, KeyboardInterrupt aside)
                if isinstance(e, KeyboardInterrupt):
                    raise
                exc = e
            outcome, detail = classify(case, exc)
            emit(id=cid, event="done", outcome=outcome, detail=detail[:400])
            os.environ["INFERENCE_MSG_QUEUE_ID"] = str(qid)  # a case may have pointed it elsewhere
    finally:
        transport.remove_queue(qid)
        release_queue_id(qid)


if __name__ == "__main__":
    main()
