"""A case's preparation: restore its cache folder, run its ``prepare``, save the cache.

What prepare returns reaches validators as ``prepared`` and is treated as secret from then on
(see runner.core.redaction): the trial's recorder redacts it everywhere. What prepare prints and what
its commands print is collected and logged only after redaction.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import tempfile
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.definitions import Cache
from runner.core.awaiting import resolved
from runner.core.limits import UserCodeError, UserCodeRaised, default_limits, run_forked
from runner.core.results import ExecResult, clip
from runner.sandboxes import Sandbox


class PrepareError(Exception):
    """Preparation failed: the trial is errored (infrastructure), not failed."""

    log_lines: list[str] = []


class CommandFailed(PrepareError):
    def __init__(self, command: str, result: ExecResult) -> None:
        status = "timed out" if result.timed_out else f"exited {result.exit_code}"
        tail = " | ".join(result.output.strip().splitlines()[-5:])
        super().__init__(f"prepare: `{command}` {status}" + (f": {tail}" if tail else ""))
        self.result = result


class PrepareContext:
    """What ``prepare`` receives: ``exec``, ``read_text``, ``write_text``, ``exists``,
    ``workspace`` and ``cached`` (True when the cache folder was restored)."""

    def __init__(self, sandbox: Sandbox, *, cached: bool, log: Callable[[str], None]) -> None:
        self._sandbox = sandbox
        self._log = log
        self.cached = cached
        self.workspace = sandbox.workspace

    def exec(
        self,
        cmd: str,
        args: Sequence[str] | None = None,
        *,
        timeout_ms: int = 10 * 60 * 1000,
        check: bool = True,
    ) -> ExecResult:
        """Run ``cmd`` in the workspace: a shell line, or a program with ``args``.

        Raises CommandFailed on a non-zero exit unless ``check=False``.
        """
        argv = [cmd, *args] if args is not None else ["bash", "-c", cmd]
        shown = " ".join(argv) if args is not None else cmd
        self._log(f"$ {shown}")
        result = self._sandbox.run(
            argv, timeout_s=timeout_ms / 1000, on_line=lambda _stream, line: self._log(line)
        )
        outcome = ExecResult(result.exit_code, clip(result.output), result.timed_out)
        if check and not outcome.ok:
            raise CommandFailed(shown, outcome)
        return outcome

    def read_text(self, path: str) -> str:
        return self._sandbox.read_text(path)

    def write_text(self, path: str, text: str) -> None:
        self._sandbox.write_text(path, text)

    def exists(self, path: str) -> bool:
        return self._sandbox.exists(path)


@dataclass
class Prepared:
    value: Any
    cached: bool
    log_lines: list[str]


@contextmanager
def _locked(lock_path: Path):
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _cache_folder(cache_root: Path, cache: Cache) -> Path:
    return cache_root / "prepared" / hashlib.sha256(cache.key.encode()).hexdigest()[:24]


def restore_cache(sandbox: Sandbox, cache: Cache, cache_root: Path) -> bool:
    stored = _cache_folder(cache_root, cache) / "content"
    target = sandbox.resolve(cache.path)
    with _locked(_cache_folder(cache_root, cache).with_suffix(".lock")):
        if not stored.is_dir():
            return False
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(stored, target, symlinks=True)
    return True


def save_cache(sandbox: Sandbox, cache: Cache, cache_root: Path) -> None:
    """Store the workspace's cache folder under its key (atomically: readers never see half)."""
    source = sandbox.resolve(cache.path)
    if not source.is_dir():
        return
    folder = _cache_folder(cache_root, cache)
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder.with_suffix(".lock")):
        if (folder / "content").is_dir():
            return  # another trial saved it first
        staging = Path(tempfile.mkdtemp(dir=folder, prefix="staging-"))
        shutil.copytree(source, staging / "content", symlinks=True)
        (staging / "content").rename(folder / "content")
        shutil.rmtree(staging, ignore_errors=True)


def run_prepare(
    prepare: Callable[..., Any] | None,
    cache: Cache | None,
    sandbox: Sandbox,
    *,
    cache_root: Path,
    limit_s: float | None = None,
) -> Prepared:
    """Restore the cache, call prepare, save the cache. Raises PrepareError on failure.

    prepare runs in a forked child for at most ``limit_s`` (default: the worker's prepare
    limit; see runner.core.limits), so what it returns must pickle; its log lines and what it
    prints arrive as they happen and are kept even when it hangs."""
    cached = restore_cache(sandbox, cache, cache_root) if cache else False
    lines: list[str] = []
    value = None
    if prepare is not None:
        limit = limit_s if limit_s is not None else default_limits().prepare_s

        def call(note: Callable[[str], None]) -> tuple[str, Any]:
            ctx = PrepareContext(sandbox, cached=cached, log=note)
            try:
                return "ok", resolved(prepare(ctx))
            except PrepareError as exc:
                return "failed", str(exc)

        try:
            (status, value), printed = run_forked(
                call, limit_s=limit, what="prepare", on_note=lines.append
            )
        except UserCodeError as exc:
            failure = PrepareError(
                f"prepare raised {exc}" if isinstance(exc, UserCodeRaised) else str(exc)
            )
            failure.log_lines = lines + exc.printed.splitlines()
            raise failure from exc
        if status == "failed":
            failure = PrepareError(value)
            failure.log_lines = lines + printed.splitlines()
            raise failure
        lines.extend(printed.splitlines())
    if cache and not cached:
        save_cache(sandbox, cache, cache_root)
    return Prepared(value=value, cached=cached, log_lines=lines)
