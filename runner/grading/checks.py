"""Grading a finished trial: command checks and Python validators.

Every check runs, even after one fails, so each keeps its own result and pass rate; the trial
passes only when all pass. A validator that raises is a failed check carrying the exception's
message, never a crashed trial; one that hangs is a failed check past its time limit (it runs
in a forked child, runner.core.limits).
"""

from __future__ import annotations

import pickle
import time
from typing import Any

from proctor.definitions import Command, Verdict
from runner.core.awaiting import resolved
from runner.core.limits import UserCodeError, default_limits, run_forked
from runner.core.mock_calls import MockLog
from runner.core.results import CheckResult, ExecResult, clip
from runner.core.transcript import Transcript, TurnTranscript
from runner.sandboxes import Sandbox


class CheckContext:
    """What every check of a trial receives; the same object for all of them, so checks can
    share work by setting attributes on it (``ctx.response = ...``)."""

    def __init__(
        self,
        *,
        sandbox: Sandbox,
        transcript: Transcript,
        prepared: Any,
        env: dict[str, str] | None = None,
        mocks: dict[str, MockLog] | None = None,
        trial_index: int = 0,
        variables: dict[str, Any] | None = None,
        prompt: str = "",
        tools: list[dict[str, Any]] | None = None,
        whole_conversation: bool = False,
        last_answer_only: bool = False,
    ) -> None:
        self._sandbox = sandbox
        # What promptfoo's assertion code reads as context.vars and context.prompt, and the
        # tools (OpenAI function specs) the variant declares, for tool-call assertions.
        self._variables = dict(variables or {})
        self._prompt = prompt
        self._tools = list(tools or [])
        # promptfoo's simulated user answers with the whole conversation as its output.
        self._whole_conversation = whole_conversation
        # A case replaying a conversation's earlier questions is graded on its own question's
        # answer, as promptfoo grades each test of a conversation.
        self._last_answer_only = last_answer_only
        self._transcript = transcript
        self._env = env or {}
        self.prepared = prepared
        self.workspace = sandbox.workspace
        # Each mock's calls by name: ctx.mocks["billing"].called("POST", "/refunds").
        self.mocks: dict[str, MockLog] = mocks or {}
        # Which trial of its cell this is (0, 1, 2...): a check that seeds by it repeats.
        self.trial_index = trial_index

    def answer(self) -> str:
        """The agent's last message."""
        return self._transcript.answer

    def transcript(self) -> str:
        """Every agent message, joined."""
        return self._transcript.text()

    def turns(self) -> list[TurnTranscript]:
        """The conversation turn by turn: prompt, messages, commands, tool calls, file changes."""
        return list(self._transcript.turns)

    def seeded_messages(self) -> list[dict[str, str]]:
        """The recorded conversation the agent continued from, if the case seeded one."""
        return list(self._transcript.seeded)

    @property
    def reads_whole_conversation(self) -> bool:
        """Whether assertions read promptfoo's output, the whole conversation (the case's
        simulated user is promptfoo's), in place of what the agent said."""
        return self._whole_conversation

    @property
    def reads_last_answer_only(self) -> bool:
        """Whether text assertions read the agent's last answer alone, in place of every
        message it wrote (the earlier turns replay the case's conversation so far)."""
        return self._last_answer_only

    def output(self) -> str:
        """What promptfoo's assertions call the output: the agent's last message, or with
        promptfoo's simulated user the whole conversation ("User: ..." and "Assistant: ..."
        messages, seeded ones first, separated by lines of ---)."""
        if not self._whole_conversation:
            return self.answer()
        lines = [
            f"{'Assistant' if role == 'assistant' else 'User'}: {text}"
            for role, text in ((m["role"], m["content"]) for m in self._transcript.seeded)
        ]
        for turn in self._transcript.turns:
            if turn.prompt:
                lines.append(f"User: {turn.prompt}")
            lines.append(f"Assistant: {turn.answer}")
        return "\n---\n".join(lines)

    def variables(self) -> dict[str, Any]:
        """The case's variables."""
        return dict(self._variables)

    def prompt(self) -> str:
        """The prompt the trial opened with, its variables filled."""
        return self._prompt

    def declared_tools(self) -> list[dict[str, Any]]:
        """The tools the variant offers the agent, as OpenAI function specs."""
        return list(self._tools)

    def tool_calls(self) -> list[dict[str, Any]]:
        """Every tool call the agent made, in order (name, input, output, status)."""
        return [call for turn in self._transcript.turns for call in turn.tool_calls]

    def read_text(self, path: str) -> str:
        """A workspace file's text. Raises for paths outside the workspace or missing files."""
        return self._sandbox.read_text(path)

    def exists(self, path: str) -> bool:
        return self._sandbox.exists(path)

    def exec(self, cmd: str, *, timeout_ms: int = 10 * 60 * 1000) -> ExecResult:
        """Run a shell command in the workspace (a subprocess inside the sandbox)."""
        result = self._sandbox.run(["bash", "-c", cmd], env=self._env, timeout_s=timeout_ms / 1000)
        return ExecResult(result.exit_code, clip(result.output), result.timed_out)


