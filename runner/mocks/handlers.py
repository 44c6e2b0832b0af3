"""Calling the eval's handler functions: with the mock's state when they take it, under the
user-code time limit, in a thread of this process so ``state`` persists between calls."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from runner.core.awaiting import resolved
from runner.core.limits import default_limits, run_in_thread


def takes_state(func: Callable[..., Any], positional: int) -> bool:
    """Whether ``func`` accepts ``state`` after its ``positional`` arguments."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(p.name == "state" or p.kind == p.VAR_KEYWORD for p in parameters):
        return True
    plain = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(plain) > positional or any(p.kind == p.VAR_POSITIONAL for p in parameters)


def _names_state(func: Callable[..., Any]) -> bool:
    try:
        return "state" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


def call_handler(
    func: Callable[..., Any],
    args: tuple[Any, ...],
    state: dict[str, Any],
    *,
    what: str,
    kwargs: dict[str, Any] | None = None,
    limit_s: float | None = None,
) -> Any:
    """``func(*args, state)`` (or ``func(*args, **kwargs, state=state)`` for keyword calls)
    within the limit; raises what it raises, UserCodeTimedOut past the limit."""
    limit = limit_s if limit_s is not None else default_limits().tool_s

    def call() -> Any:
        if kwargs is not None:
            extra = {"state": state} if _names_state(func) else {}
            return resolved(func(*args, **kwargs, **extra))
        if takes_state(func, len(args)):
            return resolved(func(*args, state))
        return resolved(func(*args))

    return run_in_thread(call, limit_s=limit, what=what)
