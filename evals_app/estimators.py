"""The estimators compare, the grid and benchmark.json share: Wilson intervals, pass@k and
pass^k, the exact McNemar test and Newcombe's interval for a difference of two rates.

Pure Python (math.comb only), no Django: every function is a formula a test can check by hand.
"""

from __future__ import annotations

import math

# The normal quantile of a two-sided 95% interval.
Z_95 = 1.959963984540054


def wilson_interval(passed: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of a pass rate ``passed``/``total``.

    Unlike the normal approximation it stays inside [0, 1] and is honest for small n and for
    rates of 0 or 1. ``total == 0`` gives the uninformative (0.0, 1.0)."""
    if total < 0 or passed < 0 or passed > total:
        raise ValueError(f"a rate needs 0 <= passed <= total, got {passed}/{total}")
    if total == 0:
        return 0.0, 1.0
    p = passed / total
    z2 = z * z
    denominator = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / denominator
    # Rounding can push the bounds a hair past the observed extremes; they never should be.
    return max(0.0, centre - half), min(1.0, centre + half)


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k, the chance that at least one of k trials passes, from
    n trials of which c passed: 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, "Evaluating Large
    Language Models Trained on Code"). k ranges over 1..n."""
    _check_counts(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass^k, the chance that all of k trials pass, from n trials of
    which c passed: C(c, k) / C(n, k) (the reliability metric of tau-bench, Yao et al. 2024).
    k ranges over 1..n; pass^1 equals pass@1 equals c/n."""
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value for paired outcomes: ``b`` pairs passed only on one
    side, ``c`` only on the other. Under no difference each discordant pair falls either way
    with probability 1/2, so the p-value is twice the smaller binomial tail of
    Binomial(b + c, 1/2), capped at 1. No discordant pairs gives 1.0 (no evidence)."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    low = min(b, c)
    tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    return min(1.0, 2 * tail)


def rate_difference_interval(
    passed_a: int, total_a: int, passed_b: int, total_b: int, z: float = Z_95
) -> tuple[float, float]:
    """An interval (95% by default) for the difference of two independent pass rates,
    rate_b - rate_a, by Newcombe's hybrid Wilson score method (Newcombe 1998, method 10): it
    combines each side's Wilson interval, so it behaves at 0%, 100% and small n where the
    Wald interval does not. A side with no trials makes the interval (-1.0, 1.0)."""
    if total_a == 0 or total_b == 0:
        return -1.0, 1.0
    pa, pb = passed_a / total_a, passed_b / total_b
    la, ua = wilson_interval(passed_a, total_a, z)
    lb, ub = wilson_interval(passed_b, total_b, z)
    delta = pb - pa
    lower = delta - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2)
    upper = delta + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)
    return max(-1.0, lower), min(1.0, upper)


def pass_k_curves(n: int, c: int) -> dict[str, dict[int, float]]:
    """pass@k and pass^k of one cell for every k from 1 to n: {"pass@k": {k: value},
    "pass^k": {k: value}}; empty dicts when no trial finished."""
    at_k, all_k = _curves(n, c)
    return {
        "pass@k": dict(enumerate(at_k, start=1)),
        "pass^k": dict(enumerate(all_k, start=1)),
    }


def _curves(n: int, c: int) -> tuple[list[float], list[float]]:
    """pass@k and pass^k for k = 1..n, each from the one before it: C(m, k) / C(n, k) is
    C(m, k-1) / C(n, k-1) times (m-k+1) / (n-k+1). Computing each k's binomials anew made a
    cell of 2,000 trials take half a second (its integers have hundreds of digits)."""
    if n:
        _check_counts(n, c, 1)
    at_k: list[float] = []
    all_k: list[float] = []
    none_pass = every_pass = 1.0  # C(n-c, k) / C(n, k) and C(c, k) / C(n, k)
    for k in range(1, n + 1):
        none_pass *= max(n - c - k + 1, 0) / (n - k + 1)
        every_pass *= max(c - k + 1, 0) / (n - k + 1)
        at_k.append(1.0 - none_pass)
        all_k.append(every_pass)
    return at_k, all_k


def mean_pass_k_curves(cells: list[tuple[int, int]]) -> dict[str, dict[int, float]]:
    """pass@k and pass^k of a variant: the mean over its cells ((n, c) each) of each cell's
    estimate, for k up to the smallest n among them (a cell of n trials says nothing of k > n).
    Cells with n = 0 are left out."""
    cells = [(n, c) for n, c in cells if n > 0]
    if not cells:
        return {"pass@k": {}, "pass^k": {}}
    k_max = min(n for n, _ in cells)
    curves = [_curves(n, c) for n, c in cells]
    return {
        "pass@k": {
            k: sum(at_k[k - 1] for at_k, _ in curves) / len(cells) for k in range(1, k_max + 1)
        },
        "pass^k": {
            k: sum(all_k[k - 1] for _, all_k in curves) / len(cells) for k in range(1, k_max + 1)
        },
    }
