"""Time limits on the eval's own code: validators, prepare and tool stubs.

A Python thread cannot be killed, so a validator stuck in ``time.sleep(3600)``, a ``while
True`` or a socket that never answers would hold a worker thread (and its trial) forever. Two
ways to bound it, used where each is sound:

- **A forked child** (``run_forked``), for validators (sync and async) and ``prepare``. The
  child inherits the callable and everything it reads (the transcript, ``prepared``, the
  sandbox handle: ``ctx`` methods read workspace files on the host and start sandbox
  commands, which works the same in the child). What it returns, raises and prints comes back
  through a pipe as pickled frames; past the limit the child's process group is killed with
  SIGKILL, so a hang really ends. The cost of crossing the boundary: what the code returns must
  be picklable (a bool, a Verdict, a dict of text), and changes it makes to its process (a
  module global, a ``subprocess.Popen`` kept for later) stay in the child. Attributes a
  validator sets on ``ctx`` (shared work, ``ctx.response = ...``) are copied back when
  picklable. Commands a hung child started through the sandbox are not in its process group
  (the sandbox starts them in their own session); the sandbox's teardown ends them.
- **A stopped daemon thread** (``run_in_thread``), for tool stubs and mock handlers. A stub
  often keeps state between calls (a fake calendar that remembers bookings) which a child
  would lose, and validators read that state, so it runs in this process. Past the limit the
  call is given up and the trial goes on; the thread is then sent ``UserCodeStopped``
  (``PyThreadState_SetAsyncExc``), which Python raises at the thread's next bytecode: a
  ``while True`` loop ends at once, a call blocked in C (a long ``time.sleep``, a socket read)
  ends when that call returns. The caller reports that plainly.

Defaults come from ``use_limits`` (installed from Django settings ``PROCTOR_CHECK_TIMEOUT_S``,
``PROCTOR_PREPARE_TIMEOUT_S`` and ``PROCTOR_TOOL_TIMEOUT_S`` by RunnerConfig.ready); a case
overrides the first two with ``check_timeout_ms`` and ``prepare_timeout_ms``.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

# Python 3.12 warns on every fork of a multi-threaded process; the child here runs only the
# eval's call and leaves through os._exit, never back into the worker's code.
warnings.filterwarnings("ignore", message=r".*multi-threaded.*fork", category=DeprecationWarning)


@dataclass(frozen=True)
class UserCodeLimits:
    check_s: float = 60.0
    prepare_s: float = 10 * 60.0
    tool_s: float = 60.0


_limits = UserCodeLimits()


def use_limits(limits: UserCodeLimits) -> None:
    """Make ``limits`` this process's defaults (called once at start-up)."""
    global _limits
    _limits = limits


def default_limits() -> UserCodeLimits:
    return _limits


def seconds(limit_s: float) -> str:
    """``60 s``, ``1.5 s``: a limit as a sentence shows it."""
    return f"{limit_s:.0f} s" if limit_s >= 10 else f"{limit_s:.2g} s"


class UserCodeError(Exception):
    """The eval's code did not return: it hung, raised, or ended its process. The message is
    the sentence to show; ``printed`` is what it printed before."""

    def __init__(self, message: str, printed: str = "") -> None:
        super().__init__(message)
        self.printed = printed


class UserCodeTimedOut(UserCodeError):
    pass


class UserCodeStopped(BaseException):
    """Raised inside a thread whose call ran past its limit, to end it (a BaseException, so a
    stub's own ``except Exception`` cannot swallow it)."""


class UserCodeRaised(UserCodeError):
    """The call raised; the message is the exception's type and text."""


def _send(writer: io.BufferedWriter, tag: str, payload: Any) -> None:
    data = pickle.dumps((tag, payload))
    writer.write(len(data).to_bytes(8, "big") + data)
    writer.flush()


