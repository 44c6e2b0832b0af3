"""Consulting a model through a command: the prompt as JSON on stdin, the answer on stdout.

This lets a judge or the responder go through the same harness as the agent under test (an
agent CLI in its print mode, a local model runner). The command runs with ``bash -c`` in a fresh
empty directory of its own, outside every task workspace: a consultation must not write into
the codebase under measurement, nor pick up its CLAUDE.md or AGENTS.md as instructions.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import IO, Any

from runner.llm.completion import DISPATCH_FAILED, DISPATCH_TIMED_OUT, Completion, LLMError
from runner.llm.settings import LLMConfig, scrub_key

# After SIGTERM, how long the command's group gets before SIGKILL.
TERMINATE_GRACE_S = 2.0
# How much of stderr a failure quotes: the end, where the error usually is.
STDERR_TAIL_CHARS = 500
SCRATCH_PREFIX = "proctor-consultation-"


def stdin_payload(
    config: LLMConfig, messages: list[dict[str, Any]], *, json_mode: bool
) -> dict[str, Any]:
    return {"model": config.model, "messages": messages, "json": json_mode}


def complete_command(
    config: LLMConfig, messages: list[dict[str, Any]], *, json_mode: bool = False
) -> Completion:
    """Run the configured command once and return what it printed. Blocks up to
    ``timeout_s``; the command's whole process group is killed when it is over."""
    assert config.command, "complete_command needs a command"
    payload = json.dumps(stdin_payload(config, messages, json_mode=json_mode)).encode()
    scratch = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
    started = time.monotonic()
    try:
        exit_code, stdout, stderr = _run(
            config.command, payload, cwd=scratch, timeout_s=config.timeout_s
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    duration_ms = int((time.monotonic() - started) * 1000)
    if exit_code is None:
        raise LLMError(
            DISPATCH_TIMED_OUT,
            f"the consultation command did not finish within {config.timeout_s:g}s",
        )
    if exit_code != 0:
        tail = _tail(stderr) or "it printed nothing on stderr"
        raise LLMError(
            DISPATCH_FAILED,
            scrub_key(
                f"the consultation command exited with status {exit_code}: {tail}", config.api_key
            ),
        )
    # The text loses the trailing newline every shell command prints; raw keeps it.
    return Completion(
        text=stdout.strip(), raw=stdout, model=config.model or "", usage={}, duration_ms=duration_ms
    )


def _run(
    command: str, payload: bytes, *, cwd: str, timeout_s: float
) -> tuple[int | None, str, str]:
    """(exit code or None on timeout, stdout, stderr). Its own session, so the whole group can
    be killed, also after a normal exit: a backgrounded child cannot hold the pipes open."""
    try:
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=dict(os.environ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise LLMError(
            DISPATCH_FAILED, f"could not start the consultation command: {exc.strerror}"
        ) from None
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out: list[bytes] = []
    err: list[bytes] = []
    threads = [
        threading.Thread(target=_feed, args=(proc.stdin, payload), daemon=True),
        threading.Thread(target=_drain, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err), daemon=True),
    ]
    for thread in threads:
        thread.start()
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
    for thread in threads:
        thread.join(timeout=5)
    stdout = b"".join(out).decode("utf-8", errors="replace")
    stderr = b"".join(err).decode("utf-8", errors="replace")
    return (None if timed_out else proc.returncode), stdout, stderr


def _feed(stream: IO[bytes], payload: bytes) -> None:
    # A command that never reads its stdin closes the pipe early; that is its business.
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.write(payload)
    with contextlib.suppress(OSError):
        stream.close()


def _drain(stream: IO[bytes], into: list[bytes]) -> None:
    for chunk in iter(lambda: stream.read(64 * 1024), b""):
        into.append(chunk)
    stream.close()


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _tail(stderr: str) -> str:
    text = " ".join(stderr.split())
    return text if len(text) <= STDERR_TAIL_CHARS else "…" + text[-STDERR_TAIL_CHARS:]
