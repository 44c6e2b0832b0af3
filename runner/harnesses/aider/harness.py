"""The ``aider`` harness: Aider, one ``--message`` per turn.

    variant(harness="aider", model="openai/qwen3-coder", profile=profile("aider", env={
        "OPENAI_API_KEY": "$OPENAI_API_KEY",                # from the worker's environment
        "OPENAI_API_BASE": "http://127.0.0.1:8080/v1",      # optional: an OpenAI-compatible API
    }))

The model is a litellm name (``openai/<name>`` for any OpenAI-compatible API, or
``anthropic/...``, ``gemini/...`` with their own keys). Aider reads every option from
``AIDER_*`` variables too (``AIDER_EDIT_FORMAT``, ``AIDER_MAP_TOKENS``...), so the profile's env
tunes it; the variant's ``args`` option adds flags.

Needs the ``aider`` command in the sandbox: ``python3 -m pip install --user aider-chat`` (or a
virtualenv of its own) as the profile's ``install``, or a ``PATH`` in the profile's env that
holds it.

Each turn is ``aider --message PROMPT --yes-always`` from the workspace, stdin closed, with
auto-commits, dirty commits and ``.gitignore`` edits off (each would change the workspace
behind the agent's back) and ``--no-git`` when the workspace is not a repository (else Aider
would create one). Aider prints no events, so after each turn the harness reads its side
files, kept in the trial's home under ``~/.proctor/aider/``:

- ``--llm-history-file``: the model's replies, word for word -> one Message each;
- ``--analytics-log`` (written even with ``--no-analytics``): ``message_send`` token counts ->
  Usage;
- ``--chat-history-file``: the questions Aider answered itself. Under ``--yes-always`` Aider
  declines every shell command the model suggests (running one needs an explicit yes), so a
  suggested command never runs: each is recorded as a refused action, and no Command event
  exists for Aider;
- the workspace itself, compared before and after the turn -> FileChange (Aider's edits, which
  it makes by parsing the model's text, and anything else that changed).

Follow-up turns: Aider has no session id. It continues a conversation by re-reading its
markdown chat history (``--restore-chat-history``); that is Aider's own way to resume and what
a person running it again in the same folder gets, though the history is rebuilt from markdown
(lossy: tool output is dropped). The capability is declared on that basis; no session id is
reported. There is no plan mode (``--chat-mode ask`` only discusses, with no plan file).

Isolation: the trial's home holds the profile's ``dir`` (``.aider.conf.yml``, ``.env``). Aider
has no switch to skip a workspace's ``.aider.conf.yml`` or ``.env``; the flags above are passed
on the command line, which wins over both. The suite's system prompt is given to Aider as a
read-only file (``--read``), its way of carrying standing instructions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from proctor.agent_events import AgentEvent
from proctor.definitions import Variant
from runner.harnesses.agent_cli import AgentCliHarness
from runner.harnesses.base import CONVERSATION_RESUME, EventSink, RawSink, TurnRequest, TurnResult
from runner.harnesses.jsonl import json_object, whole_number
from runner.sandboxes import Sandbox

STATE_DIR = ".proctor/aider"
CHAT_HISTORY = "chat.history.md"
LLM_HISTORY = "llm.history.txt"
ANALYTICS = "analytics.jsonl"
INPUT_HISTORY = "input.history"
SYSTEM_PROMPT = "system-prompt.md"
# How a shell command the model suggested shows in the transcript: Aider asked itself and said no.
SHELL_TOOL = "shell"
DECLINED = "not run: Aider runs a suggested shell command only after an explicit yes, and --yes-always answers no"
# Aider's own caches in the workspace (the repository map), not the agent's work.
OWN_FILES = re.compile(r"^\.aider\.tags\.cache\.v\d+(/|$)")

_LLM_ENTRY = re.compile(r"^(TO LLM|LLM RESPONSE) \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
# How Aider reports a model call that failed: litellm's exception, or its token-limit notice.
_ERROR_LINE = re.compile(r"^(litellm\.\w+Error\b|\w+Error: |Model .+ has hit a token limit!)")
_SHELL_QUESTION = re.compile(r"^> Run shell commands?\? .*: (?P<answer>\w)\s*$")


def _object(value: Any) -> dict[str, Any]:
    """``value`` when the CLI gave an object there, else an empty one."""
    return value if isinstance(value, dict) else {}


def replies_in_llm_history(text: str) -> list[str]:
    """The model's replies in a piece of Aider's LLM history, in order."""
    replies: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        entry = _LLM_ENTRY.match(line)
        if entry:
            current = [] if entry.group(1) == "LLM RESPONSE" else None
            if current is not None:
                replies.append(current)
        elif current is not None and line.startswith("ASSISTANT"):
            current.append(line[len("ASSISTANT ") :])
    return ["\n".join(lines).strip("\n") for lines in replies if "".join(lines).strip()]


def declined_shell_commands(chat_history: str) -> list[tuple[str, str]]:
    """Shell commands Aider asked about in a piece of its chat history, with its answer.

    Aider writes the commands as a quoted block right before the question; only the block's
    first line carries the ``> `` quote."""
    lines = chat_history.splitlines()
    found = []
    for index, line in enumerate(lines):
        question = _SHELL_QUESTION.match(line)
        if not question:
            continue
        start = index - 1
        while start >= 0 and not lines[start].startswith("> "):
            start -= 1
        if start < 0:
            continue
        block = [lines[start][2:], *lines[start + 1 : index]]
        command = "\n".join(part.rstrip() for part in block).strip()
        if command:
            found.append((command, question.group("answer").lower()))
    return found


def usage_in_analytics(text: str) -> dict[str, int] | None:
    """The tokens of the ``message_send`` events in a piece of Aider's analytics log (prompt
    tokens include cached ones, as Proctor counts them), or None when there is none."""
    usage = None
    for line in text.splitlines():
        event = json_object(line)
        if event is None or event.get("event") != "message_send":
            continue
        props = _object(event.get("properties"))
        usage = usage or dict.fromkeys(
            ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"), 0
        )
        usage["input_tokens"] += whole_number(props.get("prompt_tokens"))
        usage["output_tokens"] += whole_number(props.get("completion_tokens"))
    if usage is not None:
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return usage


def workspace_state(root: Path) -> dict[str, tuple[int, int]]:
    """Each file's (size, mtime) under ``root``, ``.git`` and Aider's caches left out: what a
    turn's file changes are found from. Reads directory entries only, not file contents."""
    state: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            if OWN_FILES.match(relative):
                continue
            try:
                stat = path.lstat()
            except OSError:
                continue
            state[relative] = (stat.st_size, stat.st_mtime_ns)
    return state


