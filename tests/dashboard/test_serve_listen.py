"""`proctor serve` on an address it cannot listen on (a port another process holds, a port that
is no number) says so in one line and exits 2 before it starts anything; before, it announced
itself, logged daphne's failure and exited 0."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from conftest import proctor_env, run_proctor


def serve(tmp_path: Path, addrport: str) -> subprocess.CompletedProcess:
    return run_proctor(
        "serve", addrport, cwd=tmp_path, env=proctor_env(tmp_path / "home"), timeout=60
    )


def test_a_port_another_process_listens_on_is_refused_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(tmp_path, f"127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr
    assert "Traceback" not in done.stderr
    assert "Proctor at" not in done.stdout
    assert not (tmp_path / "home" / "proctor.sqlite3").exists()  # refused before anything


@pytest.mark.parametrize("port", ["http", "0", "70000"])
def test_a_port_that_is_no_port_number_is_refused_in_one_line(tmp_path: Path, port: str) -> None:
    done = serve(tmp_path, f"127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    assert f"'{port}' is not a port number (1-65535)" in done.stderr
    assert "Traceback" not in done.stderr
