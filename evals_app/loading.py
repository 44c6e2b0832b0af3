"""Finding eval files and importing the suites they define.

An eval file is ``*.eval.py``: a Python module whose module-level ``Suite`` values are its
suites. Import errors become one-line problems naming the file; no traceback reaches the person.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import posix
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import NoReturn

from evals_app.json_evals import EVAL_JSON_SUFFIX, JsonEvalError, load_json_suites
from evals_app.source_capture import BUNDLE_ROOT_MARKER, project_root
from proctor.capture import capture_output
from proctor.definitions import DefinitionError, Suite
from proctor.rules import Problem

EVAL_SUFFIX = ".eval.py"
EVAL_SUFFIXES = (EVAL_SUFFIX, EVAL_JSON_SUFFIX)
# Folders never searched: version control, virtual environments, dependencies, caches.
SKIPPED_FOLDERS = {
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    "env",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".proctor",
    "site-packages",
}


@dataclass
class LoadedFile:
    path: Path
    suites: list[Suite]
    # Every file the import read from under the project root: the modules it imported and the
    # data files it opened (what a bundle of this eval must hold besides its folder).
    read_files: tuple[Path, ...] = ()


class LoadError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _is_virtualenv(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file()


def discover(paths: Iterable[str | Path]) -> tuple[list[Path], list[Problem]]:
    """Eval files under the given files and folders (the current folder when none)."""
    found: list[Path] = []
    problems: list[Problem] = []
    targets = [Path(p) for p in paths] or [Path.cwd()]
    for target in targets:
        if target.is_file():
            if target.name.endswith(EVAL_SUFFIXES):
                found.append(target.resolve())
            else:
                problems.append(
                    Problem(
                        file=str(target),
                        message=f"is not an eval file (its name must end in {EVAL_SUFFIX} or {EVAL_JSON_SUFFIX})",
                    )
                )
        elif target.is_dir():
            for folder, subfolders, filenames in os.walk(target):
                subfolders[:] = sorted(
                    name
                    for name in subfolders
                    if name not in SKIPPED_FOLDERS
                    and not _is_virtualenv(Path(folder) / name)
                    and not (Path(folder) / name / BUNDLE_ROOT_MARKER).is_file()
                )
                found.extend(
                    Path(folder, name).resolve()
                    for name in sorted(filenames)
                    if name.endswith(EVAL_SUFFIXES)
                )
        else:
            problems.append(Problem(file=str(target), message="does not exist"))
    return list(dict.fromkeys(found)), problems


_modules: dict[tuple[Path, int, bytes | None], LoadedFile] = {}
_modules_lock = threading.Lock()


def load_file(path: Path) -> LoadedFile:
    """Import ``path`` (once per version of the file in this process) and collect its suites.

    Raises LoadError with one problem when the file cannot be imported.
    """
    path = path.resolve()
    try:
        stat = path.stat()
    except OSError:
        raise LoadError([Problem(file=display_path(path), message="does not exist")]) from None
    # The text decides the version, not the time and size alone: a file rewritten at the same
    # size within the file system's clock tick (a script changing one digit) is a new version.
    # Read once: the text keyed is the text compiled.
    source = None
    with suppress(OSError):  # a folder, say: said by the import below
        source = path.read_bytes()
    digest = hashlib.sha256(source).digest() if source is not None else None
    key = (path, stat.st_mtime_ns, digest)  # the size is the text's own
    with _modules_lock:
        if key not in _modules:
            with _recording_reads() as read:
                suites = (
                    _json_suites(path)
                    if path.name.endswith(EVAL_JSON_SUFFIX)
                    else _import_suites(path, source)
                )
            root = project_root(path)
            inside = sorted({p for p in read if p != path and root in p.parents})
            _modules[key] = LoadedFile(path=path, suites=suites, read_files=tuple(inside))
        return _modules[key]


# Files opened while an eval file imports, per thread (only while recording): data files it
# reads at import time (tool schemas, file:// messages, fixtures) belong in its bundle.
_reads = threading.local()
_hook_installed = False


def _audit(event: str, args: tuple) -> None:
    if event in ("os.listdir", "os.scandir"):
        # A folder listed at import (cases made from a glob): its files define the suite.
        listed = getattr(_reads, "listed", None)
        if (
            listed is not None
            and isinstance(args[0], str | bytes | os.PathLike)
            and not _listed_by_the_import_system()
        ):
            with suppress(OSError, ValueError):
                listed.add(Path(os.fsdecode(args[0])).resolve())
        return
    if event != "open":
        return
    recording = getattr(_reads, "paths", None)
    if recording is None or not isinstance(args[0], str | bytes | os.PathLike):
        return
    mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
    if "r" in mode or "+" in mode:
        with suppress(OSError, ValueError):
            recording.add(Path(os.fsdecode(args[0])).resolve())


def _listed_by_the_import_system() -> bool:
    """True when importlib lists a folder to find a module (not the eval's own listing): the
    frame that called os.listdir (this function's caller is the audit hook) is importlib's."""
    caller = sys._getframe(2)
    return caller.f_code.co_filename.startswith("<frozen importlib")


@contextmanager
def _recording_reads() -> Iterator[set[Path]]:
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)  # hooks cannot be removed: it does nothing unless recording
        _hook_installed = True
    paths: set[Path] = set()
    listed: set[Path] = set()
    _reads.paths, _reads.listed = paths, listed
    try:
        yield paths
    finally:
        _reads.paths = _reads.listed = None
        for folder in listed:
            with suppress(OSError):
                paths.update(entry for entry in folder.iterdir() if entry.is_file())


def _json_suites(path: Path) -> list[Suite]:
    try:
        return load_json_suites(path)
    except JsonEvalError as exc:
        raise LoadError(
            [
                Problem(file=display_path(path), suite=p.suite, case=p.case, message=p.message)
                for p in exc.problems
            ]
        ) from None


class _FromSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles an eval file from its text on every load, never through the bytecode cache:
    the cache takes a file as unchanged when its size and its modification time in whole
    seconds are, so an eval file rewritten within the same second at the same size (``LIMIT =
    3`` made ``4`` by a script) ran as it was before, and its old values were recorded. An eval
    file is compiled in milliseconds, and no ``__pycache__`` is left beside it. The modules it
    imports are cached as Python caches them. ``source``: the file's bytes as already read
    (None: read here)."""

    def __init__(self, fullname: str, path: str, source: bytes | None) -> None:
        super().__init__(fullname, path)
        self.source = source

    def get_code(self, fullname: str) -> CodeType:
        source = self.source if self.source is not None else self.get_data(self.path)
        return self.source_to_code(source, self.path)


def _import_suites(path: Path, source: bytes | None) -> list[Suite]:
    name = "proctor_eval_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(
        name, path, loader=_FromSourceLoader(name, str(path), source)
    )
    if spec is None or spec.loader is None:
        raise LoadError(
            [Problem(file=display_path(path), message="cannot be imported as a Python module")]
        )
    module = importlib.util.module_from_spec(spec)
    # The file's folder is importable while it loads, so an eval can import its own helpers.
    sys.path.insert(0, str(path.parent))
    sys.modules[name] = module
    before = set(sys.modules)
    try:
        with _printed_to_stderr(), _exits_refused():
            spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise LoadError(
            [
                Problem(
                    file=display_path(path), message=f"line {exc.lineno}: syntax error: {exc.msg}"
                )
            ]
        ) from None
    except (SystemExit, EvalFileExited) as exc:
        line = _error_line(exc, path)
        where = f"line {line}: " if line else ""
        how = exc.call if isinstance(exc, EvalFileExited) else f"SystemExit({exc.code!r})"
        raise LoadError(
            [
                Problem(
                    file=display_path(path),
                    message=f"{where}exits the interpreter at import ({how}); an eval file "
                    "defines suites and must not end the process that loads it",
                )
            ]
        ) from None
    except DefinitionError as exc:
        line = _error_line(exc, path)
        where = f"line {line}: " if line else ""
        raise LoadError([Problem(file=display_path(path), message=f"{where}{exc}")]) from None
    except BaseException as exc:  # any other error while importing the user's file
        line = _error_line(exc, path)
        where = f"line {line}: " if line else ""
        raise LoadError(
            [
                Problem(
                    file=display_path(path),
                    message=f"{where}importing it raised {type(exc).__name__}: {exc}",
                )
            ]
        ) from None
    finally:
        if sys.path and sys.path[0] == str(path.parent):
            sys.path.pop(0)
        imported = set(sys.modules) - before
        _note_imported_files(imported)
        # In a worker's unpacked bundle the whole bundle is the eval's own; elsewhere its folder
        # (the project root may hold installed packages that must stay imported).
        root = project_root(path)
        _forget_local_modules(
            imported, root if (root / BUNDLE_ROOT_MARKER).is_file() else path.parent
        )
    suites = {id(value): value for value in vars(module).values() if isinstance(value, Suite)}
    return list(suites.values())


class EvalFileExited(BaseException):
    """An eval file called ``os._exit()`` while it was imported (raised instead of exiting)."""

    def __init__(self, call: str) -> None:
        super().__init__(call)
        self.call = call


# Why a guard and not a child process: ``sys.exit`` and ``raise SystemExit`` are exceptions,
# caught like any other; ``os._exit`` ends the process at once, so an eval file calling it made
# `proctor eval` exit 0 having run nothing. Importing every eval file first in a child process
# would catch it too, but runs each file's import-time code twice and costs a process start per
# run; a parent supervising the whole command would change how `proctor eval` dies with its
# trials. Instead ``os._exit`` (and ``posix._exit``, the same function) is replaced, once, by a
# wrapper that raises EvalFileExited in the thread importing an eval file and exits as before
# everywhere else (other threads, forked children). What it cannot see: C code ending the
# process (ctypes' libc ``_exit``); a signal or ``os.abort()`` exits non-zero anyway.
_importing = threading.local()
_real_exit = os._exit
_exit_guard_installed = False


def _guarded_exit(status: int) -> NoReturn:
    if getattr(_importing, "pid", None) == os.getpid():
        raise EvalFileExited(f"os._exit({status!r})")
    _real_exit(status)


@contextmanager
def _exits_refused() -> Iterator[None]:
    global _exit_guard_installed
    if not _exit_guard_installed:
        os._exit = _guarded_exit
        posix._exit = _guarded_exit
        _exit_guard_installed = True
    outer = getattr(_importing, "pid", None)
    _importing.pid = os.getpid()
    try:
        yield
    finally:
        _importing.pid = outer


@contextmanager
def _printed_to_stderr() -> Iterator[None]:
    """What an eval file prints while it loads goes to stderr: stdout may be carrying
    ``--json``. Per thread, since trials load eval files side by side."""
    with capture_output() as printed:
        yield
    if printed.getvalue():
        (sys.__stderr__ or sys.stderr).write(printed.getvalue())


def _note_imported_files(names: set[str]) -> None:
    recording = getattr(_reads, "paths", None)
    if recording is None:
        return
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            recording.add(Path(file).resolve())


def _forget_local_modules(names: set[str], folder: Path) -> None:
    """Drop the helper modules an eval file imported from its project, so another project's
    eval (or another bundle in a worker) importing a helper of the same name (``shared.py``,
    ``variants.py``) gets its own, not this one."""
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and folder in Path(file).resolve().parents:
            del sys.modules[name]


def _error_line(exc: BaseException, path: Path) -> int | None:
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
