"""The analysis pages' tests build on the dashboard's factories (tests/dashboard/factories.py)."""

from __future__ import annotations

import pytest
from factories import Cast, make_cast

from .compare_seeds import Pair, seed_pair


@pytest.fixture
def cast(db) -> Cast:
    return make_cast()


@pytest.fixture
def pair(cast) -> Pair:
    return seed_pair(cast, trials_b=2)
