"""A docker sandbox's steps run by a small shell server inside its container, not by an exec.

An engine exec costs 50–77 ms of the engine's own work here (``runc exec`` joins the container
before the program starts), against 210–230 ms for the container's create and start; a no-op
trial has two steps. So the container's keep-alive is a server: a POSIX ``sh`` loop that reads
a step's token from a FIFO, runs that step's script with its stdout and stderr on two more
FIFOs, and writes its exit status to a fourth. Every FIFO lives in the trial's ``steps``
folder, made by Proctor on the host and mounted read-only into the container at the same path
(a FIFO on a read-only mount can still be opened for writing). A step then costs a fork in the
container and a few system calls, and its output is read from pipes as a local step's is.

What a step sees is what an exec gave it: the container's environment with the step's own
added (exported by its script), its folder, stdin closed, the container's user, limits and
namespaces, and the default action for every signal (the server runs each step in the
foreground: a shell's background job would start with SIGINT and SIGQUIT ignored). The script
``exec``s the program, so the step's process is the program; the shell's "exec: X: not found"
(127) is made the same "could not start" result as every sandbox's.

The server is the container's keep-alive, init's only child. It reads the end of its requests,
and exits, once no process holds the FIFO's other end: Proctor's descriptor, closed when the
sandbox is destroyed or Proctor dies, so the container ends with it (once the step running
then, if any, ends). It cannot be fooled by the agent, which runs as the same user in the same
container: each step has an unguessable token, the server runs only a script Proctor wrote in a
folder the container cannot write, every process a step leaves is killed before the next step
starts (the docker sandbox's sweep), and a step that kills the server ends the container with
it (init exits with its child), which errors the trial.

Where the server cannot be used (the container's processes are not seen from here, the server
cannot open its FIFOs and sleeps instead, a variable name a shell cannot export, a NUL byte)
the step is an engine exec, as before.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import secrets
import select
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from runner.sandboxes.base import ProcessResult, SandboxError
from runner.sandboxes.processes import READ_CHUNK, LineSplitter

# The server: $1 is the steps folder, $2 how long to sleep instead where it cannot open its
# FIFOs (the container then lives as a plain keep-alive, and every step is an exec). It reads
# tokens until the requests FIFO has no writer left. A token that is not plain hex is skipped,
# never used in a path.
SERVER_SCRIPT = r"""
d=$1
if [ -r "$d/requests" ] && [ -w "$d/ready" ]; then
  exec 3<"$d/requests"
  echo ready >"$d/ready"
else
  exec sleep "$2"
fi
while IFS= read -r token <&3; do
  case $token in ''|*[!0-9a-f]*) continue ;; esac
  sh "$d/step-$token" </dev/null >"$d/out-$token" 2>"$d/err-$token"
  echo $? >"$d/exit-$token"
