"""Test and demo machinery for the runner mirror: never imported by the library.

- ``OracleTarget``: a target model that knows each request's answer (``oracle_logits`` its logits);
- ``LogprobChecker``: a runner observer that checks every logprob message, bit for bit, against the
  rows the device computed in its step.
"""

from fastdeploy_spec.testing.checks import LogprobChecker
from fastdeploy_spec.testing.oracle import ORACLE_HASH_MODULUS, OracleTarget, oracle_logits

__all__ = ["LogprobChecker", "ORACLE_HASH_MODULUS", "OracleTarget", "oracle_logits"]
