"""The sandbox kinds a process knows: the built-in ones and those other packages install.

A package adds a kind by naming a ``Sandbox`` subclass in the entry point group
``proctor.sandboxes`` of its metadata (``name = "module:Class"``); docs/sandboxes.md shows one.
A plug-in that cannot be loaded never stops Proctor: it is left out, and what went wrong is
kept as one line that `proctor sandbox list` prints and a variant naming the kind is refused with.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points

from runner.sandboxes.base import Sandbox

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "proctor.sandboxes"


class SandboxKinds(Mapping[str, type[Sandbox]]):
    """The kinds by name. A built-in kind is found without looking further; the installed
    plug-ins are read the first time anything else is asked (a listing, an unknown name), as
    reading every package's metadata costs tens of milliseconds a process need not spend to
    run a docker trial."""

    def __init__(self, built_in: dict[str, type[Sandbox]]) -> None:
        self.built_in = dict(built_in)
        self._all: dict[str, type[Sandbox]] | None = None
        self._broken: dict[str, str] = {}
        # Re-entrant: a plug-in's module may look a kind up while it is being loaded, and
        # then sees the built-in ones.
        self._lock = threading.RLock()
        self._loading = False

    @property
    def broken(self) -> dict[str, str]:
        """One line per installed plug-in that could not be loaded, by its name."""
        self._everything()
        return self._broken

    def __getitem__(self, name: str) -> type[Sandbox]:
        if name in self.built_in:
            return self.built_in[name]
        return self._everything()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._everything())

    def __len__(self) -> int:
        return len(self._everything())

    def _everything(self) -> dict[str, type[Sandbox]]:
        with self._lock:
            if self._all is None:
                if self._loading:
                    return self.built_in
                self._loading = True
                try:
                    plugins, self._broken = plugin_kinds(self.built_in)
                finally:
                    self._loading = False
                self._all = {**self.built_in, **plugins}
            return self._all


def plugin_kinds(
    built_in: dict[str, type[Sandbox]],
) -> tuple[dict[str, type[Sandbox]], dict[str, str]]:
    """(kinds by name, one line per plug-in that could not be loaded, by its name) for every
    entry point of ``proctor.sandboxes`` installed in this environment."""
    kinds: dict[str, type[Sandbox]] = {}
    broken: dict[str, str] = {}
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            kinds[entry.name] = _load(entry, built_in, kinds)
        except _Refused as exc:
            broken[entry.name] = str(exc)
            log.warning("%s", exc)
    return kinds, broken


class _Refused(Exception):
    pass


def _load(
    entry: EntryPoint, built_in: dict[str, type[Sandbox]], loaded: dict[str, type[Sandbox]]
) -> type[Sandbox]:
    where = f"the sandbox plug-in {entry.name!r} ({entry.value}"
    where += f", from {entry.dist.name})" if entry.dist is not None else ")"
    if entry.name in built_in:
        raise _Refused(
            f"{where} is ignored: {entry.name!r} is a built-in kind; choose another name"
        )
    if entry.name in loaded:
        raise _Refused(f"{where} is ignored: another package installed {entry.name!r} first")
    try:
        kind = entry.load()
    except Exception as exc:  # any error of a third party's import is its own, in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise _Refused(
            f"{where} could not be loaded: {type(exc).__name__}: {first}".rstrip(": ")
        ) from None
    if not (isinstance(kind, type) and issubclass(kind, Sandbox)):
        raise _Refused(
            f"{where} names {kind!r}, which is not a subclass of runner.sandboxes.base.Sandbox"
        )
    if inspect.isabstract(kind):
        missing = ", ".join(sorted(getattr(kind, "__abstractmethods__", ())))
        raise _Refused(f"{where} leaves methods of the sandbox interface out: {missing}")
    if not kind.kind:
        kind.kind = entry.name
    return kind
