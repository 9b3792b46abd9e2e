"""The loader's refusal of a library with no kernel image for the GPU (issue 48).

Pure functions of ``fastdeploy_spec.ops._loader``: which image the CUDA runtime picks for a device
from the archs ``setup_ops.py`` built (SASS for each, PTX for the highest), and the refusal, with the
rebuild command, where there is none.
"""

from __future__ import annotations

import pytest

from fastdeploy_spec.ops._loader import OpLibraryError, check_device_image, image_for

DEFAULT = ("80", "86", "89", "90")


@pytest.mark.parametrize(
    ("archs", "cc", "image"),
    [
        (DEFAULT, (8, 0), "sm_80"),
        (DEFAULT, (8, 6), "sm_86"),
        (DEFAULT, (8, 7), "sm_86"),  # Orin: sm_86 SASS runs on 8.7
        (DEFAULT, (8, 9), "sm_89"),
        (DEFAULT, (9, 0), "sm_90"),
        (DEFAULT, (10, 0), "compute_90"),  # Blackwell: JIT from the sm_90 PTX
        (
            ("80", "86", "89"),
            (9, 0),
            "compute_89",
        ),  # the silently-wrong build of issue 48: now right
        (("80",), (9, 0), "compute_80"),
        (("80",), (8, 6), "sm_80"),
        (("86", "89"), (8, 0), None),  # sm_86 SASS does not run on 8.0, nor compute_89 PTX
        (("90",), (8, 9), None),
        (("90",), (8, 0), None),
        (("89",), (8, 6), None),
        (("90a",), (9, 0), "sm_90a"),
        (("90a",), (10, 0), None),
        (("8.0", "9.0"), (9, 0), "sm_90"),
        ((), (9, 0), None),
    ],
)
def test_image_for(archs: tuple[str, ...], cc: tuple[int, int], image: str | None) -> None:
    assert image_for(archs, cc) == image


def test_no_image_is_refused_with_the_rebuild_command() -> None:
    with pytest.raises(OpLibraryError, match=r"FDSPEC_CUDA_ARCHS=89 python setup_ops.py install"):
        check_device_image(("90",), (8, 9))
    with pytest.raises(OpLibraryError, match=r"compute capability 8\.0"):
        check_device_image(("86", "89"), (8, 0))


def test_a_runnable_library_passes() -> None:
    check_device_image(("80", "86", "89"), (9, 0))
    check_device_image(DEFAULT, (8, 9))
