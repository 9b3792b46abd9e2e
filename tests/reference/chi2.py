"""The chi-square survival function (no SciPy in the test environment): P(X >= x) for k degrees of
freedom, the regularised upper incomplete gamma Q(k / 2, x / 2), by its series or continued fraction."""

from __future__ import annotations

import math


def chi2_sf(x: float, k: int) -> float:
    a, x = k / 2.0, x / 2.0
    if x <= 0:
        return 1.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:  # P by its series, Q = 1 - P
        term = total = 1.0 / a
        n = a
        while abs(term) > 1e-16 * abs(total):
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * math.exp(log_front))
    b, c, d = x + 1 - a, 1e300, 1 / (x + 1 - a)  # Q by Lentz's continued fraction
    h = d
    for i in range(1, 100000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return math.exp(log_front) * h


def chi2_test(counts, expected_probs, min_expected: float = 5.0):
    """Goodness of fit of ``counts`` to ``expected_probs``: (statistic, dof, p). Cells with an
    expected count below ``min_expected`` are pooled into one."""
    n = float(sum(counts))
    cells, pooled_o, pooled_e = [], 0.0, 0.0
    for o, p in zip(counts, expected_probs):
        e = p * n
        if e >= min_expected:
            cells.append((o, e))
        else:
            pooled_o, pooled_e = pooled_o + o, pooled_e + e
    if pooled_e > 0:
        cells.append((pooled_o, pooled_e))
    stat = sum((o - e) ** 2 / e for o, e in cells)
    dof = max(len(cells) - 1, 1)
    return stat, dof, chi2_sf(stat, dof)