class _PrintStream(io.TextIOBase):
    """The child's stdout and stderr: each write goes to the parent as it is made, so what a
    hung call printed before it hung is kept."""

    def __init__(self, writer: io.BufferedWriter) -> None:
        self._writer = writer

    def write(self, text: str) -> int:
        if text:
            _send(self._writer, "print", text)
        return len(text)


def _child(call: Callable[[Callable[[Any], None]], Any], write_fd: int) -> None:
    """The forked child's whole life; never returns."""
    status = 0
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        writer = os.fdopen(write_fd, "wb")
        sys.stdout = sys.stderr = _PrintStream(writer)
        try:
            value = call(lambda note: _send(writer, "note", note))
        except BaseException as exc:  # SystemExit too: the eval's code must not end the child early
            _send(writer, "raised", f"{type(exc).__name__}: {exc}")
        else:
            try:
                _send(writer, "value", value)
            except Exception as exc:
                _send(
                    writer,
                    "raised",
                    f"returned a {type(value).__name__}, which cannot be sent back to the worker "
                    f"({type(exc).__name__}: {exc})",
                )
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _reap(pid: int) -> int | None:
    """The child's exit status, once it is gone (None when someone else reaped it)."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status)


def run_forked(
    call: Callable[[Callable[[Any], None]], Any],
    *,
    limit_s: float,
    what: str,
    on_note: Callable[[Any], None] | None = None,
) -> tuple[Any, str]:
    """(value, printed) of ``call(note)`` run in a forked child for at most ``limit_s``.

    ``note(x)`` in the child hands ``x`` to ``on_note`` here as it happens. Raises
    UserCodeTimedOut ("<what> did not finish within 60 s") after killing the child,
    UserCodeRaised with the exception's type and message when the call raised, or UserCodeError
    when its process ended without an answer. Cost: a fork of this process (copy-on-write) per call.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(call, write_fd)
    os.close(write_fd)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also here: whichever of the two runs first
    printed: list[str] = []
    outcome: tuple[str, Any] | None = None
    buffer = b""
    deadline = time.monotonic() + limit_s
    try:
        while outcome is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill_group(pid)
                raise UserCodeTimedOut(
                    f"{what} did not finish within {seconds(limit_s)}", "".join(printed)
                )
            ready, _, _ = select.select([read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break  # the child is gone
            buffer += chunk
            while len(buffer) >= 8 and len(buffer) >= 8 + int.from_bytes(buffer[:8], "big"):
                size = int.from_bytes(buffer[:8], "big")
                try:
                    tag, payload = pickle.loads(buffer[8 : 8 + size])
                except Exception as exc:
                    tag, payload = "raised", f"sent back what cannot be read here ({exc})"
                buffer = buffer[8 + size :]
                if tag == "print":
                    printed.append(payload)
                elif tag == "note":
                    if on_note is not None:
                        on_note(payload)
                else:
                    outcome = (tag, payload)
                    break
    finally:
        os.close(read_fd)
        if outcome is None:
            _kill_group(pid)
        status = _reap(pid)
    text = "".join(printed)
    if outcome is None:
        raise UserCodeError(
            f"{what} ended its process (exit status {status}) without returning", text
        )
    tag, payload = outcome
    if tag == "raised":
        raise UserCodeRaised(payload, text)
    return payload, text


def run_in_thread(call: Callable[[], T], *, limit_s: float, what: str) -> T:
    """``call()`` in a daemon thread, waited for at most ``limit_s``; its exception is raised
    here. Past the limit raises UserCodeTimedOut and leaves the thread running (see above)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, name=f"proctor-{what}", daemon=True)
    thread.start()
    if not done.wait(limit_s):
        _stop_thread(thread)
        raise UserCodeTimedOut(f"{what} did not finish within {seconds(limit_s)}")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _stop_thread(thread: threading.Thread) -> None:
    """Ask Python to raise UserCodeStopped in ``thread`` at its next bytecode."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(UserCodeStopped)
        )
