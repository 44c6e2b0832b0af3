"""The mocks of a trial: HTTP APIs, command-line tools and MCP servers the agent talks to.

One set per trial, started before the agent and stopped after the checks (``lifecycle``), all
served by one loopback server in this process (``server``), each mock reachable on its own port
and unix socket; the sandbox makes them reachable inside (``access``, ``netbridge``). Handlers
are the eval's own functions, run under the user-code time limit (runner.core.limits). Every
call is logged (``calls``) and reaches checks as ``ctx.mocks`` (runner.core.mock_calls).
"""

from runner.mocks.lifecycle import (
    TrialMocks,
    mock_logs,
    start_mocks,
    stop_mocks,
    trial_telemetry,
)

__all__ = ["TrialMocks", "mock_logs", "start_mocks", "stop_mocks", "trial_telemetry"]