done
"""
# How long the server may take to say it is ready once the container started.
READY_S = 2.0
# A name a POSIX shell can export.
_EXPORTABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _fifo(path: Path) -> Path:
    os.mkfifo(path, 0o600)
    return path


def _open_to_read(path: Path) -> int:
    # Non-blocking, so the open does not wait for a writer. Until a writer has opened it, poll
    # reports nothing on it (not even a hang-up), so no step's end is taken from a FIFO that
    # simply was not opened yet.
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)


class StepServer:
    """The host's end of one container's server: made before the container, ``ready`` after it
    started, ``close`` when the sandbox is destroyed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(exist_ok=True)
        # Held open for reading and writing, so the server's open never blocks and it reads an
        # end of file only once this process is gone.
        self._requests = os.open(_fifo(folder / "requests"), os.O_RDWR | os.O_CLOEXEC)
        self._ready = _open_to_read(_fifo(folder / "ready"))
        self.pidfd: int | None = None
        self.serving = False

    def container_command(self, keepalive_s: int) -> list[str]:
        """The container's ``Cmd``: the server (or, where it cannot serve, a sleep of
        ``keepalive_s``)."""
        return ["sh", "-c", SERVER_SCRIPT, "step-server", str(self.folder), str(keepalive_s)]

    def wait_until_ready(self) -> bool:
        """Whether the server said, within READY_S of the container's start, that it is ready."""
        poll = select.poll()
        poll.register(self._ready, select.POLLIN)
        return bool(poll.poll(READY_S * 1000)) and os.read(self._ready, 64) == b"ready\n"

    def serve(self, server_pid: int) -> None:
        """Run steps from now on, watching the server (its host pid) through a pidfd."""
        with contextlib.suppress(OSError):
            self.pidfd = os.pidfd_open(server_pid)
            self.serving = True

    def can_run(self, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> bool:
        """Whether the server serves and the step can be written as a script for it:
        exportable names, no NUL byte."""
        texts = [*argv, *env.values(), cwd]
        return (
            self.serving
            and bool(argv)
            and all(_EXPORTABLE.match(name) for name in env)
            and not any("\0" in text for text in texts)
        )

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        streams: tuple[LineSplitter, LineSplitter],
    ) -> ServerStep:
        """Start one step; its output goes to ``streams`` (stdout, stderr) as it is read."""
        token = secrets.token_hex(16)
        lines = [f"cd -- {shlex.quote(cwd)} || exit 126"]
        lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
        lines.append("exec " + " ".join(shlex.quote(arg) for arg in argv))
        step = ServerStep(self, token, streams)
        try:
            step.script.write_text("\n".join(lines) + "\n", encoding="utf-8")
            os.write(self._requests, f"{token}\n".encode())
        except BaseException:
            step.close()
            raise
        return step

    def close(self) -> None:
        """No more steps: the server reads the end of its requests and exits, and the container
        with it. Once only, as a descriptor number closed twice may by then be another
        thread's."""
        for fd in (self._requests, self._ready, self.pidfd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._requests = self._ready = -1
        self.pidfd = None
        self.serving = False


# How long a step whose exit FIFO closed without a status waits to learn whether the server
# died (its pidfd turns readable) rather than a step meddling with the FIFO.
DEATH_GRACE_S = 2.0


def _readable_within(fd: int, seconds: float) -> bool:
    waiter = select.poll()
    waiter.register(fd, select.POLLIN)
    return bool(waiter.poll(math.ceil(seconds * 1000)))


class ServerStep:
    """One step the server runs: its output FIFOs read into their splitters, its exit status
    read from the exit FIFO, and the server's pidfd watched in case it dies first."""

    def __init__(
        self, server: StepServer, token: str, streams: tuple[LineSplitter, LineSplitter]
    ) -> None:
        self.server = server
        self.script = server.folder / f"step-{token}"
        self.paths = [server.folder / f"{name}-{token}" for name in ("out", "err", "exit")]
        self.streams: dict[int, LineSplitter] = {}
        self.exit_code: int | None = None
        self.server_died = False
        # The exit FIFO's text, and whether its writer closed it (the status is all there;
        # None as the exit code when it is not a number, which only a step's meddling makes).
        self._status = b""
        self._status_closed = False
        self._exit_fd = -1
        self.poll = select.poll()
        try:
            for path, splitter in zip(self.paths[:2], streams, strict=True):
                fd = _open_to_read(_fifo(path))
                self.streams[fd] = splitter
                self.poll.register(fd, select.POLLIN)
            self._exit_fd = _open_to_read(_fifo(self.paths[2]))
            self.poll.register(self._exit_fd, select.POLLIN)
        except BaseException:
            self.close()
            raise
        if server.pidfd is not None:
            self.poll.register(server.pidfd, select.POLLIN)
        self.paths.append(self.script)

    @property
    def ended(self) -> bool:
        return self._status_closed or self.server_died

    @staticmethod
    def why_not_started(program: str, result: ProcessResult) -> str:
        """Why the program could not start, as the script's shell said it ("exec: <program>:
        not found", 127; 126 when it cannot be executed), or "" when it ran."""
        said = f"exec: {program}: "
        if result.exit_code not in (126, 127) or result.stdout or said not in result.stderr:
            return ""
        return "not found" if result.exit_code == 127 else "cannot be executed"

    def follow(self, deadline: float | None) -> bool:
        """Read output until the step's exit status comes: True; False once ``deadline`` passed
        first. SandboxError when the server died first: the container ended with it."""
        while not self.ended:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            self._take(None if left is None else max(math.ceil(left * 1000), 0))
        if not self.server_died and self.exit_code is None and self.server.pidfd is not None:
            # The exit FIFO closed without a status: its writer, the server, may have died with
            # its pidfd's event not read yet (one poll can return both, the FIFO's first).
            self.server_died = _readable_within(self.server.pidfd, DEATH_GRACE_S)
            if self.server_died:
                self.server.serving = False
        if self.server_died:
            raise SandboxError(
                "the docker sandbox's container ended during a step: the step killed its "
                "keep-alive (Proctor's step server)"
            )
        return True

    def drain(self, seconds: float) -> None:
        """The output still on its way, until every writer closed or ``seconds`` passed."""
        until = time.monotonic() + seconds
        while self.streams and (left := until - time.monotonic()) > 0:
            self._take(max(math.ceil(left * 1000), 0))

    def _take(self, timeout_ms: int | None) -> None:
        for fd, _ in self.poll.poll(timeout_ms):
            if fd == self.server.pidfd:
                self.poll.unregister(fd)
                self.server_died = not self._status_closed
                self.server.serving = False
                continue
            try:
                chunk = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if fd == self._exit_fd:
                self._status += chunk
                if not chunk:
                    self.poll.unregister(fd)
                    self._status_closed = True
                    with contextlib.suppress(ValueError):
                        self.exit_code = int(self._status)
            elif chunk:
                self.streams[fd].feed(chunk)
            else:
                self.poll.unregister(fd)
                os.close(fd)
                del self.streams[fd]

    def close(self) -> None:
        if not self.ended:
            # The server may be blocked writing a status nobody reads now: use it no more.
            self.server.serving = False
        for fd in [*self.streams, self._exit_fd]:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.streams = {}
        self._exit_fd = -1
        for path in self.paths:
            with contextlib.suppress(OSError):
                path.unlink()
