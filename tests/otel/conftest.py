"""A real OpenTelemetry receiver for the trace-export tests: Arize Phoenix, from its own
virtualenv (tests/setup/phoenix.sh), started once per test session on loopback ports and read
back through its REST API."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import REPO, free_port, tier_unavailable

PHOENIX = REPO / ".proctor" / "phoenix-venv" / "bin" / "phoenix"
START_TIMEOUT_S = 180
_NOT_FOR_PHOENIX = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "PYTHONPATH")


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory) -> Iterator[str]:
    """The base URL of a Phoenix server this session started (its OTLP/HTTP receiver is
    ``<url>/v1/traces``), stopped at the session's end."""
    if not PHOENIX.exists():
        tier_unavailable(
            "phoenix",
            f"Arize Phoenix is not installed at {PHOENIX} (tests/setup/phoenix.sh installs it)",
        )
    folder = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    # Phoenix's own environment: none of the suite's database, broker or Python path.
    env = {
        **{k: v for k, v in os.environ.items() if k not in _NOT_FOR_PHOENIX},
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (folder / "phoenix.log").open("wb")
    server = subprocess.Popen(
        [str(PHOENIX), "serve"],
        env=env,
        cwd=folder,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(server, url, folder / "phoenix.log")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _wait_for(server: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            tier_unavailable("phoenix", f"Phoenix exited at start: {log.read_text()[-800:]}")
        try:
            if httpx.get(f"{url}/v1/projects", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    tier_unavailable("phoenix", f"Phoenix did not answer within {START_TIMEOUT_S} s")
