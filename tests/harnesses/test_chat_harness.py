"""The chat harness: the agent under test is a model endpoint with tools, talking to a fake
OpenAI-compatible server on loopback. Stubs run in the worker, their text goes back to the
model, and the model's own words are the reply."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakes.openai_server import FakeModelServer, Reply, fake_model_server_fixture  # noqa: F401

from evals_app.resolution import trial_prompts
from proctor import tool, variant
from proctor.agent_events import AgentEvent
from runner.harnesses import (
    CONVERSATION_RESUME,
    SEEDED_CONVERSATION,
    HarnessError,
    TurnRequest,
    TurnResult,
    create_harness,
)
from runner.harnesses.chat.harness import MAX_TOOL_ROUNDS, ChatHarness
from runner.llm import LLMConfig, LLMError, complete

KEY = "sk-chat-test-5c1e"
BOOKED = "Appointment confirmed for Tuesday 3pm. Calendar invite sent."
SCHEDULE_PARAMETERS = {
    "type": "object",
    "properties": {"date": {"type": "string", "description": "when, in the caller's words"}},
    "required": ["date"],
}


def tool_call_reply(*calls: tuple[str, str], content: str | None = None) -> dict[str, Any]:
    """A Chat Completions body whose assistant message calls ``(name, arguments JSON)``."""
    return {
        "id": "chatcmpl-tools",
        "object": "chat.completion",
        "model": "gpt-fake",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": f"call_{n}_{name}",
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        }
                        for n, (name, arguments) in enumerate(calls)
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27},
    }


class Booking:
    """A schedule_appointment tool whose stub remembers what it was called with."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def stub(self, args: dict[str, Any]) -> str:
        self.calls.append(args)
        return f"Appointment confirmed for {args.get('date', 'the requested time')}. Calendar invite sent."

    @property
    def tool(self):
        return tool(
            "schedule_appointment",
            description="Book an appointment.",
            parameters=SCHEDULE_PARAMETERS,
            stub=self.stub,
        )


def chat_variant(server: FakeModelServer, **options: Any):
    options.setdefault("base_url", server.url)
    options.setdefault("api_key", KEY)
    return variant("chat", model="gpt-fake", name="booker", **options)


class Turns:
    """Runs turns of one harness, keeping every event it emitted."""

    def __init__(self, harness: ChatHarness) -> None:
        self.harness = harness
        self.events: list[AgentEvent] = []
        self.raw: list[tuple[str, str]] = []
        self.session_id: str | None = None

    def send(
        self,
        prompt: str,
        *,
        index: int = 0,
        system_prompt: str | None = None,
        timeout_s: float = 30.0,
    ) -> TurnResult:
        result = self.harness.run_turn(
            None,  # type: ignore[arg-type]  # the chat harness never touches the sandbox
            TurnRequest(
                prompt=prompt,
                index=index,
                model=self.harness.variant.model,
                system_prompt=system_prompt,
                session_id=self.session_id,
            ),
            emit=self.events.append,
            raw=lambda stream, line: self.raw.append((stream, line)),
            timeout_s=timeout_s,
        )
        self.session_id = result.session_id
        return result

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [event.data for event in self.events if event.kind == kind]


def sent_messages(server: FakeModelServer, call: int) -> list[dict[str, Any]]:
    return server.requests[call].body["messages"]


# --- the tool loop ---------------------------------------------------------------------------------


