"""pytest set-up shared by the tests and the package's doctests (``pytest --doctest-modules
fastdeploy_spec``): the examples build their tensors on Paddle's default place, which must be the CPU
(a GPU Paddle would default to the GPU, and the examples must not need one)."""

import zlib  # noqa: F401  (Paddle 2.6 crashes in zlib unless it is imported first)

import paddle

paddle.set_device("cpu")