def run_command_check(check: Command, ctx: CheckContext) -> CheckResult:
    started = time.monotonic()
    result = ctx.exec(check.command, timeout_ms=check.timeout_ms)
    if result.timed_out:
        message = f"timed out after {check.timeout_ms / 1000:g}s"  # 1.5s, 600s
    else:
        message = f"exited {result.exit_code}"
    return CheckResult(
        name=check.label,
        kind="command",
        passed=result.ok,
        message=message,
        output=result.output,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


def _verdict_of(value: Any) -> Verdict:
    if isinstance(value, bool):
        return Verdict(passed=value)
    if isinstance(value, dict) and isinstance(value.get("passed"), bool):
        value = Verdict(
            passed=value["passed"], message=str(value.get("message", "")), score=value.get("score")
        )
    if not isinstance(value, Verdict):
        raise TypeError(f"returned {type(value).__name__}; a validator returns a bool or a Verdict")
    return checked_verdict(value)


def checked_verdict(verdict: Verdict) -> Verdict:
    """``verdict`` if its fields can be recorded as they mean: one that cannot fails its check
    saying which field (it once errored the whole trial, or passed with a score of 1.5)."""
    if not isinstance(verdict.passed, bool):
        raise TypeError(f"returned Verdict(passed={verdict.passed!r:.40}); passed is True or False")
    if not isinstance(verdict.message, str):
        raise TypeError(
            f"returned a Verdict whose message is {verdict.message!r:.40}; the message is text "
            "(a score goes in score=)"
        )
    score = verdict.score
    if score is not None and (
        isinstance(score, bool)
        or not isinstance(score, int | float)
        or not 0 <= score <= 1  # NaN fails this too
    ):
        raise ValueError(f"returned a Verdict whose score is {score!r:.40}; a score is 0 to 1")
    return verdict


def _shared_work(ctx: CheckContext) -> dict[str, Any]:
    """What a validator left on ``ctx`` for the next ones (public attributes that pickle)."""
    shared = {}
    for key, value in vars(ctx).items():
        if key.startswith("_") or key in ("workspace", "mocks"):
            continue
        try:
            pickle.dumps(value)
        except Exception:
            continue  # stays in the validator's process; the next validator does not see it
        shared[key] = value
    return shared


def run_validator(
    validator: Any,
    ctx: CheckContext,
    *,
    name: str,
    source_ref: dict[str, Any],
    limit_s: float | None = None,
) -> CheckResult:
    """Run a Python validator (sync or async) in a forked child for at most ``limit_s``
    (default: the worker's check limit); see runner.core.limits."""
    started = time.monotonic()
    limit = limit_s if limit_s is not None else default_limits().check_s

    def call(_note: Any) -> tuple[Verdict, dict[str, Any]]:
        return _verdict_of(resolved(validator(ctx))), _shared_work(ctx)

    output = ""
    try:
        (verdict, shared), output = run_forked(call, limit_s=limit, what=f"validator {name}")
        for key, value in shared.items():
            setattr(ctx, key, value)
        passed, message, score = verdict.passed, verdict.message, verdict.score
    except UserCodeError as exc:  # a validator's bug is that check's failure, not the trial's crash
        passed, message, score, output = False, str(exc), None, exc.printed
    return CheckResult(
        name=name,
        kind="validator",
        passed=passed,
        message=message,
        score=score,
        output=clip(output),
        source_ref=source_ref,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
