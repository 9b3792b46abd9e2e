"""Build the fastdeploy_spec op library with Paddle's extension API.

    python setup_ops.py build     # build into fastdeploy_spec/_lib (use from this checkout)
    python setup_ops.py install   # build, then install the package and the library (pip, no deps)

``pip install --no-build-isolation .`` does the same as ``install`` (setup.py's hook calls build()).

CUDA kernels are compiled when a CUDA toolkit is found (``CUDA_HOME`` or ``nvcc`` on ``PATH``);
otherwise, or with ``FDSPEC_CPU_ONLY=1``, a CPU-only library is built. Either way it is one library
registering every op. ``FDSPEC_CUDA_ARCHS="80 90"`` picks the SM targets (default 80 86 89 90, plus
PTX for the newest so later GPUs can JIT it); ``FDSPEC_DEBUG=1`` makes every launch synchronise and
check its status; ``FDSPEC_SANITIZE=address`` builds the host code with a sanitizer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from fastdeploy_spec._digest import source_digest  # this checkout's package: the script's directory

ROOT = Path(__file__).resolve().parent
CSRC = ROOT / "custom_ops"
PKG = ROOT / "fastdeploy_spec"
LIB_DIR = PKG / "_lib"
LIB_NAME = "fastdeploy_spec_ops"
DEFAULT_ARCHS = ("80", "86", "89", "90")


def _layered(op: str) -> dict[str, list[str]]:
    """The three layers of an op in its own folder: <op>/<op>_op.cc, <op>/<op>_cpu.cc, <op>/<op>.cu."""
    return {"cpp": [f"{op}/{op}_op.cc", f"{op}/{op}_cpu.cc"], "cuda": [f"{op}/{op}.cu"]}


# Every op: its binding, its CPU implementation and, for the CUDA build, its kernels. Explicit, so a
# stray file never ends up in the library.
OPS: dict[str, dict[str, list[str]]] = {
    "ngram_match": _layered("ngram_match"),
    "hybrid_mtp_ngram": _layered("hybrid_mtp_ngram"),
    "suffix_match": _layered("suffix_match"),
    # The cache's state layout (suffix_cache_state.cc) is shared with the Paddle-free harness.
    "suffix_cache": {
        "cpp": [
            "suffix_cache/suffix_cache_op.cc",
            "suffix_cache/suffix_cache_cpu.cc",
            "suffix_cache/suffix_cache_state.cc",
        ],
        "cuda": ["suffix_cache/suffix_cache.cu"],
    },
    "speculate_get_accept_tokens_and_logits": _layered("speculate_get_accept_tokens_and_logits"),
    # The offset step of the gather alone: its CPU and CUDA code are the gather's, listed above.
    "speculate_compute_cu_batch_offset": {
        "cpp": ["speculate_get_accept_tokens_and_logits/speculate_compute_cu_batch_offset_op.cc"],
        "cuda": [],
    },
    "speculate_logprobs_topk": _layered("speculate_logprobs_topk"),
    # FastDeploy's decode step since its unified spec / non-spec branch (docs/contract/decode_step.md).
    "verify_draft_tokens": _layered("verify_draft_tokens"),
    "unified_update_model_status": _layered("unified_update_model_status"),
    "naive_update_model_status": _layered("naive_update_model_status"),
    "top_p_candidates": _layered("top_p_candidates"),
    "speculate_sample_tokens": _layered("speculate_sample_tokens"),
    "speculate_draft_length_policy": _layered("speculate_draft_length_policy"),
    # Our fused draft-model bookkeeping (greedy choice, deferred accept): four ops, one kernel layer.
    "draft_model": {
        "cpp": [
            "draft_model/draft_model_greedy_preprocess_op.cc",
            "draft_model/draft_model_greedy_update_op.cc",
            "draft_model/draft_model_accept_op.cc",
            "draft_model/draft_model_accept_preprocess_op.cc",
            "draft_model/draft_model_cpu.cc",
        ],
        "cuda": ["draft_model/draft_model.cu"],
    },
    # FastDeploy's MTP bookkeeping ops under their upstream contracts: six ops, one kernel layer.
    "mtp_state": {
        "cpp": [
            "mtp_state/draft_model_preprocess_op.cc",
            "mtp_state/draft_model_update_op.cc",
            "mtp_state/draft_model_postprocess_op.cc",
            "mtp_state/draft_model_set_value_by_flags_op.cc",
            "mtp_state/eagle_hidden_states_op.cc",
            "mtp_state/mtp_state_cpu.cc",
        ],
        "cuda": ["mtp_state/mtp_state.cu"],
    },
    # Host ops: their GPU path (copies of GPU inputs) is in the .cc files, built with FDSPEC_WITH_CUDA.
    # The message format and the transport are listed once, with the first of the three; both save
    # ops are bound in one file.
    "speculate_save_output_topk": {
        "cpp": [
            "logprob_msg/save_ops.cc",
            "logprob_msg/logprob_msg.cc",
            "logprob_msg/msg_queue.cc",
        ],
        "cuda": [],
    },
    "mtp_save_first_token_with_topk": {
        "cpp": [],
        "cuda": [],
    },
    "speculate_get_output_topk": {
        "cpp": ["logprob_msg/speculate_get_output_topk_op.cc"],
        "cuda": [],
    },
}


def find_cuda_home() -> str | None:
    """The CUDA toolkit to build with: $CUDA_HOME, $CUDA_PATH, the toolkit of the nvcc on PATH, or
    /usr/local/cuda, whichever first has both nvcc and the runtime headers (an nvcc on PATH may be a
    wrapper script far from its toolkit)."""
    if os.environ.get("FDSPEC_CPU_ONLY", "0") not in ("", "0"):
        return None
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    candidates.append("/usr/local/cuda")
    for home in filter(None, candidates):
        if (Path(home) / "bin" / "nvcc").exists() and (
            Path(home) / "include" / "cuda_runtime_api.h"
        ).exists():
            return home
    return None


def cuda_archs() -> list[str]:
    raw = os.environ.get("FDSPEC_CUDA_ARCHS", "").replace(",", " ").replace(";", " ").split()
    archs = [a.replace(".", "") for a in raw] or list(DEFAULT_ARCHS)
    return sorted(set(archs), key=int)


def build() -> Path:
    cuda_home = find_cuda_home()
    with_cuda = cuda_home is not None
    if with_cuda:
        # Paddle's extension module reads CUDA_HOME when it is imported.
        os.environ["CUDA_HOME"] = cuda_home
    import paddle
    from paddle.utils.cpp_extension import CppExtension, CUDAExtension, setup

    # The bindings use no pybind11; PADDLE_NO_PYTHON keeps paddle/extension.h from pulling in its
    # Python and (in a CUDA build against CPU Paddle) cuBLAS headers.
    cxx = ["-O3", "-std=c++17", "-DPADDLE_NO_PYTHON", f"-I{CSRC}"]
    nvcc = ["-O3", "-std=c++17", "-lineinfo", f"-I{CSRC}"]
    if os.environ.get("FDSPEC_DEBUG", "0") not in ("", "0"):
        cxx.append("-DFDSPEC_DEBUG_SYNC")
        nvcc.append("-DFDSPEC_DEBUG_SYNC")
    # FDSPEC_SANITIZE=address|undefined instruments the host code (run Python with the sanitizer's
    # runtime preloaded, e.g. LD_PRELOAD=$(gcc -print-file-name=libasan.so)).
    sanitize = os.environ.get("FDSPEC_SANITIZE", "")
    link = [f"-fsanitize={sanitize}"] if sanitize else []
    if sanitize:
        cxx += [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer", "-g"]
    sources = [str(CSRC / s) for op in OPS.values() for s in op["cpp"]]
    archs: list[str] = []
    if with_cuda:
        archs = cuda_archs()
        cxx += ["-DFDSPEC_WITH_CUDA", f"-I{cuda_home}/include", f"-I{cuda_home}/include/cccl"]
        nvcc += ["-DFDSPEC_WITH_CUDA", f"-I{cuda_home}/include/cccl", "-DPADDLE_NO_PYTHON"]
        nvcc += [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
        nvcc.append(f"-gencode=arch=compute_{archs[-1]},code=compute_{archs[-1]}")
        sources += [str(CSRC / s) for op in OPS.values() for s in op["cuda"]]
        ext = CUDAExtension(
            sources=sources,
            extra_compile_args={"cxx": cxx, "nvcc": nvcc},
            library_dirs=[f"{cuda_home}/lib64"],
            extra_link_args=link,
        )
    else:
        ext = CppExtension(sources=sources, extra_compile_args={"cxx": cxx}, extra_link_args=link)

    print(
        f"fastdeploy_spec: building {'CUDA (sm ' + ' '.join(archs) + ')' if with_cuda else 'CPU-only'}"
        f" library against Paddle {paddle.__version__}",
        flush=True,
    )
    out = Path(tempfile.mkdtemp(prefix="fdspec_build_"))
    setup(
        name=LIB_NAME,
        ext_modules=[ext],
        script_args=[
            "build_ext",
            "--build-lib",
            str(out / "lib"),
            "--build-temp",
            str(out / "tmp"),
        ],
    )
    built = sorted((out / "lib").rglob("*.so"))
    if not built:
        sys.exit("fastdeploy_spec: the build produced no shared library")
    LIB_DIR.mkdir(parents=True, exist_ok=True)
    target = LIB_DIR / f"{LIB_NAME}.so"
    shutil.copy2(built[0], target)
    (PKG / "_build_info.py").write_text(
        '"""Written by setup_ops.py; read by fastdeploy_spec.ops to refuse a stale library."""\n'
        f"WITH_CUDA = {with_cuda!r}\n"
        f"CUDA_ARCHS = {tuple(archs)!r}\n"
        f"PADDLE_VERSION = {paddle.__version__!r}\n"
        f"SOURCE_DIGEST = {source_digest(CSRC)!r}\n"
        f"OPS = {tuple(OPS)!r}\n"
    )
    shutil.rmtree(out, ignore_errors=True)
    print(f"fastdeploy_spec: wrote {target.relative_to(ROOT)}", flush=True)
    return target


def main(argv: list[str]) -> None:
    cmd = argv[1] if len(argv) > 1 else "build"
    if cmd not in ("build", "install"):
        sys.exit(__doc__)
    build()
    if cmd == "install":
        # FDSPEC_PREBUILT: setup.py's build hook takes the library just built instead of rebuilding.
        subprocess.check_call(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--no-deps",
                "--no-build-isolation",
                "--force-reinstall",
                "-q",
                str(ROOT),
            ],
            env=dict(os.environ, FDSPEC_PREBUILT="1"),
        )
        print("fastdeploy_spec: installed; `import fastdeploy_spec.ops` works from any directory")


if __name__ == "__main__":
    main(sys.argv)
