"""The ``command`` harness: runs a process you own that prints the event protocol.

The profile says what to run (``run``, through ``bash -c`` from the workspace), what to install
once (``install``) and which folder to ship (``dir``, copied to ``$HOME/profile``, exposed as
``PROCTOR_PROFILE_DIR`` and put first on ``PATH``; never into the workspace, so the graded diff
does not see it). A word of ``run`` or ``install`` naming a file of that folder
(``"bun run agent.ts"``, ``"python3 agent.py"``) is made absolute before it runs, unless the
workspace has that path: see ``runner.harnesses.command.run_line``. The process gets the ``SPHYNX_*`` variables
of the original protocol, so a runner written for it runs unchanged, and the case's variables
as one JSON object in ``PROCTOR_CASE_VARS`` (in the file ``PROCTOR_CASE_VARS_FILE`` names when
too large for the environment; ``proctor.runner.env().variables`` reads either); follow-up
turns run the profile again with ``PROCTOR_SESSION_ID`` (the previous ``Started`` session id)
and ``PROCTOR_MODE`` (``plan`` or ``act``) set.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.agent_events import AgentEvent
from proctor.definitions import Profile, Variant
from proctor.protocol import parse_line
from runner.harnesses.base import (
    CONVERSATION_RESUME,
    PLAN_MODE,
    EventSink,
    Harness,
    HarnessError,
    RawSink,
    StreamReader,
    TurnRequest,
    TurnResult,
)
from runner.harnesses.command.run_line import with_profile_paths
from runner.harnesses.profile_env import resolve_profile_env
from runner.harnesses.shell_trace import (
    RECORDER_SCRIPT,
    read_trace,
    recorder_script,
    remove_trace,
)
from runner.mocks.agent_config import shims_first
from runner.sandboxes import Sandbox

INSTALL_TIMEOUT_S = 30 * 60
# Linux refuses to start a process with one environment string past 128 KiB (MAX_ARG_STRLEN):
# case variables and a prompt larger than this go in a file instead (PROCTOR_CASE_VARS_FILE,
# SPHYNX_PROMPT_FILE), leaving room for the rest of the environment.
MAX_INLINE_BYTES = 64 * 1024
CASE_VARS_FILE = "case_vars.json"
PROMPT_FILE = "prompt.md"
# The shell recorder's log, a file of the home itself: a folder of its own cost a folder made
# and deleted per trial, and on some disks making one costs as much as a no-op agent's run.
TRACE_LOG = ".proctor-trace.log"


class CommandHarness(Harness):
    name = "command"
    # What any process can do; a profile adds conversation-resume / plan-mode when its process
    # understands PROCTOR_SESSION_ID / PROCTOR_MODE.
    capabilities = frozenset()

    def __init__(self, variant: Variant) -> None:
        super().__init__(variant)
        if variant.profile is None or not variant.profile.run:
            raise HarnessError(
                f"variant {variant.name}: the command harness needs a profile with a run command"
            )
        self.profile: Profile = variant.profile
        self.capabilities = self.capabilities_for(variant)

    @classmethod
    def capabilities_for(cls, variant: Variant) -> frozenset[str]:
        declared = variant.profile.capabilities if variant.profile else ()
        return frozenset(declared) & {CONVERSATION_RESUME, PLAN_MODE}

    @classmethod
    def declares_plan_file(cls, variant: Variant) -> bool:
        return bool(variant.profile and variant.profile.plan_file)

    def plan_file(self, sandbox: Sandbox) -> Path | None:
        """The profile's ``plan_file``, relative to the sandbox's home."""
        if not self.profile.plan_file:
            return None
        return sandbox.host_home / self.profile.plan_file.removeprefix("~/").lstrip("/")

    def _proctor_dir(self, sandbox: Sandbox) -> Path:
        return sandbox.host_home / ".proctor"

    def _recorder_path(self, sandbox: Sandbox) -> str:
        """The shell recorder as the agent's bash sources it: Proctor's own copy where the
        sandbox's processes see the host's files as they are (it never changes), else the one
        ``setup`` wrote into the home."""
        if sandbox.sees_host_files:
            return str(RECORDER_SCRIPT)
        return f"{sandbox.home}/.proctor/shell_recorder.sh"

    def setup(self, sandbox: Sandbox, log: RawSink) -> None:
        proctor_dir = self._proctor_dir(sandbox)
        if not sandbox.sees_host_files:
            proctor_dir.mkdir(parents=True, exist_ok=True)
            (proctor_dir / "shell_recorder.sh").write_bytes(recorder_script())
        if self.profile.system_prompt is not None:
            proctor_dir.mkdir(parents=True, exist_ok=True)
            (proctor_dir / "system_prompt.md").write_text(
                self.profile.system_prompt, encoding="utf-8"
            )
        if self.profile.dir:
            source = Path(self.profile.dir)
            if not source.is_dir():
                raise HarnessError(f"profile {self.profile.name}: folder {source} does not exist")
            shutil.copytree(source, sandbox.host_home / "profile", symlinks=True)
        if self.profile.install:
            result = sandbox.run(
                ["bash", "-c", self._line(sandbox, self.profile.install)],
                env=self._env(sandbox, prompt="", model=self.variant.model, trace=False),
                timeout_s=INSTALL_TIMEOUT_S,
                on_line=log,
            )
            if result.timed_out or result.exit_code != 0:
                status = "timed out" if result.timed_out else f"exited {result.exit_code}"
                tail = result.output.strip().splitlines()[-5:]
                raise HarnessError(
                    f"profile {self.profile.name}: install {status}"
                    + (": " + " | ".join(tail) if tail else "")
                )

    def _line(self, sandbox: Sandbox, line: str) -> str:
        """``line`` with its words that name the profile folder's files made absolute."""
        if not self.profile.dir:
            return line
        return with_profile_paths(
            line,
            profile_dir=sandbox.host_home / "profile",
            workspace=sandbox.host_workspace,
            sandbox_dir=f"{sandbox.home}/profile",
        )

    def _env(
        self,
        sandbox: Sandbox,
        *,
        prompt: str,
        model: str | None,
        trace: bool,
        system_prompt: str | None = None,
        session_id: str | None = None,
        mode: str = "",
        variables: Mapping[str, Any] | None = None,
    ) -> dict[str, str]:
        home = sandbox.home
        proctor_dir = f"{home}/.proctor"
        profile_dir = f"{home}/profile"
        env = {
            **self._inline_or_file(sandbox, "SPHYNX_PROMPT", prompt, PROMPT_FILE),
            "SPHYNX_MODEL": model or "",
            "SPHYNX_HOME": home,
            "SPHYNX_WORKSPACE": sandbox.workspace,
            "SPHYNX_TRACE_LOG": f"{home}/{TRACE_LOG}",
            "PROCTOR_PROFILE_DIR": profile_dir,
        }
        env.update(self._variables_env(sandbox, variables or {}))
        if system_prompt is not None:
            self._proctor_dir(sandbox).mkdir(exist_ok=True)
            (self._proctor_dir(sandbox) / "system_prompt.md").write_text(
                system_prompt, encoding="utf-8"
            )
            env["SPHYNX_SYSTEM_PROMPT_FILE"] = f"{proctor_dir}/system_prompt.md"
        elif self.profile.system_prompt is not None:
            env["SPHYNX_SYSTEM_PROMPT_FILE"] = f"{proctor_dir}/system_prompt.md"
        if session_id:
            env["PROCTOR_SESSION_ID"] = session_id
        if mode:
            env["PROCTOR_MODE"] = mode
        if trace:
            env["BASH_ENV"] = self._recorder_path(sandbox)
        env.update(resolve_profile_env(self.profile.env, profile=self.profile.name))
        env["PATH"] = f"{profile_dir}:{env.get('PATH') or sandbox.base_env()['PATH']}"
        # The case's cli mocks first, even before the agent's own folder (runner.mocks).
        env["PATH"] = shims_first(sandbox, env["PATH"])
        return env

    def _variables_env(self, sandbox: Sandbox, variables: Mapping[str, Any]) -> dict[str, str]:
        """``PROCTOR_CASE_VARS`` (the JSON itself), or ``PROCTOR_CASE_VARS_FILE`` for JSON too
        large for it."""
        text = json.dumps(dict(variables), ensure_ascii=False)
        return self._inline_or_file(sandbox, "PROCTOR_CASE_VARS", text, CASE_VARS_FILE)

    def _inline_or_file(
        self, sandbox: Sandbox, variable: str, text: str, file_name: str
    ) -> dict[str, str]:
        """``variable`` holding ``text`` or, past MAX_INLINE_BYTES, ``<variable>_FILE`` naming
        ``file_name`` in the home's ``.proctor``, which holds it: inline, Linux would refuse to
        start the process at all."""
        # Four bytes at most per character: most texts need no encoding to be measured.
        if len(text) * 4 <= MAX_INLINE_BYTES or len(text.encode()) <= MAX_INLINE_BYTES:
            return {variable: text}
        self._proctor_dir(sandbox).mkdir(exist_ok=True)
        (self._proctor_dir(sandbox) / file_name).write_text(text, encoding="utf-8")
        return {f"{variable}_FILE": f"{sandbox.home}/.proctor/{file_name}"}

    def run_turn(
        self,
        sandbox: Sandbox,
        request: TurnRequest,
        *,
        emit: EventSink,
        raw: RawSink,
        timeout_s: float,
    ) -> TurnResult:
        trace_log = sandbox.host_home / TRACE_LOG
        remove_trace(trace_log)  # each turn records only the commands it ran
        state = _TurnState()

        def read_line(line: str) -> tuple[AgentEvent, ...]:
            event = parse_line(line)
            if event is None:
                return ()
            state.observe(event)
            if event.kind == "Finished":
                # Held back so the commands the shell recorder saw come before the end.
                state.finished_event = state.finished_event or event
                return ()
            return (event,)

        env = self._env(
            sandbox,
            prompt=request.prompt,
            model=request.model,
            trace=True,
            system_prompt=request.system_prompt,
            session_id=request.session_id,
            mode=request.mode,
            variables=request.variables,
        )
        if "SPHYNX_PROMPT_FILE" in env:
            emit(
                AgentEvent(
                    "Log",
                    {
                        "stream": "proctor",
                        "text": (
                            f"the prompt ({len(request.prompt.encode()):,} bytes) is past what "
                            f"one environment variable may hold here: it is in the file "
                            f"$SPHYNX_PROMPT_FILE ({env['SPHYNX_PROMPT_FILE']}), and "
                            "SPHYNX_PROMPT is not set"
                        ),
                    },
                )
            )
        result = sandbox.run(
            ["bash", "-c", self._line(sandbox, self.profile.run or "")],
            env=env,
            timeout_s=timeout_s,
            on_line=StreamReader(raw, read_line, emit),
        )
        for event in read_trace(trace_log, already_printed=state.printed_commands):
            emit(event)
        if state.finished_event is not None:
            emit(state.finished_event)
        if result.timed_out:
            reason = "timed out"
        elif state.finish_reason is None:
            reason = f"exit {result.exit_code}"
            emit(AgentEvent("Finished", {"reason": reason}))
        else:
            reason = state.finish_reason
        return TurnResult(
            session_id=state.session_id or request.session_id,
            finish_reason=reason,
            timed_out=result.timed_out,
            exit_code=result.exit_code,
            answer=state.answer,
            duration_ms=result.duration_ms,
            usage=state.usage,
        )


class _TurnState:
    """What the runner needs to remember of one turn's events."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.finish_reason: str | None = None
        self.answer = ""
        self.printed_commands: set[str] = set()
        self.usage: dict[str, int] = {}
        self.finished_event: AgentEvent | None = None

    def observe(self, event: AgentEvent) -> None:
        data = event.data
        if event.kind == "Started":
            self.session_id = data["session_id"]
        elif event.kind == "Message" and data["role"] == "assistant":
            self.answer = data["text"]
        elif event.kind == "Command":
            self.printed_commands.add(data["command"])
        elif event.kind == "Finished" and self.finish_reason is None:
            self.finish_reason = data["reason"]
