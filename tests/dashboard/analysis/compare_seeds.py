"""The story the analysis tests share: batch A, then batch B in which one case regressed,
built with the dashboard's factories (tests/dashboard/factories.py)."""

from __future__ import annotations

from dataclasses import dataclass

from factories import (
    Cast,
    make_batch,
    make_case,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from evals_app.models import Batch, Trial

S = Trial.Status


@dataclass
class Pair:
    cast: Cast
    a: Batch
    b: Batch


def seed_pair(cast: Cast, *, trials_b: int = 3) -> Pair:
    """Two batches of the same four cases under the variants steady and quick, three trials
    each: every cell passes in A; in B ``planted`` fails every trial under steady (the planted
    regression), ``wobbly`` passes 2 of 3 under quick, and ``planted`` under quick runs
    ``trials_b`` trials."""
    versions = {
        slug: make_version(make_case(cast.acme, slug))
        for slug in ("planted", "steady-one", "steady-two", "wobbly")
    }
    variants = [make_variant(cast.acme, "steady"), make_variant(cast.acme, "quick")]

    def batch(label: str, outcome) -> Batch:
        made = make_batch(cast.acme, label=label, created_by=cast.alice, status="finished")
        for slug, version in versions.items():
            for variant in variants:
                run = make_run(made, version, variant)
                count = (
                    trials_b
                    if (label == "B" and slug == "planted" and variant.name == "quick")
                    else 3
                )
                for index in range(count):
                    make_trial(run, index, outcome(slug, variant.name, index), cost_usd=0.01)
        return made

    a = batch("A", lambda slug, variant, index: S.PASSED)

    def in_b(slug: str, variant: str, index: int) -> str:
        if slug == "planted" and variant == "steady":
            return S.FAILED
        if slug == "wobbly" and variant == "quick" and index == 2:
            return S.FAILED
        return S.PASSED

    b = batch("B", in_b)
    return Pair(cast, a, b)
