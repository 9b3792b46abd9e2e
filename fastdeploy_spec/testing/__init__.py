"""Test and demo machinery for the runner mirror and the benchmarks: never imported by the library.

- ``OracleTarget``: a target model that knows each request's answer (``oracle_logits`` its logits);
  ``SampledOracle``: a target for sampled requests whose next-token distribution is a known
  function of the context over the request's text;
  ``PreparedLogits``: a draft model that returns logits prepared in advance;
- ``LogprobChecker``: a runner observer that checks every logprob message, bit for bit, against the
  rows the device computed in its step;
- ``gpu_timer``: CUDA graphs and the GPU timer of the benchmarks and the graph-replay test;
- ``sysv``: raw System V queue access for the transport tests and the transport benchmark.

The names above load their module on first use, so that ``gpu_timer`` and ``sysv`` stay light.
"""

import importlib

_EXPORTS = {"LogprobChecker": "checks", "ORACLE_HASH_MODULUS": "oracle", "OracleTarget": "oracle",
            "oracle_logits": "oracle", "PreparedLogits": "oracle",
            "SampledOracle": "oracle"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"fastdeploy_spec.testing.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'fastdeploy_spec.testing' has no attribute {name!r}")
