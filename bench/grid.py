"""The grid's server time for a 50-case and a 500-case batch (8 variants, 5 trials each), and
their ratio.

Both batches are seeded with `seed_demo_data` into a fresh SQLite database, then the grid page
is requested in this process through Django's test client, so the time is the server's alone
(view, queries, template), not the network's or the browser's. The 50-case batch is the
baseline the 500-case one is compared with; prints times, query counts and ratios, never
asserts them.

    .venv/bin/python bench/grid.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

SIZES = (50, 500)
VARIANTS = 8
TRIALS = 5


def seed(cases: int) -> int:
    """A finished batch of ``cases`` cases in its own organization; returns its id."""
    from django.core.management import call_command

    from evals_app.models import Batch

    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        call_command(
            "seed_demo_data", cases=cases, variants=VARIANTS, trials=TRIALS, org=f"bench-{cases}"
        )
    return Batch.objects.filter(organization__slug=f"bench-{cases}").latest("created_at").pk


def measure(client, url: str, repeat: int) -> tuple[float, int, int]:
    """Median seconds, queries and bytes of ``repeat`` requests for ``url`` (after one warm-up)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)
    times = []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - started)
        assert response.status_code == 200, f"{url} answered {response.status_code}"
    return statistics.median(times), len(queries), len(response.content)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="requests per size (the median is shown)"
    )
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="proctor-bench-grid-"))
    os.environ["PROCTOR_HOME"] = str(home)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "proctor.settings"
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.test import Client

    from evals_app.models import Organization
    from runner.jobs.database import ensure_database

    ensure_database()
    print(
        f"seeding {' and '.join(map(str, SIZES))} cases x {VARIANTS} variants x {TRIALS} trials into {home} ..."
    )
    batches = {cases: seed(cases) for cases in SIZES}
    reader = User.objects.create_user("bench")
    for org in Organization.objects.filter(slug__startswith="bench-"):
        org.members.add(reader)
    client = Client()
    client.force_login(reader)

    print(f"{'cases':>6} {'runs':>6} {'server ms':>10} {'queries':>8} {'KB':>7}")
    results = {}
    for cases, batch_id in batches.items():
        seconds, queries, size = measure(client, f"/batches/{batch_id}/", args.repeat)
        results[cases] = seconds
        print(
            f"{cases:>6} {cases * VARIANTS:>6} {seconds * 1000:>10.1f} {queries:>8} {size / 1024:>7.0f}"
        )
    small, large = SIZES
    print(
        f"ratio {large}/{small} cases: {results[large] / results[small]:.2f} "
        f"(the data grows {large // small}x)"
    )


if __name__ == "__main__":
    main()
