"""proctor serve: the dashboard (HTTP and websockets) and, in the embedded mode, the queued
work (reruns from the UI) in this one process."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runner.jobs import dispatch, reaper
from runner.jobs.database import ensure_database
from runner.jobs.pickup import hand_back_running, requeue_unfinished

# How long a stopping `serve` lets its running trials finish before it hands them back.
STOP_GRACE_S = 10.0


class Command(BaseCommand):
    help = "Serve the dashboard on HOST:PORT (default 127.0.0.1:8000)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")

    def handle(self, *args, **options) -> None:
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server

        # The ASGI application, once the command has set Django up.
        from proctor.site.asgi import application

        host, _, port = options["addrport"].rpartition(":")
        host = host or "127.0.0.1"
        self.check_secret_key(host)
        problem = listen_problem(host, port)
        if problem:
            # Said before anything starts: daphne would announce the server, then log the
            # failure and stop with exit code 0.
            raise CommandError(f"cannot listen on {host}:{port}: {problem}", returncode=2)
        ensure_database()
        if settings.EMBEDDED:
            count = requeue_unfinished()
            if count:
                self.stdout.write(f"Re-queued {count} unfinished trial{'s' if count != 1 else ''}.")
        # Trials whose worker (or embedded process) died are re-queued or ended from here on.
        reaper.start()
        self.stdout.write(
            f"Proctor at http://{host}:{port}/  (artifacts: {settings.ARTIFACTS_DIR})"
        )
        Server(
            application=application,
            endpoints=build_endpoint_description_strings(host=host, port=int(port)),
            signal_handlers=True,
            verbosity=0,
        ).run()
        if settings.EMBEDDED:
            self.stop_trials()

    def stop_trials(self) -> None:
        """After SIGTERM (or Ctrl-C) closed the port: queued trials stay queued, running ones
        finish within STOP_GRACE_S or are handed back, then the process ends at once."""
        if dispatch.stop_local_workers(STOP_GRACE_S):
            given = hand_back_running()
            if given:
                self.stdout.write(
                    f"Handed back {len(given)} running trial{'s' if len(given) != 1 else ''}; "
                    "the next start runs them."
                )
        sys.stdout.flush()
        sys.stderr.flush()
        # Not a normal interpreter exit: it would join every thread still running a handed-back
        # trial (and the web stack's own), which is what kept a stopped serve alive for 30 s.
        os._exit(0)

    def check_secret_key(self, host: str) -> None:
        """Refuse the built-in SECRET_KEY beyond loopback: anyone who reads this repository
        could sign a session cookie for any user. On loopback it is only this machine."""
        if settings.SECRET_KEY != settings.DEFAULT_SECRET_KEY:
            return
        if not is_loopback(host):
            raise CommandError(
                f"Refusing to serve on {host} with the built-in SECRET_KEY: set "
                "DJANGO_SECRET_KEY to a long random value (or bind to 127.0.0.1).",
                returncode=2,
            )
        self.stderr.write(
            "Warning: serving with the built-in SECRET_KEY; set DJANGO_SECRET_KEY before "
            "serving beyond this machine."
        )


def listen_problem(host: str, port: str) -> str | None:
    """Why ``host:port`` cannot be listened on (not a port number, an address in use or not
    this machine's), or None. The probe sets SO_REUSEADDR as the server's own socket does, so
    an address only lingering after a stopped server counts as free."""
    if not port.isdigit() or not 0 < int(port) < 65536:
        return f"{port!r} is not a port number (1-65535)"
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host.strip("[]"), int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
            probe.listen()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name, an IPv4 or a bracketed IPv6 address) only listens on this
    machine; any other name counts as reachable from outside."""
    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
