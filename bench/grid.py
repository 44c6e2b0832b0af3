"""The dashboard's pages at 2,000 and at 20,000 trials: the grid (plain, sorted, filtered, with
its pass@k footer), a run, a trial and the API's batch, run and trial lists (and the trial
list's last page, reached by its next links), with their query counts, sizes and the ratio of
their times.

Each size is a finished batch seeded with `seed_demo_data` (50 and 500 cases x 8 variants x 5
trials) in its own organization with its own reader, into a fresh SQLite database (or, with
``--postgres URL``, a fresh PostgreSQL database at that server). Pages are requested in this
process through Django's test client, so the time is the server's alone (view, queries,
template, compression), not the network's or the browser's. Requests ask for gzip like a
browser does. The 2,000-trial batch is the baseline; the goal is a ratio of at most 1.5 and
the same query count at both sizes. Prints, never asserts; ratios last.

The grid draws a page of rows (100 in the dashboard) and loads the next as the reader
scrolls, so the 2,000-trial batch (50 cases) would draw 50 rows where the 20,000-trial one
draws 100: twice the cells to render, which is the page's size and not the batch's. Both
grids therefore draw 50 rows here (``--grid-rows``, default the small batch's case count),
and the ratio measures what the batch's size alone costs: the catalog of its cases, the
column totals, the flaky count, the filters and sorts over every row.

    .venv/bin/python bench/grid.py [--repeat 9] [--postgres postgresql://postgres@127.0.0.1:5432]
        [--grid-rows 100]
"""

from __future__ import annotations

import argparse
import gzip
import io
import statistics
import time
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import django_home

SIZES = (50, 500)  # cases: x 8 variants x 5 trials = 2,000 and 20,000 trials
VARIANTS = 8
TRIALS = 5
GOAL_RATIO = 1.5


def seed(cases: int) -> int:
    """A finished batch of ``cases`` cases in its own organization; returns its id."""
    from django.core.management import call_command

    from evals_app.models import Batch

    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        call_command(
            "seed_demo_data", cases=cases, variants=VARIANTS, trials=TRIALS, org=f"bench-{cases}"
        )
    return Batch.objects.filter(organization__slug=f"bench-{cases}").latest("created_at").pk


def pages(batch_id: int) -> dict[str, str]:
    """The URLs measured for one batch: its grid, its middle run and that run's first trial."""
    from evals_app.models import Run

    run_ids = list(
        Run.objects.filter(batch_id=batch_id).order_by("id").values_list("id", flat=True)
    )
    run = Run.objects.get(pk=run_ids[len(run_ids) // 2])
    trial = run.trials.order_by("index").first()
    assert trial is not None
    return {
        "grid": f"/batches/{batch_id}/",
        "grid, sorted by rate": f"/batches/{batch_id}/?sort=rate",
        "grid, failed only": f"/batches/{batch_id}/?status=failed",
        "grid, flaky only": f"/batches/{batch_id}/?status=flaky",
        "grid, pass@k": f"/batches/{batch_id}/?estimates=1",
        "run": f"/runs/{run.pk}/",
        "trial": f"/trials/{trial.pk}/",
        "api batches": "/api/batches/",
        "api runs of batch": f"/api/runs/?batch={batch_id}",
        "api trials of batch": f"/api/trials/?batch={batch_id}",
    }


def last_page(client, url: str) -> str:
    """The last page of an API list, reached as a client reaches it: by its next links (the
    lists page by cursor, so no page number names it)."""
    while True:
        following = client.get(url).json()["next"]
        if following is None:
            return url
        url = following.removeprefix("http://testserver")


def _request(client, url: str) -> tuple[list[float], int, int, str, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
        seconds = time.perf_counter() - started
    assert response.status_code == 200, f"{url} answered {response.status_code}"
    body = response.content
    if response.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    # Grid rows drawn: the same page at both sizes (see the docstring).
    rows = body.count(b'<tr id="case-row-')
    encoding = response.get("Content-Encoding", "-")
    return [seconds], len(queries), len(response.content), encoding, rows


def measure(
    targets: dict[int, tuple[Any, str]], repeat: int
) -> dict[int, tuple[float, int, int, str, int]]:
    """Median seconds, queries, bytes sent and Content-Encoding per size, the sizes' requests
    interleaved (small, large, small, large...) so a change of load hits both alike."""
    for client, url in targets.values():
        client.get(url, HTTP_ACCEPT_ENCODING="gzip")  # warm up
    times: dict[int, list[float]] = {size: [] for size in targets}
    last: dict[int, tuple[int, int, str, int]] = {}
    for _ in range(repeat):
        for size, (client, url) in targets.items():
            seconds, queries, sent, encoding, rows = _request(client, url)
            times[size] += seconds
            last[size] = (queries, sent, encoding, rows)
    return {size: (statistics.median(times[size]), *last[size]) for size in targets}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=9, help="requests per page (the median)")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server, no database name")
    parser.add_argument(
        "--grid-rows",
        type=int,
        metavar="N",
        default=SIZES[0],
        help=f"rows the grid draws per request (default {SIZES[0]}, the small batch's cases, so "
        "both sizes draw as many rows; the dashboard draws 100)",
    )
    args = parser.parse_args()

    django_home.set_up("proctor-bench-grid-", args.postgres, "proctor_bench_grid")
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from evals_app.models import Organization

    if args.grid_rows:
        import dashboard.views.grid

        dashboard.views.grid.ROWS_PER_PAGE = args.grid_rows
    print(
        f"seeding {' and '.join(str(c * VARIANTS * TRIALS) for c in SIZES)} trials "
        f"({connection.vendor}) ..."
    )
    batches = {cases: seed(cases) for cases in SIZES}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    clients = {}
    for cases in SIZES:
        reader = User.objects.create_user(f"bench-{cases}")
        Organization.objects.get(slug=f"bench-{cases}").members.add(reader)
        clients[cases] = Client()
        clients[cases].force_login(reader)

    urls = {cases: pages(batch_id) for cases, batch_id in batches.items()}
    for cases, batch_id in batches.items():
        urls[cases]["api trials, last page"] = last_page(
            clients[cases], f"/api/trials/?batch={batch_id}"
        )
    results: dict[str, dict[int, tuple[float, int, int, str, int]]] = {
        name: measure({c: (clients[c], urls[c][name]) for c in SIZES}, args.repeat)
        for name in urls[SIZES[0]]
    }

    small, large = SIZES
    trials = {c: c * VARIANTS * TRIALS for c in SIZES}
    print(
        f"{'page':<22} {'trials':>7} {'server ms':>10} {'queries':>8} {'KB sent':>8} "
        f"{'encoding':>9} {'rows':>5}"
    )
    for name, by_size in results.items():
        for cases, (seconds, queries, size, encoding, rows) in by_size.items():
            print(
                f"{name:<22} {trials[cases]:>7,} {seconds * 1000:>10.1f} {queries:>8} "
                f"{size / 1024:>8.1f} {encoding:>9} {rows or '':>5}"
            )
    print(f"ratios {trials[large]:,} / {trials[small]:,} trials (goal <= {GOAL_RATIO}):")
    for name, by_size in results.items():
        ratio = by_size[large][0] / by_size[small][0]
        same = "same queries" if by_size[large][1] == by_size[small][1] else "QUERIES DIFFER"
        print(f"  {name:<22} {ratio:5.2f}  {same}")


if __name__ == "__main__":
    main()
