"""The estimators compare, the grid and benchmark.json share: Wilson intervals, pass@k and
pass^k, the exact McNemar test and Newcombe's interval for a difference of two rates; the
case-clustered mean and the paired per-case difference of variants in one batch (Miller 2024,
"Adding Error Bars to Evals"), the power calculation that says how many trials are enough, and
Cohen's kappa of a judge against people's labels.

Pure Python (math.comb only), no Django: every function is a formula a test can check by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# The normal quantile of a two-sided 95% interval.
Z_95 = 1.959963984540054
# The normal quantile of 80% power (one-sided 0.80).
Z_80 = 0.8416212335729143


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


# --- the case as the unit: clustered means and paired differences (Miller 2024) ----------------


@dataclass(frozen=True)
class ClusteredMean:
    """A mean over cases, each case the mean of its trials' scores, with the standard error
    clustered by case: trials of one case are repeated measures of it, not independent draws,
    so the spread that counts is that of the case means. ``standard_error`` and ``interval``
    are None with fewer than two cases (one case says nothing of the spread)."""

    mean: float
    cases: int
    standard_error: float | None
    interval: tuple[float, float] | None


def case_mean(scores: Sequence[float]) -> float:
    """The mean score of one case's finished trials (1.0 a pass, 0.0 a fail, or its weighted
    score)."""
    if not scores:
        raise ValueError("a case needs at least one finished trial")
    return sum(scores) / len(scores)


def _spread(values: Sequence[float], mean: float) -> float:
    """The sample variance (n - 1 in the denominator) of ``values`` around ``mean``."""
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def clustered_mean(
    case_scores: Sequence[Sequence[float]], z: float = Z_95, bounds: tuple[float, float] = (0, 1)
) -> ClusteredMean:
    """The mean over cases of each case's mean trial score, with its case-clustered standard
    error: the sample standard deviation of the case means over the square root of the number
    of cases. With the same n trials in every case this is Miller's clustered standard error
    (2024, eq. 4) with the usual C / (C - 1) small-sample correction; each case weighs the same
    whatever its trial count. The interval is mean +- z * SE (95% by default), kept inside
    ``bounds``."""
    means = [case_mean(scores) for scores in case_scores]
    if not means:
        raise ValueError("a clustered mean needs at least one case")
    mean = sum(means) / len(means)
    if len(means) < 2:
        return ClusteredMean(mean, len(means), None, None)
    se = math.sqrt(_spread(means, mean) / len(means))
    low, high = bounds
    return ClusteredMean(mean, len(means), se, (max(low, mean - z * se), min(high, mean + z * se)))


def paired_difference(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], z: float = Z_95
) -> ClusteredMean:
    """The mean paired difference B - A over cases both ran, ``pairs`` holding each case's
    trial scores under A and under B: the clustered mean of the per-case differences of case
    means (Miller 2024, section 4). Pairing takes out how hard each case is, which both
    variants share, so it is far tighter than comparing two independent rates."""
    differences = [[case_mean(b) - case_mean(a)] for a, b in pairs]
    return clustered_mean(differences, z, bounds=(-1, 1))


# --- how many trials are enough: power -----------------------------------------------------------


@dataclass(frozen=True)
class VarianceComponents:
    """What the variance of a case's paired difference is made of (Miller 2024, section 5):
    ``between``, the variance across cases of the true difference, which more trials cannot
    shrink; and ``within``, the per-trial variance of A plus that of B, averaged over cases,
    which n trials per case divide by n. The variance of one case's difference at n trials is
    between + within / n. ``within`` is None when no case ran two trials on each side."""

    between: float
    within: float | None

    def at(self, trials: float) -> float:
        """The variance of one case's paired difference with ``trials`` trials per case."""
        return self.between + (self.within or 0.0) / trials


