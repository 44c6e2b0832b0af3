"""What the real agent CLIs' harnesses share: installing and finding the CLI, the environment it
runs with, and one turn as one process whose JSON-lines output a parser turns into events.

The profile of such a variant configures the agent, not a process of its own:

- ``env``: API keys and base URLs, ``PATH`` to find the CLI; values may name the worker's own
  variables (``"$ANTHROPIC_API_KEY"``, ``"${VAR}"``: see ``runner.harnesses.profile_env``).
- ``install``: run once per trial with ``bash -c`` in the sandbox, before the CLI is looked
  for. ``~/.local/bin`` of the trial's home comes first on PATH, so
  ``npm install -g --prefix ~/.local @anthropic-ai/claude-code`` works in every sandbox kind.
  (References in ``env`` name the *worker's* variables: ``$HOME`` there is not the trial's.)
- ``dir``: the agent's own configuration as the person under test uses it, copied into the
  agent's config folder in the trial's home (``~/.claude``, ``~/.codex``): settings, skills,
  instructions. Nothing else of the worker's configuration reaches the agent: each trial has
  its own home.
- ``system_prompt``: appended to the agent's own system prompt (the suite's wins).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from proctor.agent_events import CLI_VERSION_NOTE, AgentEvent
from proctor.definitions import Profile, Variant
from runner.harnesses.base import (
    EventSink,
    Harness,
    HarnessError,
    RawSink,
    StreamReader,
    TurnRequest,
    TurnResult,
)
from runner.harnesses.profile_env import resolve_profile_env
from runner.mocks.agent_config import shims_first
from runner.sandboxes import Sandbox
from runner.sandboxes.base import ProcessResult

INSTALL_TIMEOUT_S = 30 * 60
# Put first on PATH, so an install step can place the CLI in the trial's home in any sandbox
# (``npm install -g --prefix ~/.local @openai/codex``).
USER_BIN = ".local/bin"
VERSION_TIMEOUT_S = 60


class StreamParser(Protocol):
    session_id: str | None
    answer: str
    usage: dict[str, int]
    finish_reason: str | None
    permission_denials: list[dict[str, Any]]

    def feed(self, line: str) -> list[AgentEvent]: ...

    def finish(self) -> list[AgentEvent]: ...


class AgentCliHarness(Harness):
    """A harness that runs an agent CLI found on the sandbox's PATH."""

    executable: str = ""
    # Where the agent keeps its configuration, relative to the trial's home.
    config_dir: str = ""
    # How to make the CLI available, for the error when it is missing.
    install_hint: str = ""
    option_names = frozenset({"args", "project_settings"})

    def __init__(self, variant: Variant) -> None:
        super().__init__(variant)
        self.profile: Profile = variant.profile or Profile(name=self.name)
        self.options = dict(variant.options)
        self.version = ""
        self._system_prompt: str | None = self.profile.system_prompt

    # --- what a subclass provides ----------------------------------------------------------------

    def agent_env(self, sandbox: Sandbox) -> dict[str, str]:
        """Variables the agent always runs with, before the profile's (which win)."""
        return {}

    # --- set-up ----------------------------------------------------------------------------------

    def setup(self, sandbox: Sandbox, log: RawSink) -> None:
        config = sandbox.host_home / self.config_dir
        config.mkdir(parents=True, exist_ok=True)
        if self.profile.dir:
            source = Path(self.profile.dir)
            if not source.is_dir():
                raise HarnessError(f"profile {self.profile.name}: folder {source} does not exist")
            shutil.copytree(source, config, symlinks=True, dirs_exist_ok=True)
        env = self.process_env(sandbox)
        if self.profile.install:
            result = sandbox.run(
                ["bash", "-c", self.profile.install],
                env=env,
                timeout_s=INSTALL_TIMEOUT_S,
                on_line=log,
            )
            if result.timed_out or result.exit_code != 0:
                status = "timed out" if result.timed_out else f"exited {result.exit_code}"
                raise HarnessError(f"profile {self.profile.name}: install {status}{_tail(result)}")
        found = sandbox.run(
            [self.executable, "--version"], env=env, timeout_s=VERSION_TIMEOUT_S, on_line=log
        )
        if found.timed_out or found.exit_code != 0:
            raise HarnessError(
                f"harness {self.name}: the `{self.executable}` command does not run in the sandbox"
                f"{_tail(found)}; {self.install_hint}"
            )
        self.version = found.stdout.strip().splitlines()[0] if found.stdout.strip() else ""
        if self.version:
            # Named, so compare can tell two batches that ran different CLI versions apart.
            log("proctor", f"{CLI_VERSION_NOTE}{self.executable} {self.version}")

    def process_env(self, sandbox: Sandbox) -> dict[str, str]:
        env = self.agent_env(sandbox)
        env.update(resolve_profile_env(self.profile.env, profile=self.profile.name))
        path = env.get("PATH") or sandbox.base_env().get("PATH", "/usr/local/bin:/usr/bin:/bin")
        env["PATH"] = shims_first(sandbox, f"{sandbox.home}/{USER_BIN}:{path}")
        return env

    # --- a turn ----------------------------------------------------------------------------------

    def system_prompt_for(self, request: TurnRequest) -> str | None:
        """The suite's system prompt arrives with the first turn only; the agent needs it on
        every invocation that passes it as a flag, so it is remembered."""
        if request.system_prompt is not None:
            self._system_prompt = request.system_prompt
        return self._system_prompt

    def extra_args(self) -> list[str]:
        """The variant's ``args`` option: more flags for the CLI, before the prompt."""
        args = self.options.get("args") or []
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise HarnessError(
                f"variant {self.variant.name}: option args must be a list of strings"
            )
        return list(args)

    def run_cli(
        self,
        sandbox: Sandbox,
        argv: Sequence[str],
        parser: StreamParser,
        *,
        emit: EventSink,
        raw: RawSink,
        timeout_s: float,
        session_id: str | None = None,
    ) -> TurnResult:
        """Run one invocation to its end, emitting events as lines arrive."""

        result = sandbox.run(
            list(argv),
            env=self.process_env(sandbox),
            cwd=sandbox.workspace,
            timeout_s=timeout_s,
            on_line=StreamReader(raw, parser.feed, emit),
        )
        for event in parser.finish():
            emit(event)
        if result.timed_out:
            reason = "timed out"
        else:
            reason = (
                parser.finish_reason
                or f"exit {result.exit_code}{_tail(result, lines=1, stdout_too=False)}"
            )
            emit(AgentEvent("Finished", {"reason": reason}))
        return TurnResult(
            session_id=parser.session_id or session_id,
            finish_reason=reason,
            timed_out=result.timed_out,
            exit_code=result.exit_code,
            answer=parser.answer,
            duration_ms=result.duration_ms,
            usage=dict(parser.usage),
            permission_denials=list(parser.permission_denials),
        )


def _tail(result: ProcessResult, *, lines: int = 3, stdout_too: bool = True) -> str:
    """The last lines a failed process printed to stderr (or stdout), for its error sentence."""
    text = (result.stderr or (result.stdout if stdout_too else "")).strip()
    tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return ": " + " | ".join(tail)[:500] if tail else ""
