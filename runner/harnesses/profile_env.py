"""A profile's environment, with references to the worker's own variables filled in.

An eval file must not hold API keys, so a profile's env value may name a variable of the
worker that runs the trial: ``{"ANTHROPIC_API_KEY": "$ANTHROPIC_API_KEY"}`` or
``"Bearer ${GATEWAY_TOKEN}"``; ``$$`` is a literal dollar sign. References are read from the
worker's environment when the agent starts, never earlier, so the value is neither part of the
variant's spec (which hashes the unresolved text) nor stored anywhere: :func:`worker_secrets`
lists the values to redact from what the trial records.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from runner.harnesses.base import HarnessError

_REFERENCE = re.compile(
    r"\$\$|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)

# Referenced variables that are plainly not secrets; redacting their values ("/root") from every
# log line would hide more than it protects.
NOT_SECRET = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TZ", "TMPDIR", "PWD", "TERM"}
)


class MissingWorkerVariable(HarnessError):
    """A profile env value names a variable the worker does not have."""


def references(value: str) -> list[str]:
    """The worker variable names ``value`` refers to, in order."""
    return [
        m.group("braced") or m.group("bare")
        for m in _REFERENCE.finditer(value)
        if m.group(0) != "$$"
    ]


def resolve_profile_env(
    env: Mapping[str, str], *, profile: str, worker_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``env`` with every ``$NAME`` / ``${NAME}`` replaced by the worker's value.

    Raises MissingWorkerVariable naming the profile, the key and the variable (never a value).
    """
    source = os.environ if worker_env is None else worker_env
    resolved = {}
    for key, value in env.items():

        def fill(match: re.Match[str], key: str = key) -> str:
            if match.group(0) == "$$":
                return "$"
            name = match.group("braced") or match.group("bare")
            if name not in source:
                raise MissingWorkerVariable(
                    f"profile {profile}: env {key} refers to ${name}, which is not set in the worker's environment"
                )
            return source[name]

        resolved[key] = _REFERENCE.sub(fill, value)
    return resolved


def worker_secrets(
    env: Mapping[str, str], *, worker_env: Mapping[str, str] | None = None
) -> list[str]:
    """The worker's values that ``env`` refers to (unset ones skipped), for redaction."""
    source = os.environ if worker_env is None else worker_env
    names = {name for value in env.values() for name in references(value)}
    return [source[name] for name in sorted(names - NOT_SECRET) if source.get(name)]