def variance_components(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
) -> VarianceComponents:
    """Estimate the components from observed cases (each A's and B's trial scores): the
    within part is the mean over cases of each side's sample variance of its trials (cases with
    two or more trials on both sides); the between part is the observed variance of the
    per-case differences less the share the trials' noise explains (each case's within
    variance over its trial count), floored at 0."""
    if len(pairs) < 2:
        raise ValueError("variance components need at least two cases")
    differences = [case_mean(b) - case_mean(a) for a, b in pairs]
    observed = _spread(differences, sum(differences) / len(differences))
    repeated = [(a, b) for a, b in pairs if len(a) >= 2 and len(b) >= 2]
    if not repeated:
        return VarianceComponents(between=observed, within=None)
    per_trial = [_spread(a, case_mean(a)) + _spread(b, case_mean(b)) for a, b in repeated]
    noise = [
        _spread(a, case_mean(a)) / len(a) + _spread(b, case_mean(b)) / len(b) for a, b in repeated
    ]
    within = sum(per_trial) / len(per_trial)
    between = max(0.0, observed - sum(noise) / len(noise))
    return VarianceComponents(between=between, within=within)


# The multiplier of the standard error a true difference must reach to be found 80% of the time
# by a two-sided 5% test: z(0.975) + z(0.80).
POWER_80 = Z_95 + Z_80


def minimum_detectable_difference(
    components: VarianceComponents, cases: int, trials: float, multiplier: float = POWER_80
) -> float:
    """The smallest true paired difference a two-sided 5% test finds with 80% power over
    ``cases`` cases of ``trials`` trials each: (z(0.975) + z(0.8)) * sqrt(variance / cases)."""
    if cases < 1 or trials <= 0:
        raise ValueError(
            f"a power calculation needs cases >= 1 and trials > 0, got {cases}, {trials}"
        )
    return multiplier * math.sqrt(components.at(trials) / cases)


def trials_needed(
    components: VarianceComponents, cases: int, difference: float, multiplier: float = POWER_80
) -> int | None:
    """The fewest trials per case that make ``difference`` detectable with 80% power over
    ``cases`` cases; None when no number of trials can (the between-case variance alone is too
    large: more cases are needed) or the within variance is unknown."""
    if difference <= 0:
        raise ValueError(f"a difference to detect must be above 0, got {difference}")
    room = cases * difference**2 / multiplier**2 - components.between
    if components.within is None or room <= 0:
        return None
    if components.within == 0:
        return 1
    return max(1, math.ceil(components.within / room - 1e-9))


def cases_needed(
    components: VarianceComponents, trials: float, difference: float, multiplier: float = POWER_80
) -> int:
    """The fewest cases of ``trials`` trials each that make ``difference`` detectable with 80%
    power."""
    if difference <= 0:
        raise ValueError(f"a difference to detect must be above 0, got {difference}")
    return max(2, math.ceil(multiplier**2 * components.at(trials) / difference**2 - 1e-9))


# --- agreement with people: Cohen's kappa ------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """A judge's verdicts against people's labels, pass counted as positive: the confusion
    matrix (``both_pass``: judge and person said pass; ``judge_only``: the judge passed what the
    person failed; ``person_only``: the person passed what the judge failed; ``both_fail``)."""

    both_pass: int
    judge_only: int
    person_only: int
    both_fail: int

    @property
    def n(self) -> int:
        return self.both_pass + self.judge_only + self.person_only + self.both_fail

    @property
    def observed(self) -> float | None:
        """The share of trials on which the judge and the person agree."""
        return (self.both_pass + self.both_fail) / self.n if self.n else None

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa (1960): agreement beyond what chance alone gives, (po - pe) / (1 - pe),
        chance from each side's own pass rate. None without labels; 1.0 when both sides gave
        one and the same verdict throughout (pe = 1), 0.0 when they always disagree then."""
        if not self.n:
            return None
        n = self.n
        judge_pass = (self.both_pass + self.judge_only) / n
        person_pass = (self.both_pass + self.person_only) / n
        expected = judge_pass * person_pass + (1 - judge_pass) * (1 - person_pass)
        observed = (self.both_pass + self.both_fail) / n
        if expected >= 1:
            return 1.0 if observed >= 1 else 0.0
        return (observed - expected) / (1 - expected)

    @property
    def true_positive_rate(self) -> float | None:
        """Of the trials a person passed, the share the judge passed too (sensitivity)."""
        positives = self.both_pass + self.person_only
        return self.both_pass / positives if positives else None

    @property
    def true_negative_rate(self) -> float | None:
        """Of the trials a person failed, the share the judge failed too (specificity)."""
        negatives = self.both_fail + self.judge_only
        return self.both_fail / negatives if negatives else None
