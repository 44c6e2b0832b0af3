"""Running one host process in its own process group, streaming its output, with a deadline.

The one way Proctor starts a child process and waits for it: the sandboxes' steps, a
consultation command (``runner.llm.command_client``), the write audit's ``find``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

from runner.sandboxes.base import LineSink, ProcessResult

# After SIGTERM, how long the group gets to exit before SIGKILL.
TERMINATE_GRACE_S = 2.0
# Output kept in memory per stream; the rest is streamed to the sink only.
MAX_KEPT_CHARS = 2_000_000


def _pump(stream: IO[bytes], name: str, kept: list[str], on_line: LineSink | None) -> None:
    size = 0
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        if size < MAX_KEPT_CHARS:
            kept.append(line)
            size += len(line)
        if on_line is not None:
            on_line(name, line.rstrip("\n"))
    stream.close()


def _feed(stream: IO[bytes], data: bytes) -> None:
    # A process that never reads its stdin closes the pipe early; that is its business.
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.write(data)
    with contextlib.suppress(OSError):
        stream.close()


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout_s: float | None,
    on_line: LineSink | None = None,
    stdin: bytes | None = None,
) -> ProcessResult:
    """Run ``argv`` in a new session; on timeout, and after it exits, kill its whole group.

    Killing the group after a normal exit too means a backgrounded child (a dev server the agent
    started) cannot hold the output pipes open or outlive the step that started it.

    ``env`` None inherits the worker's environment, ``cwd`` None its directory. ``stdin`` is
    written to the process and then closed; without it stdin is closed from the start. Each
    stream keeps its first MAX_KEPT_CHARS in the result. A program that cannot be started is
    exit 127 with ``could not start <program>: <why>`` on stderr, as in every sandbox.
    """
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return ProcessResult(
            exit_code=127,
            stdout="",
            stderr=f"could not start {argv[0]}: {exc.strerror}\n",
            timed_out=False,
            duration_ms=0,
        )
    out: list[str] = []
    err: list[str] = []
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, "stdout", out, on_line), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, "stderr", err, on_line), daemon=True),
    ]
    if stdin is not None:
        pumps.append(threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True))
    for pump in pumps:
        pump.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=TERMINATE_GRACE_S)
    _kill_group(proc.pid, signal.SIGKILL)
    proc.wait()
    for pump in pumps:
        pump.join(timeout=5)
    return ProcessResult(
        exit_code=None if timed_out else proc.returncode,
        stdout="".join(out),
        stderr="".join(err),
        timed_out=timed_out,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
