"""Examples around the library: the demo and the oracle target model. Not part of the package.

- ``OracleTarget``: a target model that knows each request's answer (``oracle_logits`` its logits);
  ``SampledOracle``: a target for sampled requests whose next-token distribution is a known
  function of the context over the request's text;
  ``PreparedLogits``: a draft model that returns logits prepared in advance;
- ``LogprobChecker``: a runner observer that checks every logprob message, bit for bit, against the
  rows the device computed in its step;
- ``examples.demo``: speculative decoding on real text (``python -m examples.demo``).

The tests and the benchmarks use the oracle too. Run from the repository root.
The names above load their module on first use.
"""

import importlib

_EXPORTS = {
    "LogprobChecker": "checks",
    "ORACLE_HASH_MODULUS": "oracle",
    "OracleTarget": "oracle",
    "oracle_logits": "oracle",
    "PreparedLogits": "oracle",
    "SampledOracle": "oracle",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"examples.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'examples' has no attribute {name!r}")
