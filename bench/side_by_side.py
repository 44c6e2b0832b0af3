"""The side-by-side page of two 10,000-event trials against that of a one-turn pair: the first
view (the alignment computed: every event's signature read), a later view (the alignment
from the cache), and a later window of rows as htmx asks for it, with their query counts and
sizes, and the ratio of their times to the one-turn pair's.

Both pairs are two finished trials of one case in a fresh SQLite database (or, with
``--postgres URL``, a fresh PostgreSQL database at that server). The large pair has
``--events`` events a side over ``--turns`` turns, a mix of messages, commands with a couple
of kilobytes of output, tool calls and file changes; B takes other steps for a while in the
middle turn, and the rest is alike. The one-turn pair has six events a side and differs at
the third. Pages are requested in this process through Django's test client (the server's
time alone: view, queries, template, compression). The first view clears the cache before
each request. Prints, never asserts; ratios last.

    .venv/bin/python bench/side_by_side.py [--repeat 7] [--events 10000] [--turns 10]
        [--postgres postgresql://postgres@127.0.0.1:5432]
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import time
from typing import Any

import django_home


def _steps(count: int, *, other: bool) -> list[tuple[str, dict]]:
    """``count`` events of one turn; with ``other``, a stretch in the middle differs."""
    listing = "collected 40 items\n" + "tests/test_app.py ....\n" * 90
    steps: list[tuple[str, dict]] = []
    for n in range(count):
        differs = other and count // 2 <= n < count // 2 + 25
        mark = "b" if differs else "a"
        kind = n % 4
        if kind == 0:
            steps.append(("Message", {"role": "assistant", "text": f"Step {n}{mark}: next."}))
        elif kind == 1:
            steps.append(
                (
                    "Command",
                    {
                        "command": f"pytest -q -k t{n}{mark}",
                        "exit_code": 0,
                        # Another summary at each step, timed differently in each trial.
                        "output": f"{listing}{n % 40} passed in 0.{(n * 7 + len(mark)) % 97}s\n",
                    },
                )
            )
        elif kind == 2:
            steps.append(
                (
                    "ToolCall",
                    {"name": "edit", "input": f'{{"path": "m{n}{mark}.py"}}', "output": "ok"},
                )
            )
        else:
            steps.append(("FileChange", {"paths": [f"m{n}{mark}.py"]}))
    return steps


def seed_pair(org, case_version, *, events: int, turns: int, tag: str) -> tuple[int, int]:
    """Two finished trials of ``case_version``, each in its own run and variant."""
    from django.utils import timezone

    from evals_app.models import Batch, Event, Run, Trial, Turn, Variant

    batch = Batch.objects.create(organization=org, status=Batch.Status.FINISHED)
    ids = []
    for side in ("a", "b"):
        spec = {"harness": "command", "name": f"{tag}-{side}"}
        variant = Variant.objects.create(
            organization=org,
            name=f"{tag}-{side}",
            harness="command",
            spec=spec,
            spec_hash=f"{tag}-{side}",
        )
        run = Run.objects.create(batch=batch, case_version=case_version, variant=variant)
        now = timezone.now()
        trial = Trial.objects.create(
            run=run, index=0, status=Trial.Status.PASSED, started_at=now, finished_at=now
        )
        Turn.objects.bulk_create(
            Turn(trial=trial, index=t, prompt=f"Part {t} of the work.") for t in range(turns)
        )
        per_turn = events // turns
        rows = []
        for t in range(turns):
            steps = _steps(per_turn, other=side == "b" and t == turns // 2)
            for kind, data in steps:
                rows.append(
                    Event(trial=trial, turn_index=t, seq=len(rows), kind=kind, at=now, data=data)
                )
        Event.objects.bulk_create(rows, batch_size=2000)
        ids.append(trial.pk)
    return ids[0], ids[1]


def _request(client, url: str, *, cold: bool, htmx: bool = False) -> tuple[float, int, int]:
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if cold:
        cache.clear()
    headers: dict[str, Any] = {"HTTP_ACCEPT_ENCODING": "gzip"}
    if htmx:
        headers["HTTP_HX_REQUEST"] = "true"
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = client.get(url, **headers)
        seconds = time.perf_counter() - started
    assert response.status_code == 200, f"{url} answered {response.status_code}"
    body = response.content
    if response.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    return seconds, len(queries), len(body)


def measure(client, url: str, repeat: int, **kind: bool) -> tuple[float, int, int]:
    _request(client, url, **kind)  # warm up (templates, connection)
    runs = [_request(client, url, **kind) for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), runs[-1][1], runs[-1][2]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=7, help="requests per page (the median)")
    parser.add_argument("--events", type=int, default=10_000, help="events a side, large pair")
    parser.add_argument("--turns", type=int, default=10, help="turns of the large pair")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server, no database name")
    args = parser.parse_args()

    django_home.set_up("proctor-bench-side-by-side-", args.postgres, "proctor_bench_side_by_side")
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from evals_app.models import Case, CaseVersion, Organization, Suite

    org = Organization.objects.create(slug="bench", name="Bench")
    suite = Suite.objects.create(organization=org, slug="bench", name="Bench")
    case = Case.objects.create(organization=org, suite=suite, slug="long", name="Long")
    version = CaseVersion.objects.create(
        case=case, number=1, definition={}, definition_hash="0" * 64, module_path="/x.eval.py"
    )
    print(f"seeding two pairs: {args.events:,} and 6 events a side ({connection.vendor}) ...")
    large = seed_pair(org, version, events=args.events, turns=args.turns, tag="large")
    small = seed_pair(org, version, events=6, turns=1, tag="small")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    reader = User.objects.create_user("bench-reader")
    org.members.add(reader)
    client = Client()
    client.force_login(reader)

    def urls(pair: tuple[int, int]) -> dict[str, tuple[str, dict[str, bool]]]:
        page = f"/trials/{pair[0]}/compare/{pair[1]}/"
        return {
            "first view": (page, {"cold": True}),
            "later view": (page, {"cold": False}),
            "a window (htmx)": (f"{page}?turn=0&start=0&fold=0", {"cold": False, "htmx": True}),
        }

    results = {
        name: {
            size: measure(client, urls(pair)[name][0], args.repeat, **urls(pair)[name][1])
            for size, pair in (("one turn", small), (f"{args.events:,} events", large))
        }
        for name in urls(small)
    }
    print(f"{'page':<18} {'pair':>15} {'server ms':>10} {'queries':>8} {'KB drawn':>9}")
    for name, by_size in results.items():
        for size, (seconds, queries, drawn) in by_size.items():
            print(
                f"{name:<18} {size:>15} {seconds * 1000:>10.1f} {queries:>8} {drawn / 1024:>9.1f}"
            )
    print(f"ratios {args.events:,}-event pair / one-turn pair:")
    for name, by_size in results.items():
        (small_s, small_q, _), (large_s, large_q, _) = by_size.values()
        same = "same queries" if small_q == large_q else "QUERIES DIFFER"
        print(f"  {name:<18} {large_s / small_s:6.2f}  {same}")


if __name__ == "__main__":
    main()
