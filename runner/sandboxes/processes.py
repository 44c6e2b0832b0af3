"""Running one host process with everything it starts, streaming its output, with a deadline.

The one way Proctor starts a child process and waits for it: the sandboxes' steps, a
consultation command (``runner.llm.command_client``), the write audit's ``find``. Each run's
processes are one tree (``runner.sandboxes.containment``: a cgroup where the machine has
cgroup v2, else the process group), ended as a whole when the program exits or its time is up.

Output is read at pipe speed, by the thread that waits for the run (no thread of its own): up
to READ_CHUNK bytes at a time from both pipes, split into lines in bulk and many lines decoded
in one call; a sink with a ``lines`` method (``runner.sandboxes.base.ManyLinesSink``) takes
all the lines of one read in one call, any other is called per line.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

from proctor.agent_events import truncation_mark
from runner.sandboxes.base import LineSink, ProcessResult, lines_taker
from runner.sandboxes.cgroup_spawn import ClonedProcess
from runner.sandboxes.containment import ProcessTree, containment

# Linux's cap on one argument or environment string of a program it starts (32 pages).
MAX_ARG_STRLEN = 32 * 4096
# After SIGTERM, how long the tree gets to exit before SIGKILL.
TERMINATE_GRACE_S = 2.0
# Output kept in memory per stream; the rest is streamed to the sink only.
MAX_KEPT_CHARS = 2_000_000
# The longest line handed on whole; past it a line is cut and marked.
MAX_LINE_BYTES = 16 << 20
# Bytes taken from a pipe per read.
READ_CHUNK = 1 << 20
# Once the program exited and its tree was killed, how long output still in the pipes is read
# when a process outside the tree (one that escaped its process group) keeps them open: until
# they are quiet after DRAIN_S, and never longer than twice that.
DRAIN_S = 0.5


class LineSplitter:
    """Cuts one stream's chunks into lines for ``on_line``, keeping up to MAX_KEPT_CHARS.

    A line longer than MAX_LINE_BYTES is cut there and ends with the truncation mark: a
    100 MB line never sits whole in memory (the parser records the cut line as an error).
    """

    def __init__(self, name: str, on_line: LineSink | None) -> None:
        self.name = name
        self.take = lines_taker(on_line) if on_line is not None else None
        # The start of a line whose end has not come yet, in pieces (a long line is not copied
        # again for every chunk), up to MAX_LINE_BYTES; what comes past that is only counted.
        self.pending: list[bytes] = []
        self.pending_size = 0
        self.dropped = 0
        self.kept: list[str] = []
        self.size = 0

    def feed(self, chunk: bytes) -> None:
        end = chunk.rfind(b"\n")
        if end == -1:
            self._hold(chunk)
            return
        lines: list[str] = []
        start = 0
        if self.pending or self.dropped:
            first = chunk.find(b"\n")
            self._hold(chunk[:first])
            lines.append(self._take_pending())
            start = first + 1
        if start <= end:
            # A newline byte never sits inside a UTF-8 sequence: decoding many lines at once
            # is the same as decoding each.
            lines.extend(chunk[start:end].decode("utf-8", errors="replace").split("\n"))
        self._hold(chunk[end + 1 :])
        self._emit(lines, "\n")

    def close(self) -> None:
        if self.pending or self.dropped:
            self._emit([self._take_pending()], "")

    def _hold(self, piece: bytes) -> None:
        if not piece:
            return
        room = max(MAX_LINE_BYTES - self.pending_size, 0)
        if room:
            self.pending.append(piece[:room])
            self.pending_size += min(room, len(piece))
        self.dropped += max(len(piece) - room, 0)

    def _take_pending(self) -> str:
        line = b"".join(self.pending).decode("utf-8", errors="replace")
        if self.dropped:
            line += truncation_mark(self.dropped)
        self.pending, self.pending_size, self.dropped = [], 0, 0
        return line

    def _emit(self, lines: list[str], last_end: str) -> None:
        if self.size < MAX_KEPT_CHARS:
            for i, line in enumerate(lines):
                if self.size >= MAX_KEPT_CHARS:
                    break
                kept = (line + ("\n" if i < len(lines) - 1 else last_end))[
                    : MAX_KEPT_CHARS - self.size
                ]
                self.kept.append(kept)
                self.size += len(kept)
        if self.take is not None:
            self.take(self.name, lines)

    def text(self) -> str:
        return "".join(self.kept)


class _Pipes:
    """Reads a run's two pipes in the thread that runs it, and tells when its program exits.

    No thread per run: the waiting thread itself selects on both pipes and on a pidfd of the
    program (readable once it exits), so output is read as it comes and the exit is seen at
    once. Where pidfds are missing, the program is polled every POLL_S instead.
    """

    POLL_S = 0.05

    def __init__(
        self, proc: subprocess.Popen[bytes] | ClonedProcess, streams: dict[int, LineSplitter]
    ) -> None:
        self.proc = proc
        self.streams = streams
        self.open_fds = set(streams)
        # poll(2), not epoll: for three descriptors it needs no descriptor of its own and no
        # system call per registration, and every run makes one. The bare poll object, not
        # selectors' wrapper of it, which makes a key object per descriptor and per ready one.
        self.poll = select.poll()
        for fd in streams:
            self.poll.register(fd, select.POLLIN)
        self.pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(proc.pid)
            self.poll.register(self.pidfd, select.POLLIN)

    def read_until_exit(self, deadline: float | None) -> bool:
        """Read output until the program exits (True) or ``deadline`` passes (False)."""
        while True:
            if self.proc.poll() is not None:
                return True
            if not self.open_fds and self.pidfd is None:
                # Nothing left to read: only the exit is awaited.
                try:
                    self.proc.wait(
                        None if deadline is None else max(deadline - time.monotonic(), 0)
                    )
                    return True
                except subprocess.TimeoutExpired:
                    return False
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            wait = left if self.pidfd is not None else min(left or self.POLL_S, self.POLL_S)
            if self._read(self._ready(wait)):
                return True  # the pidfd said so

    def _ready(self, timeout_s: float | None) -> list[tuple[int, int]]:
        """The descriptors ready within ``timeout_s`` (None: until one is), as poll gives them:
        a pipe with data or closed, the pidfd of a program that exited."""
        return self.poll.poll(None if timeout_s is None else max(math.ceil(timeout_s * 1000), 0))

    def _read(self, ready: list[tuple[int, int]]) -> bool:
        """Take what ``ready`` holds; True when the pidfd said the program exited."""
        exited = False
        for fd, _ in ready:
            if fd == self.pidfd:
                exited = True
                continue
            try:
                chunk = os.read(fd, READ_CHUNK)
            except OSError:
                chunk = b""
            if chunk:
                self.streams[fd].feed(chunk)
            else:
                self.poll.unregister(fd)
                self.open_fds.discard(fd)
        return exited

    def drain(self) -> None:
        """After the tree is gone: read what is left, until the pipes close, or until they are
        quiet after DRAIN_S when a process outside the tree keeps them open (never longer than
        twice that)."""
        if self.pidfd is not None:
            self.poll.unregister(self.pidfd)
        drain_until = time.monotonic() + DRAIN_S
        while self.open_fds:
            ready = self._ready(0.05)
            now = time.monotonic()
            if now > drain_until + DRAIN_S or (not ready and now > drain_until):
                break
            self._read(ready)

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
        for splitter in self.streams.values():
            splitter.close()


def _feed(stream: IO[bytes], data: bytes) -> None:
    # A process that never reads its stdin closes the pipe early; that is its business.
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.write(data)
    with contextlib.suppress(OSError):
        stream.close()


def _not_startable(argv: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> str:
    """Why ``argv[0]`` cannot be executed (as exec would say it), or "" when it can. Checked
    before the start because the program may be exec'd by the cgroup wrapper, not by Popen."""
    program = argv[0]
    if "/" not in program:
        path = (os.environ if env is None else env).get("PATH", os.defpath)
        found = shutil.which(program, path=path)
        return "" if found else os.strerror(2)
    full = os.path.join(cwd or ".", program)
    if not os.path.exists(full):
        return os.strerror(2)
    if os.path.isdir(full) or not os.access(full, os.X_OK):
        return os.strerror(13)
    return ""


