"""The ``chat`` harness: the agent under test is a model endpoint with tools, not a process.

    variant("chat", model="gpt-4.1", system_prompt="You book appointments for ...",
            tools=[tool("schedule_appointment", parameters={...}, stub=book)],
            base_url="$GATEWAY_URL", api_key="$GATEWAY_KEY", temperature=0.7)

``base_url`` and ``api_key`` may name the worker's variables (``"$VAR"``, read when the trial
starts, as in a profile's env); without them the project's ``PROCTOR_LLM_*`` endpoint is used.
A variant that names its own ``base_url`` never receives the project's key.

``api`` names the wire API the endpoint speaks: ``"openai"`` (Chat Completions) or
``"anthropic"`` (Messages, runner.llm.anthropic_messages). A variant that names it without a
``base_url`` finds its endpoint where that vendor's own SDK does (``OPENAI_BASE_URL`` or
``OPENAI_API_BASE_URL`` with ``OPENAI_API_KEY``; ``ANTHROPIC_BASE_URL`` with
``ANTHROPIC_API_KEY``; the vendor's public endpoint when only the key is set), else the
project's endpoint, spoken to in OpenAI's format (a gateway serving every model).
``max_tokens`` caps each answer; ``response_format`` (OpenAI's, such as
``{"type": "json_object"}``) is sent to an OpenAI endpoint as given.

One turn: the person's message goes to the model with the conversation so far. When the model
calls tools, each stub runs here in the worker (never in the sandbox) with the call's arguments
as a dict, its text goes back to the model as the tool's result, and the model is asked again.
That repeats for up to MAX_TOOL_ROUNDS rounds of tool calls; after the last round the model is
asked once more. The model's text without tool calls is the reply. A tool result is never the
reply: a model still calling tools after the last round has those calls recorded as
``skipped`` (not run), and is asked one last time with no tools offered, for a reply in words;
the turn ends with ``tool_rounds_exhausted`` and that reply, so the person is never shown an
empty message. A turn makes at most MAX_TOOL_ROUNDS + 2 model calls. Text the model writes
alongside tool calls ("let me check") stays in its history but is not a reply.

The conversation is held in memory by this harness instance, which lives for one trial.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from proctor.agent_events import AgentEvent
from proctor.definitions import Variant
from proctor.tools import Tool
from runner.core.limits import UserCodeTimedOut, default_limits, run_in_thread
from runner.harnesses.base import (
    CONVERSATION_RESUME,
    SEEDED_CONVERSATION,
    EventSink,
    Harness,
    HarnessError,
    RawSink,
    TurnRequest,
    TurnResult,
)
from runner.harnesses.profile_env import references, resolve_profile_env
from runner.llm import (
    API_OPENAI,
    APIS,
    DISPATCH_TIMED_OUT,
    KIND_COMMAND,
    KIND_UNCONFIGURED,
    Completion,
    LLMConfig,
    LLMError,
    complete,
    resolve_config,
    vendor_config,
)
from runner.sandboxes import Sandbox

MAX_TOOL_ROUNDS = 5
FINISHED_DONE = "done"
FINISHED_TOOL_ROUNDS_EXHAUSTED = "tool_rounds_exhausted"
FINISHED_TIMED_OUT = "timed out"
MODEL_ERROR_PREFIX = "model error: "
SKIPPED = "skipped"

SEED_ROLES = ("system", "user", "assistant")
# What OpenAI accepts as a function name; other servers are no more lenient.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ENDPOINT_OPTIONS = ("base_url", "api_key")
REQUEST_OPTIONS = ("max_tokens", "response_format")


class ChatHarness(Harness):
    name = "chat"
    capabilities = frozenset({CONVERSATION_RESUME, SEEDED_CONVERSATION})
    option_names = frozenset(
        {"tools", "system_prompt", "temperature", "api", *ENDPOINT_OPTIONS, *REQUEST_OPTIONS}
    )

    def __init__(self, variant: Variant) -> None:
        super().__init__(variant)
        problems = self.option_problems(variant)
        if problems:
            raise HarnessError(problems[0])
        options = variant.options
        self.tools: dict[str, Tool] = {t.name: t for t in options.get("tools") or ()}
        self.system_prompt: str | None = options.get("system_prompt")
        self.temperature: float | None = options.get("temperature")
        self.max_tokens: int | None = options.get("max_tokens")
        self.response_format: Mapping[str, Any] | None = options.get("response_format")
        self._config: LLMConfig | None = None
        self._histories: dict[str, list[dict[str, Any]]] = {}
        self._seed: list[dict[str, Any]] = []

    # --- validation ---------------------------------------------------------------------------

    @classmethod
    def option_problems(cls, variant: Variant) -> list[str]:
        """What is wrong with a chat variant's options (tools, endpoint, temperature). Reads
        the project's model settings, nothing else."""
        where = f"variant {variant.name}"
        options = variant.options
        problems = []
        tools = options.get("tools") or ()
        if not isinstance(tools, list | tuple):
            problems.append(
                f"{where}: tools must be a list of tool(...) values, not {type(tools).__name__}"
            )
            tools = ()
        seen: set[str] = set()
        for position, item in enumerate(tools, start=1):
            if not isinstance(item, Tool):
                problems.append(
                    f"{where}: tools item {position} is a {type(item).__name__}, not a tool(...) value"
                )
                continue
            problems.extend(_tool_problems(item, where, seen))
            seen.add(item.name)
        for key in ("system_prompt", *ENDPOINT_OPTIONS):
            value = options.get(key)
            if value is not None and not isinstance(value, str):
                problems.append(f"{where}: {key} must be text, not {type(value).__name__}")
        temperature = options.get("temperature")
        if temperature is not None and (
            isinstance(temperature, bool)
            or not isinstance(temperature, int | float)
            or not 0 <= temperature <= 2
        ):
            problems.append(
                f"{where}: temperature must be a number from 0 to 2, not {temperature!r}"
            )
        api = options.get("api")
        if api is not None and api not in APIS:
            problems.append(f"{where}: api must be one of {', '.join(APIS)}, not {api!r}")
            api = None
        max_tokens = options.get("max_tokens")
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            problems.append(
                f"{where}: max_tokens must be a whole number above 0, not {max_tokens!r}"
            )
        response_format = options.get("response_format")
        if response_format is not None and not isinstance(response_format, Mapping):
            problems.append(
                f"{where}: response_format must be a dict such as {{'type': 'json_object'}}, "
                f"not {type(response_format).__name__}"
            )
        if not options.get("base_url") and not (api and vendor_config(api)):
            # Only the project's endpoint can be checked here: a "$VAR" base_url is the worker's.
            kind = resolve_config().kind
            if kind == KIND_UNCONFIGURED:
                problems.append(
                    f"{where}: the chat harness needs a model endpoint: give the variant a base_url "
                    f"or set {_endpoint_variables(api)}"
                )
            elif kind == KIND_COMMAND and tools:
                problems.append(
                    f"{where}: tools need an HTTP model endpoint, but PROCTOR_LLM_COMMAND names a command; "
                    "give the variant a base_url or set PROCTOR_LLM_BASE_URL"
                )
        return problems

    # --- the conversation ---------------------------------------------------------------------

    def seed(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Earlier messages the next conversation continues from: ``{"role", "content"}`` with
        role ``user`` (the person), ``assistant`` (the agent) or ``system``. They go after the
        system prompt and before the first turn's prompt."""
        seed = []
        for position, message in enumerate(messages, start=1):
            role, content = message.get("role"), message.get("content")
            if role not in SEED_ROLES or not isinstance(content, str):
                raise HarnessError(
                    f"variant {self.variant.name}: initial message {position} needs a role "
                    f"({', '.join(SEED_ROLES)}) and text content"
                )
            seed.append({"role": role, "content": content})
        self._seed = seed

    def secrets(self) -> list[str]:
        """The endpoint's key, for the trial's redaction (it only travels in a header, but a
        server may quote it back)."""
        key = self._endpoint().api_key
        return [key] if key else []

    def setup(self, sandbox: Sandbox, log: RawSink) -> None:
        # Resolve the endpoint now, so a missing worker variable errors the trial before any turn.
        self._endpoint()

    def run_turn(
        self,
        sandbox: Sandbox,
        request: TurnRequest,
        *,
        emit: EventSink,
        raw: RawSink,
        timeout_s: float,
    ) -> TurnResult:
        started = time.monotonic()
        config = self._endpoint()
        if request.model:
            config = dataclasses.replace(config, model=request.model)
        session_id, history = self._conversation(request)
        emit(AgentEvent("Started", {"session_id": session_id, "model": config.model}))
        history.append({"role": "user", "content": request.prompt})
        turn = _ToolLoop(self, config, history, emit=emit, raw=raw, deadline=started + timeout_s)
        reason, answer = turn.run()
        if answer:
            emit(AgentEvent("Message", {"role": "assistant", "text": answer, "usage": None}))
        if turn.usage:
            emit(AgentEvent("Usage", _usage_event(turn.usage)))
        emit(AgentEvent("Finished", {"reason": reason}))
        return TurnResult(
            session_id=session_id,
            finish_reason=reason,
            timed_out=reason == FINISHED_TIMED_OUT,
            exit_code=None,
            answer=answer,
            duration_ms=int((time.monotonic() - started) * 1000),
            usage=dict(turn.usage),
        )

    def _conversation(self, request: TurnRequest) -> tuple[str, list[dict[str, Any]]]:
        """The session this turn continues, or a new one holding the system prompt and seed."""
        if request.session_id:
            history = self._histories.get(request.session_id)
            if history is None:
                raise HarnessError(
                    f"variant {self.variant.name}: chat session {request.session_id} is not held by this harness"
                )
            return request.session_id, history
        session_id = f"chat-{uuid.uuid4().hex[:16]}"
        # The trial sends the variant's own system prompt (filled with the case's variables)
        # in place of the suite's; the option is read here only when a caller sends none.
        system_prompt = (
            request.system_prompt if request.system_prompt is not None else self.system_prompt
        )
        history = [{"role": "system", "content": system_prompt}] if system_prompt else []
        history.extend(self._seed)
        self._seed = []
        self._histories[session_id] = history
        return session_id, history

    def _endpoint(self) -> LLMConfig:
        """The model endpoint: the variant's base_url/api_key (worker variables filled in) over
        the project's settings. Raises HarnessError naming a missing worker variable."""
        if self._config is not None:
            return self._config
        given = {
            key: self.variant.options[key]
            for key in ENDPOINT_OPTIONS
            if self.variant.options.get(key)
        }
        for key, value in given.items():
            for name in references(value):
                if name not in os.environ:
                    raise HarnessError(
                        f"variant {self.variant.name}: {key} refers to ${name}, which is not set in the worker's environment"
                    )
        resolved = resolve_profile_env(given, profile=self.variant.name)
        api = self.variant.options.get("api")
        own = LLMConfig(
            base_url=resolved.get("base_url"),
            api_key=resolved.get("api_key"),
            api=api or API_OPENAI,
        )
        vendor = vendor_config(api) if api and not own.base_url else None
        if vendor is not None:
            own = dataclasses.replace(vendor, api_key=own.api_key or vendor.api_key)
        config = resolve_config(model_override=self.variant.model, base=own)
        if own.base_url:
            # The project's key belongs to the project's endpoint, not to one a variant names.
            config = dataclasses.replace(config, api_key=own.api_key)
        if config.kind == KIND_UNCONFIGURED:
            raise HarnessError(
                f"variant {self.variant.name}: the chat harness needs a model endpoint: give the "
                f"variant a base_url or set {_endpoint_variables(api)}"
            )
        self._config = config
        return config


class _ToolLoop:
    """One turn's calls of the model and of the tools it asks for."""

    def __init__(
        self,
        harness: ChatHarness,
        config: LLMConfig,
        history: list[dict[str, Any]],
        *,
        emit: EventSink,
        raw: RawSink,
        deadline: float,
    ) -> None:
        self.harness = harness
        self.config = config
        self.history = history
        self.emit = emit
        self.raw = raw
        self.deadline = deadline
        self.specs = [t.to_openai() for t in harness.tools.values()]
        self.usage: dict[str, int] = {}

    def run(self) -> tuple[str, str]:
        """(finish reason, answer). The history gains every message the model saw or wrote."""
        for round_number in range(MAX_TOOL_ROUNDS + 1):
            completion = self._ask()
            if isinstance(completion, str):
                return completion, ""
            self.history.append(completion.message)
            if not completion.tool_calls:
                return FINISHED_DONE, completion.text
            if round_number == MAX_TOOL_ROUNDS:
                self._skip(completion.tool_calls)
                return self._last_words()
            for call in completion.tool_calls:
                self._call_tool(call)
        raise AssertionError("unreachable: the last round returns")

    def _last_words(self) -> tuple[str, str]:
        """The rounds are spent: one more call, offering no tools, so the model answers in words.
        One that still calls tools (or says nothing) leaves the turn without an answer."""
        completion = self._ask(with_tools=False)
        if isinstance(completion, str):
            return completion, ""
        self.history.append(completion.message)
        if completion.tool_calls:
            self._skip(completion.tool_calls)
            return FINISHED_TOOL_ROUNDS_EXHAUSTED, ""
        return FINISHED_TOOL_ROUNDS_EXHAUSTED, completion.text

    def _ask(self, *, with_tools: bool = True) -> Completion | str:
        """The model's next message, or the finish reason when none came."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return FINISHED_TIMED_OUT
        capped = remaining < self.config.timeout_s
        config = dataclasses.replace(self.config, timeout_s=remaining) if capped else self.config
        try:
            completion = complete(
                config,
                self.history,
                tools=(self.specs or None) if with_tools else None,
                temperature=self.harness.temperature,
                max_tokens=self.harness.max_tokens,
                response_format=self.harness.response_format,
            )
        except LLMError as error:
            if error.cause == DISPATCH_TIMED_OUT and capped:
                return FINISHED_TIMED_OUT
            return MODEL_ERROR_PREFIX + error.message
        self.raw("model", _one_line(completion.raw))
        for key, count in completion.usage.items():
            self.usage[key] = self.usage.get(key, 0) + count
        return completion

    def _call_tool(self, call: dict[str, str]) -> None:
        # A stub gets the tool limit, or what is left of the turn when that is less.
        limit_s = max(0.001, min(default_limits().tool_s, self.deadline - time.monotonic()))
        try:
            output, error = run_stub(
                self.harness.tools, call["name"], call["arguments"], limit_s=limit_s
            )
        except UserCodeTimedOut as exc:
            output, error = None, f"Error: {exc}."
            self.emit(
                AgentEvent(
                    "Log",
                    {
                        "stream": "proctor",
                        "text": f"{exc}; its thread is stopped at its next Python step "
                        "(a call blocked in C ends when that call returns)",
                    },
                )
            )
        self._record(
            call, output=output, error=error, status="completed" if error is None else "failed"
        )

    def _skip(self, calls: list[dict[str, str]]) -> None:
        """Answer calls that will not run, so the history stays one the model accepts next turn."""
        why = f"not run: this turn reached its limit of {MAX_TOOL_ROUNDS} rounds of tool calls"
        for call in calls:
            self._record(call, output=None, error=why, status=SKIPPED)

    def _record(
        self, call: dict[str, str], *, output: str | None, error: str | None, status: str
    ) -> None:
        self.emit(
            AgentEvent(
                "ToolCall",
                {
                    "call_id": call["id"],
                    "name": call["name"],
                    "input": call["arguments"],
                    "output": output,
                    "error": error,
                    "status": status,
                },
            )
        )
        content = output if error is None else error
        self.history.append({"role": "tool", "tool_call_id": call["id"], "content": content or ""})


def run_stub(
    tools: Mapping[str, Tool], name: str, arguments: str, *, limit_s: float | None = None
) -> tuple[str | None, str | None]:
    """(output, None) from the stub, or (None, error) telling the model what went wrong; the
    error is what the model reads back, so it can correct itself.

    The stub runs in this process (it may keep state between calls) in a daemon thread waited
    for at most ``limit_s`` (default: the worker's tool limit); past it, raises
    UserCodeTimedOut and leaves its thread running (runner.core.limits)."""
    tool = tools.get(name)
    if tool is None or tool.stub is None:
        known = ", ".join(sorted(tools)) or "none"
        return None, f"Error: there is no tool named {name!r} (the tools are: {known})."
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError as exc:
        return (
            None,
            f"Error: the arguments for {name} were not valid JSON ({exc}); call it again with a JSON object.",
        )
    if not isinstance(parsed, dict):
        return (
            None,
            f"Error: the arguments for {name} must be a JSON object, not {type(parsed).__name__}.",
        )
    stub = tool.stub
    try:
        result = run_in_thread(
            lambda: stub(parsed),
            limit_s=limit_s if limit_s is not None else default_limits().tool_s,
            what=f"tool {name}",
        )
    except UserCodeTimedOut:
        raise  # the caller reports the abandoned thread
    except Exception as exc:  # the stub is the eval author's code: its failure is the model's news
        return None, f"Error: {name} failed: {type(exc).__name__}: {exc}"
    return (result if isinstance(result, str) else str(result)), None


def _endpoint_variables(api: str | None) -> str:
    """Where a variant with this ``api`` may find its endpoint, for the sentence naming none."""
    named = {"openai": "OPENAI_BASE_URL, ", "anthropic": "ANTHROPIC_BASE_URL, "}.get(api or "", "")
    return f"{named}PROCTOR_LLM_BASE_URL" if named else "PROCTOR_LLM_BASE_URL"


def _tool_problems(item: Tool, where: str, seen: set[str]) -> list[str]:
    problems = []
    if not TOOL_NAME.match(item.name or ""):
        problems.append(f"{where}: tool name {item.name!r} must be 1 to 64 letters, digits, _ or -")
    elif item.name in seen:
        problems.append(f"{where}: two tools are named {item.name}")
    if not callable(item.stub):
        problems.append(
            f"{where}: tool {item.name} needs a stub: a callable taking the arguments dict and "
            "returning the text the model reads back"
        )
    if not isinstance(item.parameters, Mapping):
        problems.append(
            f"{where}: tool {item.name}'s parameters must be a JSON schema object (a dict)"
        )
    return problems


def _usage_event(usage: dict[str, int]) -> dict[str, int]:
    input_tokens, output_tokens = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": input_tokens + output_tokens,
    }


def _one_line(raw: str) -> str:
    """The model's response for the raw log, one line per call."""
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False)
    except ValueError:
        return " ".join(raw.split())
