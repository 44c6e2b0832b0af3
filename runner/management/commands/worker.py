"""proctor worker: a Celery worker that runs queued trials (scaled mode, REDIS_URL set)."""

from __future__ import annotations

import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from runner.jobs.database import require_connection
from runner.jobs.pool_size import default_concurrency


class Command(BaseCommand):
    help = "Run queued trials from the broker (needs REDIS_URL)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "-c",
            "--concurrency",
            type=int,
            default=default_concurrency(),
            help="trials run at once (default: the CPU count)",
        )
        parser.add_argument("--loglevel", default="info")

    def handle(self, *args, **options) -> None:
        if settings.EMBEDDED:
            self.stderr.write(
                "proctor worker needs REDIS_URL; with nothing configured `proctor serve` and "
                "`proctor eval` run trials themselves."
            )
            sys.exit(2)
        # A database nothing answers at is said now, not by every trial the worker takes.
        require_connection()
        connection.close()  # each of the pool's threads opens its own
        # Celery is loaded once the worker is known to have what it needs (start-up time).
        from proctor.site.celery import app

        # Threads, not forks: a trial is mostly waiting on its agent's process, and threads keep
        # one database connection each without fork-safety concerns.
        app.worker_main(
            [
                "worker",
                "--pool",
                "threads",
                "--concurrency",
                str(options["concurrency"]),
                "--loglevel",
                options["loglevel"],
                "--without-gossip",
                "--without-mingle",
            ]
        )
