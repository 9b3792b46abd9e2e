"""pip's build hook: ``pip install --no-build-isolation .`` builds the op library first.

The library is built by setup_ops.py's ``build()`` (the same switches: FDSPEC_CPU_ONLY,
FDSPEC_CUDA_ARCHS, FDSPEC_DEBUG, FDSPEC_SANITIZE; CUDA kernels when a toolkit is found) against the
Paddle of the environment pip runs in, hence ``--no-build-isolation``: an isolated build would
have no Paddle, or another one. The built library and its ``_build_info`` go into the wheel with
the package. ``python setup_ops.py install`` builds first and sets FDSPEC_PREBUILT=1 so that this
hook does not build the same library twice. Everything else is in pyproject.toml.
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent


class BuildOpsThenPy(build_py):
    def run(self):
        if os.environ.get("FDSPEC_PREBUILT", "0") in ("", "0"):
            # In a child process: Paddle's extension builder runs a setup() of its own.
            subprocess.check_call([sys.executable, str(ROOT / "setup_ops.py"), "build"], cwd=ROOT)
        super().run()


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library: tag it for this platform and Python."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildOpsThenPy}, distclass=BinaryDistribution)
