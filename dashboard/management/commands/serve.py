"""proctor serve: the dashboard (HTTP and websockets) and, in the embedded mode, the queued
work (reruns from the UI) in this one process."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from runner.jobs.database import ensure_database
from runner.jobs.requeue import requeue_unfinished


class Command(BaseCommand):
    help = "Serve the dashboard on HOST:PORT (default 127.0.0.1:8000)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")

    def handle(self, *args, **options) -> None:
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server

        from proctor.asgi import application

        host, _, port = options["addrport"].rpartition(":")
        host = host or "127.0.0.1"
        ensure_database()
        if settings.EMBEDDED:
            count = requeue_unfinished()
            if count:
                self.stdout.write(f"Re-queued {count} unfinished trial{'s' if count != 1 else ''}.")
        self.stdout.write(
            f"Proctor at http://{host}:{port}/  (artifacts: {settings.ARTIFACTS_DIR})"
        )
        Server(
            application=application,
            endpoints=build_endpoint_description_strings(host=host, port=int(port)),
            signal_handlers=True,
            verbosity=0,
        ).run()