def test_it_runs_the_stub_and_replies_with_the_models_own_words(
    fake_model_server: FakeModelServer,
) -> None:
    booking = Booking()
    fake_model_server.script(
        tool_call_reply(("schedule_appointment", '{"date": "Tuesday 3pm"}')),
        "You're booked for Tuesday at 3pm.",
    )
    turns = Turns(
        ChatHarness(
            chat_variant(
                fake_model_server, tools=[booking.tool], system_prompt="You book appointments."
            )
        )
    )

    result = turns.send("Can I come in Tuesday at 3?")

    assert booking.calls == [{"date": "Tuesday 3pm"}]
    assert result.answer == "You're booked for Tuesday at 3pm."
    assert result.finish_reason == "done" and not result.timed_out
    assert [e.kind for e in turns.events] == ["Started", "ToolCall", "Message", "Usage", "Finished"]
    assert turns.of_kind("ToolCall") == [
        {
            "call_id": "call_0_schedule_appointment",
            "name": "schedule_appointment",
            "input": '{"date": "Tuesday 3pm"}',
            "output": BOOKED,
            "error": None,
            "status": "completed",
        }
    ]
    assert turns.of_kind("Message") == [
        {"role": "assistant", "text": "You're booked for Tuesday at 3pm.", "usage": None}
    ]
    first, second = fake_model_server.requests
    assert first.body["tools"] == [booking.tool.to_openai()] and first.body["tool_choice"] == "auto"
    assert second.body["messages"][-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0_schedule_appointment",
                    "type": "function",
                    "function": {
                        "name": "schedule_appointment",
                        "arguments": '{"date": "Tuesday 3pm"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0_schedule_appointment", "content": BOOKED},
    ]


def test_it_sums_the_usage_of_every_model_call_of_the_turn(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(
        tool_call_reply(("schedule_appointment", '{"date": "Friday"}')), "Booked Friday."
    )
    turns = Turns(ChatHarness(chat_variant(fake_model_server, tools=[Booking().tool])))

    result = turns.send("Friday please")

    # 20 + 11 prompt tokens, 7 + 2 completion tokens (the fake counts the reply's words).
    assert result.usage == {"input_tokens": 31, "output_tokens": 9}
    assert turns.of_kind("Usage") == [
        {
            "input_tokens": 31,
            "output_tokens": 9,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "total_tokens": 40,
        }
    ]


def test_it_runs_every_call_of_a_round_before_asking_the_model_again(
    fake_model_server: FakeModelServer,
) -> None:
    booking = Booking()
    fake_model_server.script(
        tool_call_reply(
            ("schedule_appointment", '{"date": "Monday"}'),
            ("schedule_appointment", '{"date": "Friday"}'),
        ),
        "Both are booked.",
    )
    turns = Turns(ChatHarness(chat_variant(fake_model_server, tools=[booking.tool])))

    turns.send("Monday and Friday")

    assert booking.calls == [{"date": "Monday"}, {"date": "Friday"}]
    tool_messages = [m for m in sent_messages(fake_model_server, 1) if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [
        "call_0_schedule_appointment",
        "call_1_schedule_appointment",
    ]


def test_it_lets_the_model_answer_after_the_fifth_round_of_tool_calls(
    fake_model_server: FakeModelServer,
) -> None:
    booking = Booking()
    fake_model_server.script(
        *[
            tool_call_reply(("schedule_appointment", json.dumps({"date": f"day {n}"})))
            for n in range(MAX_TOOL_ROUNDS)
        ],
        "All five are booked.",
    )
    turns = Turns(ChatHarness(chat_variant(fake_model_server, tools=[booking.tool])))

    result = turns.send("Book me five days")

    assert result.finish_reason == "done" and result.answer == "All five are booked."
    assert len(booking.calls) == 5
    assert len(fake_model_server.requests) == 6


def test_after_five_rounds_the_model_is_asked_once_more_without_tools_for_its_words(
    fake_model_server: FakeModelServer,
) -> None:
    booking = Booking()
    fake_model_server.script(
        *[
            tool_call_reply(("schedule_appointment", json.dumps({"date": f"day {n}"})))
            for n in range(MAX_TOOL_ROUNDS + 1)
        ],
        "I booked five days; which others matter most?",
    )
    turns = Turns(ChatHarness(chat_variant(fake_model_server, tools=[booking.tool])))

    result = turns.send("Book me every day")

    # Five rounds of calls ran; the sixth request's calls are recorded but not run; the
    # seventh request offers no tools, and its words are the reply.
    assert result.finish_reason == "tool_rounds_exhausted"
    assert result.answer == "I booked five days; which others matter most?"
    assert len(fake_model_server.requests) == 7 and fake_model_server.unused_replies() == 0
    assert "tools" in fake_model_server.requests[5].body
    assert "tools" not in fake_model_server.requests[6].body
    assert len(booking.calls) == 5
    assert [c["status"] for c in turns.of_kind("ToolCall")] == ["completed"] * 5 + ["skipped"]
    assert [m["text"] for m in turns.of_kind("Message")] == [result.answer]
    assert turns.of_kind("Finished") == [{"reason": "tool_rounds_exhausted"}]


def test_a_model_that_calls_tools_even_when_offered_none_ends_the_turn_without_an_answer(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(
        *[
            tool_call_reply(("schedule_appointment", '{"date": "soon"}'))
            for _ in range(MAX_TOOL_ROUNDS + 2)
        ],
    )
    turns = Turns(ChatHarness(chat_variant(fake_model_server, tools=[Booking().tool])))

    result = turns.send("Book me")

    assert result.finish_reason == "tool_rounds_exhausted" and result.answer == ""
    assert len(fake_model_server.requests) == 7
    assert [c["status"] for c in turns.of_kind("ToolCall")] == ["completed"] * 5 + ["skipped"] * 2


def test_a_turn_after_exhausted_rounds_sends_a_history_that_answers_every_call(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(
        *[
            tool_call_reply(("schedule_appointment", '{"date": "soon"}'))
            for _ in range(MAX_TOOL_ROUNDS + 1)
        ],
        "I could not finish the booking.",
        "Sorry, I got stuck. When would you like to come in?",
    )
    turns = Turns(ChatHarness(chat_variant(fake_model_server, tools=[Booking().tool])))
    turns.send("Book me")

    result = turns.send("Tuesday", index=1)

    assert result.answer == "Sorry, I got stuck. When would you like to come in?"
    messages = sent_messages(fake_model_server, 7)
    called = [
        c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])
    ]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert called == answered and len(called) == MAX_TOOL_ROUNDS + 1
    assert messages[-1] == {"role": "user", "content": "Tuesday"}


# --- what goes wrong with a tool call ------------------------------------------------------------


def test_it_tells_the_model_its_arguments_were_not_valid_json(
    fake_model_server: FakeModelServer,
) -> None:
    booking = Booking()
    fake_model_server.script(
        tool_call_reply(("schedule_appointment", '{date: "Tuesday"')),
        "Which day did you want?",
    )
    turns = Turns(ChatHarness(chat_variant(fake_model_server, tools=[booking.tool])))

    result = turns.send("Tuesday")

    assert booking.calls == []
    (call,) = turns.of_kind("ToolCall")
    assert call["status"] == "failed" and call["output"] is None
    assert "not valid JSON" in call["error"]
    assert sent_messages(fake_model_server, 1)[-1] == {
        "role": "tool",
        "tool_call_id": "call_0_schedule_appointment",
        "content": call["error"],
    }
    assert result.answer == "Which day did you want?"


def test_it_tells_the_model_a_tool_it_called_does_not_exist(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(
        tool_call_reply(("cancel_everything", "{}")), "I can only book appointments."
    )
    turns = Turns(ChatHarness(chat_variant(fake_model_server, tools=[Booking().tool])))

    result = turns.send("Cancel all my appointments")

    (call,) = turns.of_kind("ToolCall")
    assert call["status"] == "failed" and call["name"] == "cancel_everything"
    assert (
        "no tool named 'cancel_everything'" in call["error"]
        and "schedule_appointment" in call["error"]
    )
    assert sent_messages(fake_model_server, 1)[-1]["content"] == call["error"]
    assert result.answer == "I can only book appointments."


def test_it_tells_the_model_what_a_failing_stub_raised(fake_model_server: FakeModelServer) -> None:
    def full_calendar(args: dict[str, Any]) -> str:
        raise ValueError("the calendar is full on Tuesday")

    fake_model_server.script(
        tool_call_reply(("schedule_appointment", '{"date": "Tuesday"}')), "Tuesday is full."
    )
    turns = Turns(
        ChatHarness(
            chat_variant(
                fake_model_server,
                tools=[
                    tool("schedule_appointment", parameters=SCHEDULE_PARAMETERS, stub=full_calendar)
                ],
            )
        )
    )

    result = turns.send("Tuesday")

    (call,) = turns.of_kind("ToolCall")
    assert call["status"] == "failed"
    assert "ValueError: the calendar is full on Tuesday" in call["error"]
    assert sent_messages(fake_model_server, 1)[-1]["content"] == call["error"]
    assert result.finish_reason == "done" and result.answer == "Tuesday is full."


def test_a_stub_that_returns_no_text_is_read_back_as_text(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(tool_call_reply(("count_slots", "")), "There are 3 slots left.")
    turns = Turns(
        ChatHarness(
            chat_variant(fake_model_server, tools=[tool("count_slots", stub=lambda args: 3)])
        )
    )

    turns.send("How many slots?")

    (call,) = turns.of_kind("ToolCall")
    assert call["status"] == "completed" and call["output"] == "3"
    assert sent_messages(fake_model_server, 1)[-1]["content"] == "3"


# --- the model endpoint ----------------------------------------------------------------------------


def test_a_model_error_ends_the_turn_without_an_answer(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script(
        Reply(status=404, body={"error": {"message": "The model gpt-fake does not exist"}})
    )
    turns = Turns(ChatHarness(chat_variant(fake_model_server)))

    result = turns.send("Hello?")

    assert result.answer == "" and not result.timed_out
    assert result.finish_reason.startswith("model error: ")
    assert "The model gpt-fake does not exist" in result.finish_reason
    assert turns.of_kind("Message") == []
    assert turns.of_kind("Finished") == [{"reason": result.finish_reason}]


def test_a_model_that_outlasts_the_turns_time_times_the_turn_out(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(Reply(text="too late", delay_s=30))
    turns = Turns(ChatHarness(chat_variant(fake_model_server)))

    result = turns.send("Hello?", timeout_s=0.5)

    assert result.timed_out and result.finish_reason == "timed out"
    assert result.answer == ""


def test_a_turn_with_no_time_left_calls_no_model(fake_model_server: FakeModelServer) -> None:
    turns = Turns(ChatHarness(chat_variant(fake_model_server)))

    result = turns.send("Hello?", timeout_s=0)

    assert result.timed_out and fake_model_server.requests == []


def test_it_reads_the_endpoint_from_the_workers_variables(
    fake_model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAT_TEST_GATEWAY", fake_model_server.url)
    monkeypatch.setenv("CHAT_TEST_KEY", KEY)
    fake_model_server.script("Hi there.")
    turns = Turns(
        ChatHarness(
            chat_variant(
                fake_model_server, base_url="$CHAT_TEST_GATEWAY", api_key="${CHAT_TEST_KEY}"
            )
        )
    )

    turns.send("Hello")

    assert fake_model_server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert turns.harness.secrets() == [KEY]


def test_it_refuses_to_start_when_a_workers_variable_is_missing(
    fake_model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHAT_TEST_MISSING", raising=False)
    harness = ChatHarness(chat_variant(fake_model_server, api_key="$CHAT_TEST_MISSING"))

    with pytest.raises(
        HarnessError, match=r"api_key refers to \$CHAT_TEST_MISSING, which is not set"
    ):
        harness.setup(None, lambda stream, line: None)  # type: ignore[arg-type]


def test_a_variants_own_endpoint_never_gets_the_projects_key(
    fake_model_server: FakeModelServer, settings
) -> None:
    settings.PROCTOR_LLM_API_KEY = "project-key-for-judges"
    fake_model_server.script("Hi there.")
    variant_without_key = variant("chat", model="gpt-fake", base_url=fake_model_server.url)

    Turns(ChatHarness(variant_without_key)).send("Hello")

    assert "authorization" not in fake_model_server.requests[0].headers


def test_it_uses_the_projects_endpoint_when_the_variant_names_none(
    fake_model_server: FakeModelServer, settings
) -> None:
    settings.PROCTOR_LLM_BASE_URL = fake_model_server.url
    settings.PROCTOR_LLM_API_KEY = KEY
    fake_model_server.script("Hi there.")

    Turns(ChatHarness(variant("chat", model="gpt-agent"))).send("Hello")

    (request,) = fake_model_server.requests
    assert (
        request.headers["authorization"] == f"Bearer {KEY}" and request.body["model"] == "gpt-agent"
    )


def test_it_sends_the_variants_temperature(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script("Hi there.")

    Turns(ChatHarness(chat_variant(fake_model_server, temperature=0.7))).send("Hello")

    assert fake_model_server.requests[0].body["temperature"] == 0.7


def test_it_offers_no_tools_when_the_variant_has_none(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script("Hi there.")

    Turns(ChatHarness(chat_variant(fake_model_server))).send("Hello")

    assert "tools" not in fake_model_server.requests[0].body
    assert "tool_choice" not in fake_model_server.requests[0].body


def test_it_writes_each_model_response_to_the_raw_log(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script("Hi there.")
    turns = Turns(ChatHarness(chat_variant(fake_model_server)))

    turns.send("Hello")

    ((stream, line),) = turns.raw
    assert stream == "model" and json.loads(line)["choices"][0]["message"]["content"] == "Hi there."


# --- conversations ---------------------------------------------------------------------------------


def test_a_second_turn_carries_the_whole_conversation(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script("Happy to help! What's your name?", "Nice to meet you, Alex.")
    turns = Turns(
        ChatHarness(chat_variant(fake_model_server, system_prompt="You are Sam from Acme."))
    )

    first = turns.send("Hi, I'd like a demo.")
    second = turns.send("It's Alex Thompson.", index=1)

    assert sent_messages(fake_model_server, 1) == [
        {"role": "system", "content": "You are Sam from Acme."},
        {"role": "user", "content": "Hi, I'd like a demo."},
        {"role": "assistant", "content": "Happy to help! What's your name?"},
        {"role": "user", "content": "It's Alex Thompson."},
    ]
    assert first.session_id and second.session_id == first.session_id
    assert [e["session_id"] for e in turns.of_kind("Started")] == [first.session_id] * 2


def test_seeded_messages_come_before_the_first_prompt(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script("Sure, Alex. Which card would you like to use?")
    harness = ChatHarness(chat_variant(fake_model_server, system_prompt="You are Sam from Acme."))
    seed = [
        {"role": "user", "content": "Hi, I'd like to learn about your service."},
        {"role": "assistant", "content": "I'd be happy to help! Can I get your name?"},
        {"role": "user", "content": "It's Alex Thompson."},
        {"role": "assistant", "content": "Great, Alex! Let me walk you through our options."},
    ]

    harness.seed(seed)
    Turns(harness).send("I'd like to pay with my credit card.")

    assert sent_messages(fake_model_server, 0) == [
        {"role": "system", "content": "You are Sam from Acme."},
        *seed,
        {"role": "user", "content": "I'd like to pay with my credit card."},
    ]


def test_a_seed_message_without_a_known_role_is_refused(fake_model_server: FakeModelServer) -> None:
    harness = ChatHarness(chat_variant(fake_model_server))

    with pytest.raises(HarnessError, match="initial message 2 needs a role"):
        harness.seed([{"role": "user", "content": "Hi"}, {"role": "caller", "content": "Hello"}])


def test_the_variants_system_prompt_wins_over_the_suites(
    fake_model_server: FakeModelServer,
) -> None:
    """The trial sends a variant's own system prompt in place of the suite's, filled with the
    case's variables; the harness sends what it is given, its option only when given none."""
    fake_model_server.script("Hi.", "Hi.", "Hi.")
    definition = {
        "prompt": "Hello",
        "system_prompt": "From the suite.",
        "variables": {"who": "the variant"},
    }

    for chat in (
        chat_variant(fake_model_server, system_prompt="From {{who}}."),
        chat_variant(fake_model_server),
    ):
        prompt, system_prompt = trial_prompts(definition, chat.options)
        Turns(ChatHarness(chat)).send(prompt, system_prompt=system_prompt)
    Turns(ChatHarness(chat_variant(fake_model_server, system_prompt="From it alone."))).send(
        "Hello"
    )

    assert [sent_messages(fake_model_server, i)[0] for i in range(3)] == [
        {"role": "system", "content": "From the variant."},
        {"role": "system", "content": "From the suite."},
        {"role": "system", "content": "From it alone."},
    ]


def test_it_refuses_a_session_it_does_not_hold(fake_model_server: FakeModelServer) -> None:
    turns = Turns(ChatHarness(chat_variant(fake_model_server)))
    turns.session_id = "chat-from-another-worker"

    with pytest.raises(HarnessError, match="chat session chat-from-another-worker is not held"):
        turns.send("Hello again")


# --- declaring and validating ----------------------------------------------------------------------


def test_it_is_registered_with_what_it_can_do(fake_model_server: FakeModelServer) -> None:
    harness = create_harness(chat_variant(fake_model_server))

    assert isinstance(harness, ChatHarness)
    assert ChatHarness.capabilities_for(chat_variant(fake_model_server)) == {
        CONVERSATION_RESUME,
        SEEDED_CONVERSATION,
    }
    assert harness.missing_capabilities(conversation=True, plan_mode=False) == []


def test_a_tool_without_a_stub_is_refused_when_the_harness_is_built(
    fake_model_server: FakeModelServer,
) -> None:
    no_stub = tool("schedule_appointment", parameters=SCHEDULE_PARAMETERS)

    with pytest.raises(
        HarnessError, match="variant booker: tool schedule_appointment needs a stub"
    ):
        ChatHarness(chat_variant(fake_model_server, tools=[no_stub]))


def test_it_lists_every_problem_of_a_variants_options(fake_model_server: FakeModelServer) -> None:
    broken = chat_variant(
        fake_model_server,
        tools=[
            {"name": "schedule_appointment"},
            tool("has space", stub=str),
            tool("a", stub=str),
            tool("a", stub=str),
        ],
        system_prompt=["not", "text"],
        temperature=3,
    )

    problems = ChatHarness.option_problems(broken)

    assert problems == [
        "variant booker: tools item 1 is a dict, not a tool(...) value",
        "variant booker: tool name 'has space' must be 1 to 64 letters, digits, _ or -",
        "variant booker: two tools are named a",
        "variant booker: system_prompt must be text, not list",
        "variant booker: temperature must be a number from 0 to 2, not 3",
    ]


def test_a_variant_with_no_endpoint_anywhere_is_a_problem(settings) -> None:
    settings.PROCTOR_LLM_BASE_URL = None
    settings.PROCTOR_LLM_COMMAND = None

    problems = ChatHarness.option_problems(variant("chat", model="gpt-4.1", name="booker"))

    assert problems == [
        "variant booker: the chat harness needs a model endpoint: give the variant a base_url "
        "or set PROCTOR_LLM_BASE_URL"
    ]


def test_tools_on_a_command_endpoint_are_a_problem(settings) -> None:
    settings.PROCTOR_LLM_BASE_URL = None
    settings.PROCTOR_LLM_COMMAND = "cat"

    problems = ChatHarness.option_problems(variant("chat", name="booker", tools=[Booking().tool]))

    assert len(problems) == 1 and "tools need an HTTP model endpoint" in problems[0]


# --- the client's tool calls -----------------------------------------------------------------------


def client_config(server: FakeModelServer) -> LLMConfig:
    return LLMConfig(
        base_url=server.url, api_key=KEY, model="gpt-fake", timeout_s=10.0, max_retries=0
    )


def test_the_client_returns_the_tool_calls_and_the_message_for_the_history(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(
        tool_call_reply(
            ("schedule_appointment", '{"date": "Tuesday 3pm"}'), content="Let me book that."
        )
    )

    completion = complete(
        client_config(fake_model_server),
        [{"role": "user", "content": "Tuesday"}],
        tools=[Booking().tool.to_openai()],
    )

    assert completion.text == "Let me book that."
    assert completion.tool_calls == [
        {
            "id": "call_0_schedule_appointment",
            "name": "schedule_appointment",
            "arguments": '{"date": "Tuesday 3pm"}',
        }
    ]
    # Only what every server accepts back: no "refusal", no "annotations".
    assert completion.message == {
        "role": "assistant",
        "content": "Let me book that.",
        "tool_calls": [
            {
                "id": "call_0_schedule_appointment",
                "type": "function",
                "function": {
                    "name": "schedule_appointment",
                    "arguments": '{"date": "Tuesday 3pm"}',
                },
            }
        ],
    }


def test_the_client_writes_object_arguments_as_json_and_names_calls_without_an_id(
    fake_model_server: FakeModelServer,
) -> None:
    body = tool_call_reply(("schedule_appointment", "{}"))
    body["choices"][0]["message"]["tool_calls"][0].pop("id")
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = {"date": "Friday"}
    fake_model_server.script(body)

    completion = complete(client_config(fake_model_server), [{"role": "user", "content": "Friday"}])

    (call,) = completion.tool_calls
    assert json.loads(call["arguments"]) == {"date": "Friday"}
    assert call["id"] and completion.message["tool_calls"][0]["id"] == call["id"]


def test_the_client_sends_tool_messages_as_given(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script("Booked.")
    history = [
        {"role": "user", "content": "Tuesday"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "schedule_appointment", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": BOOKED},
    ]

    completion = complete(
        client_config(fake_model_server), history, tools=[Booking().tool.to_openai()]
    )

    assert completion.text == "Booked." and completion.tool_calls == []
    assert completion.message == {"role": "assistant", "content": "Booked."}
    assert fake_model_server.requests[0].body["messages"] == history


def test_the_client_refuses_tools_on_a_command_endpoint() -> None:
    with pytest.raises(LLMError, match="needs an HTTP endpoint"):
        complete(
            LLMConfig(command="cat"),
            [{"role": "user", "content": "hi"}],
            tools=[Booking().tool.to_openai()],
        )