def _too_long(argv: Sequence[str], env: Mapping[str, str] | None) -> str:
    """exec's "Argument list too long", naming the longest argument or environment variable:
    Linux takes no single string past MAX_ARG_STRLEN, and all of them together past a quarter
    of the stack limit."""
    sizes = [(len(os.fsencode(arg)) + 1, f"argument {index}") for index, arg in enumerate(argv)]
    sizes += [
        (len(os.fsencode(name)) + len(os.fsencode(value)) + 2, f"environment variable {name}")
        for name, value in (os.environ if env is None else env).items()
    ]
    size, what = max(sizes)
    total = sum(size for size, _ in sizes)
    if size > MAX_ARG_STRLEN:
        return (
            f"its {what} is {size:,} bytes, past the {MAX_ARG_STRLEN:,} bytes Linux allows one "
            "argument or environment string"
        )
    return (
        f"its arguments and environment are {total:,} bytes together, more than Linux allows "
        f"(the largest, its {what}, is {size:,} bytes)"
    )


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout_s: float | None,
    on_line: LineSink | None = None,
    stdin: bytes | None = None,
    own_namespace: bool = False,
) -> ProcessResult:
    """Run ``argv``; on timeout, and after it exits, kill every process it started.

    Killing the tree after a normal exit too means a backgrounded child (a dev server the agent
    started, a ``setsid`` or daemonised one) cannot hold the output pipes open or outlive the
    step that started it: the run ends when the program does.

    ``env`` None inherits the worker's environment, ``cwd`` None its directory. ``stdin`` is
    written to the process and then closed; without it stdin is closed from the start. Each
    stream keeps its first MAX_KEPT_CHARS in the result. A program that cannot be started
    (missing, not executable, a NUL byte in its arguments) is exit 127 with ``could not start
    <program>: <why>`` on stderr, as in every sandbox.

    ``own_namespace``: ``argv`` starts its processes in a pid namespace of its own that dies
    with its first process (bwrap's ``--unshare-pid --die-with-parent``), so killing its process
    group ends them all and the per-run cgroup (about a third of a bwrap run's cost) is skipped;
    the namespace dies with this process too, so the watchdog is not told of it.
    """
    started = time.monotonic()
    tree: ProcessTree | None = None
    try:
        tree = (
            ProcessTree(containment(), None, dies_with_proctor=True)
            if own_namespace
            else containment().new_tree()
        )
        why = _not_startable(argv, env, cwd) if tree.starts_through_shell else ""
        if why:
            raise OSError(2, why)
        proc = tree.popen(
            list(argv),
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        # ValueError: what no program could be started with (a NUL byte in an argument, an
        # environment variable name holding "="), said the same way.
        if tree is not None:
            tree.kill()
        if isinstance(exc, OSError) and exc.errno == errno.E2BIG:
            reason = _too_long(argv, env)
        else:
            reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        result = ProcessResult.not_started(argv[0], reason)
        if on_line is not None:  # the run's own stream says why, as a failed exec would
            lines_taker(on_line)("stderr", [result.stderr.rstrip("\n")])
        return result
    tree.started(proc.pid)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = LineSplitter("stdout", on_line), LineSplitter("stderr", on_line)
    pipes = _Pipes(proc, {proc.stdout.fileno(): out, proc.stderr.fileno(): err})
    feeder = None
    if stdin is not None:
        feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
        feeder.start()
    timed_out = False
    try:
        exited = pipes.read_until_exit(None if timeout_s is None else started + timeout_s)
        if not exited:
            timed_out = True
            tree.signal(signal.SIGTERM)
            exited = pipes.read_until_exit(time.monotonic() + TERMINATE_GRACE_S)
        if exited and tree.cgroup is not None:
            # Reaped first: a cgroup that holds nothing else then goes without a kill. (A
            # process group is killed before its leader is reaped, so its id stays its own.)
            proc.wait()
        tree.kill()
        proc.wait()
        pipes.drain()
    except BaseException:
        # The sink raised (or the thread was stopped): the run still ends with its tree.
        tree.kill()
        proc.wait()
        raise
    finally:
        pipes.close()
        for pipe in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
    if feeder is not None:
        feeder.join(timeout=1)
    return ProcessResult(
        exit_code=None if timed_out else proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
