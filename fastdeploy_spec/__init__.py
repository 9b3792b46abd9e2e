"""fastdeploy_spec: speculative-decoding operators and proposers for Paddle model runners."""

__version__ = "0.1.0"