def changed_files(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> list[str]:
    """Files added, removed or modified between two states, sorted."""
    return sorted(
        path for path in before.keys() | after.keys() if before.get(path) != after.get(path)
    )


class _Offsets:
    """Where each side file ended before the turn, so only the turn's own part is read."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sizes = {name: self._size(name) for name in (CHAT_HISTORY, LLM_HISTORY, ANALYTICS)}

    def _size(self, name: str) -> int:
        try:
            return (self.folder / name).stat().st_size
        except OSError:
            return 0

    def new_text(self, name: str) -> str:
        try:
            with (self.folder / name).open("rb") as file:
                file.seek(self.sizes[name])
                return file.read().decode("utf-8", errors="replace")
        except OSError:
            return ""


class AiderTurnParser:
    """Aider's turn, read after it ended from its side files and the workspace."""

    def __init__(self, *, state_dir: Path, host_workspace: Path, workspace: str) -> None:
        self.session_id: str | None = None
        self.answer = ""
        self.usage: dict[str, int] = {}
        self.finish_reason: str | None = None
        self.permission_denials: list[dict[str, Any]] = []
        self.host_workspace = host_workspace
        self.workspace = workspace
        self._offsets = _Offsets(state_dir)
        self._before = workspace_state(host_workspace)
        self._last_error = ""

    def feed(self, line: str) -> list[AgentEvent]:
        # Aider prints prose; a failed model call is the only thing worth remembering from it.
        stripped = line.strip()
        if _ERROR_LINE.match(stripped):
            self._last_error = stripped
        return []

    def finish(self) -> list[AgentEvent]:
        events: list[AgentEvent] = []
        replies = replies_in_llm_history(self._offsets.new_text(LLM_HISTORY))
        for reply in replies:
            events.append(
                AgentEvent("Message", {"role": "assistant", "text": reply, "usage": None})
            )
        if replies:
            self.answer = replies[-1]
        for command, answer in declined_shell_commands(self._offsets.new_text(CHAT_HISTORY)):
            if answer == "y":
                continue  # a yes ran it (never under --yes-always); Aider reports no exit code
            events.append(
                AgentEvent(
                    "ToolCall",
                    {
                        "call_id": None,
                        "name": SHELL_TOOL,
                        "input": command,
                        "output": None,
                        "error": DECLINED,
                        "status": "declined",
                    },
                )
            )
            self.permission_denials.append(
                {"tool": SHELL_TOOL, "input": command, "call_id": None, "reason": DECLINED}
            )
        changed = changed_files(self._before, workspace_state(self.host_workspace))
        if changed:
            events.append(
                AgentEvent(
                    "FileChange", {"paths": [f"{self.workspace}/{path}" for path in changed]}
                )
            )
        usage = usage_in_analytics(self._offsets.new_text(ANALYTICS))
        if usage is not None:
            self.usage = usage
            events.append(AgentEvent("Usage", dict(usage)))
        if replies:
            self.finish_reason = "completed"
        elif self._last_error:
            self.finish_reason = f"error: {self._last_error[:300]}"
        return events


class AiderHarness(AgentCliHarness):
    name = "aider"
    capabilities = frozenset({CONVERSATION_RESUME})
    option_names = frozenset({"args"})
    executable = "aider"
    # The profile's dir lands in the home itself: Aider looks for ~/.aider.conf.yml and ~/.env.
    config_dir = ""
    install_hint = (
        "install it with the profile's install step (python3 -m pip install --user aider-chat) "
        "or put its folder on PATH in the profile's env"
    )

    def __init__(self, variant: Variant) -> None:
        super().__init__(variant)
        self._system_prompt_written = False

    def _state_dir(self, sandbox: Sandbox) -> Path:
        return sandbox.host_home / STATE_DIR

    def setup(self, sandbox: Sandbox, log: RawSink) -> None:
        super().setup(sandbox, log)
        self._state_dir(sandbox).mkdir(parents=True, exist_ok=True)

    def command_line(
        self, sandbox: Sandbox, request: TurnRequest, *, system_prompt: bool
    ) -> list[str]:
        state = f"{sandbox.home}/{STATE_DIR}"
        argv = [
            self.executable,
            "--yes-always",
            "--no-pretty",
            "--no-fancy-input",
            "--no-stream",
            "--no-check-update",
            "--no-show-release-notes",
            "--no-show-model-warnings",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-analytics",
            "--analytics-log",
            f"{state}/{ANALYTICS}",
            "--chat-history-file",
            f"{state}/{CHAT_HISTORY}",
            "--llm-history-file",
            f"{state}/{LLM_HISTORY}",
            "--input-history-file",
            f"{state}/{INPUT_HISTORY}",
        ]
        if not (sandbox.host_workspace / ".git").exists():
            argv.append("--no-git")
        if request.model:
            argv += ["--model", request.model]
        if system_prompt:
            argv += ["--read", f"{state}/{SYSTEM_PROMPT}"]
        if self._resumes(sandbox):
            argv.append("--restore-chat-history")
        argv += self.extra_args()
        # One argument, so a prompt that starts with a dash is not read as a flag.
        return [*argv, f"--message={request.prompt}"]

    def _resumes(self, sandbox: Sandbox) -> bool:
        """A follow-up: an earlier turn of this trial left a chat history to continue."""
        history = self._state_dir(sandbox) / CHAT_HISTORY
        return history.exists() and "\n#### " in history.read_text(
            encoding="utf-8", errors="replace"
        )

    def run_turn(
        self,
        sandbox: Sandbox,
        request: TurnRequest,
        *,
        emit: EventSink,
        raw: RawSink,
        timeout_s: float,
    ) -> TurnResult:
        state_dir = self._state_dir(sandbox)
        state_dir.mkdir(parents=True, exist_ok=True)
        system_prompt = self.system_prompt_for(request)
        if system_prompt and not self._system_prompt_written:
            (state_dir / SYSTEM_PROMPT).write_text(system_prompt + "\n", encoding="utf-8")
            self._system_prompt_written = True
        argv = self.command_line(sandbox, request, system_prompt=bool(system_prompt))
        parser = AiderTurnParser(
            state_dir=state_dir, host_workspace=sandbox.host_workspace, workspace=sandbox.workspace
        )
        return self.run_cli(sandbox, argv, parser, emit=emit, raw=raw, timeout_s=timeout_s)
