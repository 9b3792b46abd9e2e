"""Loads the op library once and exposes Paddle's generated entry points for it.

The library sits in ``fastdeploy_spec/_lib`` (put there by ``setup_ops.py``). Loading refuses, with
the command to run, a library that is missing, built for another Paddle, older than the C++
sources beside the package (when running from a checkout), or with no kernel image that the GPU can
run (its ``FDSPEC_CUDA_ARCHS`` against the device's compute capability).
"""

from __future__ import annotations

import ctypes
import importlib
import re
import tempfile
import threading
from pathlib import Path
from types import ModuleType

from fastdeploy_spec._digest import source_digest

_PKG = Path(__file__).resolve().parent.parent
_LIB = _PKG / "_lib" / "fastdeploy_spec_ops.so"
_CSRC = _PKG.parent / "custom_ops"
_BUILD_HINT = (
    "reinstall it against this Paddle: `pip install --no-build-isolation <checkout>` or "
    "`python setup_ops.py install` (`python setup_ops.py build` to use a checkout in place)"
)

_lock = threading.Lock()
_module: ModuleType | None = None
_info: ModuleType | None = None


class OpLibraryError(ImportError):
    """The op library is missing, stale or built for another Paddle."""


def build_info() -> ModuleType:
    """The ``_build_info`` module written by ``setup_ops.py`` (raises OpLibraryError if absent)."""
    global _info
    if _info is None:
        try:
            _info = importlib.import_module("fastdeploy_spec._build_info")
        except ImportError:
            raise OpLibraryError(
                f"fastdeploy_spec: the op library has not been built; {_BUILD_HINT}"
            ) from None
    return _info


def image_for(archs: tuple[str, ...] | list[str], capability: tuple[int, int]) -> str | None:
    """The kernel image the CUDA runtime loads on a GPU from a library built for ``archs``.

    ``setup_ops.py`` compiles SASS for each arch and PTX for the highest. A GPU of compute capability
    X.Y runs SASS sm_XZ with Z <= Y (same major), preferring the highest, else JIT-compiles PTX
    compute_V with V <= X.Y; arch-specific targets (``90a``) run on their own capability only.

    Parameters
    ----------
    archs : sequence of str
        ``_build_info.CUDA_ARCHS``, e.g. ``("80", "86", "89", "90")``.
    capability : tuple of int
        The device's (major, minor).

    Returns
    -------
    str or None
        ``"sm_86"`` (SASS), ``"compute_89"`` (PTX, JIT-compiled), or None when nothing runs.

    Examples
    --------
    >>> image_for(("80", "86", "89"), (8, 9))
    'sm_89'
    >>> image_for(("80", "86", "89"), (9, 0))
    'compute_89'
    >>> image_for(("90",), (8, 0)) is None
    True
    """
    dev = capability[0] * 10 + capability[1]
    parsed = []
    for a in archs:
        m = re.fullmatch(r"(\d+)([af]?)", str(a).replace(".", ""))
        if m:
            parsed.append((int(m.group(1)), m.group(2)))
    if not parsed:
        return None
    sass = [
        (v, suffix)
        for v, suffix in parsed
        if (v == dev if suffix else (v // 10 == dev // 10 and v <= dev))
    ]
    if sass:
        v, suffix = max(sass)
        return f"sm_{v}{suffix}"
    top, suffix = max(parsed)
    if (top == dev) if suffix else (top <= dev):
        return f"compute_{top}{suffix}"
    return None


def check_device_image(archs: tuple[str, ...] | list[str], capability: tuple[int, int]) -> None:
    """Raises OpLibraryError, with the command that rebuilds the library, if it cannot run here."""
    if image_for(archs, capability) is not None:
        return
    cc = f"{capability[0]}{capability[1]}"
    raise OpLibraryError(
        f'fastdeploy_spec: the op library was built for FDSPEC_CUDA_ARCHS="{" ".join(archs)}" (SASS for '
        f"each, PTX for the highest), none of which runs on this GPU (compute capability "
        f"{capability[0]}.{capability[1]}); rebuild it for this GPU: "
        f"`FDSPEC_CUDA_ARCHS={cc} python setup_ops.py install` (or add {cc} to the archs)"
    )


def _device_capability(paddle: ModuleType) -> tuple[int, int] | None:
    """The current GPU's compute capability, or None without a CUDA device (or a CPU Paddle)."""
    try:
        if not paddle.is_compiled_with_cuda() or paddle.device.cuda.device_count() < 1:
            return None
        major, minor = paddle.device.cuda.get_device_capability()
        return int(major), int(minor)
    except (AttributeError, RuntimeError, ValueError):
        return None


def _promote_libstdcxx() -> None:
    """Puts the system libstdc++ in the process's global symbol scope, ahead of Paddle's libraries.

    The op library lists libpaddle.so before libstdc++.so.6, so without this its references to the
    C++ runtime's internals (locale and facet ids, stream buffers) are looked up in Paddle's libraries
    first. Paddle 2.6.2's (built by g++ 8.2) carry copies that do not agree with a library compiled by
    g++ 13, and every std::ostringstream, which Paddle's own PD_CHECK uses to format an error, crashed
    the process (seen on the GPU machine; loading libstdc++ globally first made the errors clean).
    Harmless where it is not needed: libstdc++ is already loaded by Paddle, this only widens its scope.
    """
    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)  # the soname the op library links
    except OSError:  # not a GNU toolchain: nothing to promote
        pass


def load() -> ModuleType:
    """Returns the module of generated op functions, loading the library on first use."""
    global _module
    if _module is not None:
        return _module
    with _lock:
        if _module is not None:
            return _module
        import paddle
        from paddle.utils.cpp_extension import extension_utils

        info = build_info()
        if not _LIB.exists():
            raise OpLibraryError(f"fastdeploy_spec: {_LIB} is missing; {_BUILD_HINT}")
        if info.PADDLE_VERSION != paddle.__version__:
            raise OpLibraryError(
                f"fastdeploy_spec: the op library was built against Paddle {info.PADDLE_VERSION} but "
                f"Paddle {paddle.__version__} is running (a library built for another Paddle can crash "
                f"it); {_BUILD_HINT}"
            )
        if _CSRC.is_dir() and source_digest(_CSRC) != info.SOURCE_DIGEST:
            raise OpLibraryError(
                f"fastdeploy_spec: the C++/CUDA sources in {_CSRC} changed after the op library was "
                f"built; {_BUILD_HINT}"
            )
        capability = _device_capability(paddle) if info.WITH_CUDA else None
        if capability is not None:
            check_device_image(tuple(info.CUDA_ARCHS), capability)
        _promote_libstdcxx()
        op_names = extension_utils.load_op_meta_info_and_register_op(str(_LIB))
        # Paddle generates the Python entry points itself, in the form its running version expects.
        build_dir = tempfile.mkdtemp(prefix="fastdeploy_spec_ops_")
        _module = extension_utils._generate_python_module(
            "fastdeploy_spec_ops", op_names, build_dir
        )
        return _module


def with_cuda() -> bool:
    """True when the loaded library has CUDA kernels."""
    return bool(build_info().WITH_CUDA)
