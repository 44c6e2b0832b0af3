"""`proctor serve` with nothing configured runs on the built-in SECRET_KEY: it refuses to listen
beyond this machine with it, and says so once when it listens on loopback."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import PROCTOR, free_port, proctor_env

SENTENCE = "with the built-in SECRET_KEY: set DJANGO_SECRET_KEY"


def env_without_key(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = proctor_env(tmp_path / "home")
    env.pop("DJANGO_SECRET_KEY", None)
    return {**env, **extra}


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]", "192.0.2.10", "example.test"])
def test_it_refuses_a_non_loopback_bind_with_the_built_in_key(tmp_path, host):
    result = subprocess.run(
        [PROCTOR, "serve", f"{host}:{free_port()}"],
        cwd=tmp_path,
        env=env_without_key(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )

    assert result.returncode == 2, result.stderr
    assert SENTENCE in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "home" / "proctor.sqlite3").exists()  # refused before anything


def test_it_serves_on_loopback_with_one_warning(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [PROCTOR, "serve", f"127.0.0.1:{port}"],
        cwd=tmp_path,
        env=env_without_key(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        status = _first_answer(f"http://127.0.0.1:{port}/login/", server)
    finally:
        server.terminate()
        try:
            _, stderr = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            _, stderr = server.communicate()

    assert status == 200
    assert stderr.count("built-in SECRET_KEY") == 1, stderr
    assert "DJANGO_SECRET_KEY" in stderr


def test_a_configured_key_serves_anywhere_without_a_warning(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [PROCTOR, "serve", f"0.0.0.0:{port}"],
        cwd=tmp_path,
        env=env_without_key(tmp_path, DJANGO_SECRET_KEY="a-long-random-value-for-this-test-only"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        status = _first_answer(f"http://127.0.0.1:{port}/login/", server)
    finally:
        server.terminate()
        try:
            _, stderr = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            _, stderr = server.communicate()

    assert status == 200
    assert "SECRET_KEY" not in stderr


def _first_answer(url: str, server: subprocess.Popen, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"proctor serve exited with {server.returncode}: {server.stderr.read()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"proctor serve did not answer {url} within {timeout} s")
