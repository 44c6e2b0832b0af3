"""Adaptive trials: which cells (case x variant) still need a trial, by a sequential procedure
whose error rate holds however often it looks.

The procedure is the Beta-binomial mixture confidence sequence (Robbins 1970; Howard, Ramdas,
McAuliffe and Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences")
for a cell's pass probability p, with the Jeffreys prior Beta(1/2, 1/2) (the
Krichevsky-Trofimov mixture). After n trials with s passes, for each candidate p

    M_n(p) = B(s + 1/2, n - s + 1/2) / B(1/2, 1/2) / (p^s (1 - p)^(n - s))

is a nonnegative martingale of mean 1 under p, so by Ville's inequality it ever reaches 1/alpha
with probability at most alpha: the set {p : M_n(p) < 1/alpha} covers the true p at every n at
once, with probability at least 1 - alpha, however the looks and the stopping depend on the
results. A cell is decided once its sequence leaves out the threshold; a pair of variants on a
case once both cells are decided or the two sequences (each at 1 - alpha/2) no longer overlap.

Pure Python (math.lgamma only), no Django: a simulation test checks the error rate directly.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import TypeVar

from proctor.definitions import AdaptiveTrials

Key = TypeVar("Key", bound=Hashable)

# The prior's parameters: Jeffreys' Beta(1/2, 1/2).
PRIOR = 0.5
ABOVE, BELOW = "above", "below"


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def log_evidence(passes: int, trials: int, p: float) -> float:
    """log M_n(p): the log of the mixture martingale against the pass probability ``p`` after
    ``passes`` of ``trials`` trials."""
    if not 0 <= passes <= trials:
        raise ValueError(f"a cell needs 0 <= passes <= trials, got {passes}/{trials}")
    if not 0 < p < 1:
        raise ValueError(f"p must be strictly between 0 and 1, got {p}")
    fails = trials - passes
    mixture = _log_beta(PRIOR + passes, PRIOR + fails) - _log_beta(PRIOR, PRIOR)
    return mixture - passes * math.log(p) - fails * math.log(1 - p)


@lru_cache(maxsize=65536)
def confidence_sequence(passes: int, trials: int, alpha: float) -> tuple[float, float]:
    """The confidence sequence's interval for p after ``passes`` of ``trials`` trials: every p
    whose evidence stays below 1/alpha. It always holds passes/trials (the evidence there is at
    most 1); the bounds are found by bisection to 1e-9. No trials: (0, 1)."""
    if trials == 0:
        return 0.0, 1.0
    bar = math.log(1 / alpha)
    centre = passes / trials

    def outside(p: float) -> bool:
        return log_evidence(passes, trials, p) >= bar

    def edge(inside: float, beyond: float) -> float:
        # ``inside`` is in the set, ``beyond`` outside (or the open end 0 or 1).
        for _ in range(60):
            middle = (inside + beyond) / 2
            if abs(inside - beyond) < 1e-9:
                break
            if outside(middle):
                beyond = middle
            else:
                inside = middle
        return inside

    tiny = 1e-12
    low = 0.0 if passes == 0 or not outside(tiny) else edge(min(centre, 1 - tiny), tiny)
    high = 1.0 if passes == trials or not outside(1 - tiny) else edge(max(centre, tiny), 1 - tiny)
    return low, high


def cell_decision(passes: int, trials: int, rule: AdaptiveTrials) -> str | None:
    """ABOVE or BELOW the rule's threshold once the cell's sequence (at the rule's confidence)
    leaves the threshold out, else None (undecided)."""
    if trials == 0:
        return None
    if log_evidence(passes, trials, rule.threshold) < math.log(1 / (1 - rule.confidence)):
        return None
    return ABOVE if passes / trials > rule.threshold else BELOW


def pair_decided(a: tuple[int, int], b: tuple[int, int], rule: AdaptiveTrials) -> bool:
    """Whether two variants' cells of one case ((passes, trials) each) are told apart: both
    cells are decided (so is the case's outcome under each), or their sequences at confidence
    1 - alpha/2 no longer overlap, so the difference's sequence leaves out 0 (by the union
    bound it covers the true difference at every n with probability 1 - alpha)."""
    if cell_decision(*a, rule) is not None and cell_decision(*b, rule) is not None:
        return True
    half = (1 - rule.confidence) / 2
    low_a, high_a = confidence_sequence(*a, half)
    low_b, high_b = confidence_sequence(*b, half)
    return low_b > high_a or low_a > high_b


@dataclass(frozen=True)
class Cell:
    """One case under one variant as the procedure sees it."""

    passes: int
    trials: int
    running: int  # trials queued or running


def cells_wanting_a_trial(cells: Mapping[Key, Cell], rule: AdaptiveTrials) -> list[Key]:
    """Of one case's cells (by variant), those that get one more trial now: nothing of theirs
    is running, they are below the maximum, and either they have not reached the minimum or
    their own outcome or a pair they are in is undecided. A cell waits for its running trials:
    it is looked at only once all its trials ended, one more trial at a time."""
    undecided = {
        name
        for name, cell in cells.items()
        if cell.trials < rule.min or cell_decision(cell.passes, cell.trials, rule) is None
    }
    for (name_a, a), (name_b, b) in combinations(cells.items(), 2):
        if not pair_decided((a.passes, a.trials), (b.passes, b.trials), rule):
            undecided |= {name_a, name_b}
    return [
        name
        for name, cell in cells.items()
        if name in undecided and cell.running == 0 and cell.trials < rule.max
    ]


def trials_saved(trial_counts: Sequence[int], rule: AdaptiveTrials) -> int:
    """The trials an adaptive rule spared against running its maximum in every cell."""
    return sum(max(0, rule.max - n) for n in trial_counts)
