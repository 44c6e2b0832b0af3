"""The chat harness speaking Anthropic's Messages API (api="anthropic") to the fake server, and
a variant finding its endpoint in the vendor's own variables."""

from __future__ import annotations

import json

import pytest
from fakes.anthropic_messages import ANTHROPIC_MESSAGES, tool_use
from fakes.openai_server import FakeModelServer, Reply, fake_model_server_fixture  # noqa: F401

from harnesses.test_chat_harness import KEY, Booking, Turns
from proctor import variant
from runner.harnesses.chat.harness import ChatHarness

VENDOR_VARIABLES = (
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
)


@pytest.fixture(autouse=True)
def _no_vendor_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VENDOR_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def claude(server: FakeModelServer, **options):
    options.setdefault("base_url", server.root_url)
    options.setdefault("api_key", KEY)
    return variant("chat", model="claude-fake", api="anthropic", name="claude", **options)


def test_a_turn_posts_to_messages_with_the_key_header_and_the_system_prompt_on_top(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script("Bonjour le monde", route=ANTHROPIC_MESSAGES)

    result = Turns(ChatHarness(claude(fake_model_server, max_tokens=300))).send(
        "Say hello in French", system_prompt="You translate."
    )

    (request,) = fake_model_server.requests
    assert result.answer == "Bonjour le monde"
    assert request.path == ANTHROPIC_MESSAGES
    assert request.headers["x-api-key"] == KEY and "authorization" not in request.headers
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.body["system"] == "You translate." and request.body["max_tokens"] == 300
    assert request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello in French"}]}
    ]
    assert result.usage == {"input_tokens": 13, "output_tokens": 7}


def test_a_tool_use_runs_the_stub_and_its_result_goes_back_as_a_tool_result_block(
    fake_model_server: FakeModelServer,
) -> None:
    booking = Booking()
    fake_model_server.script(
        tool_use("schedule_appointment", {"date": "Tuesday 3pm"}, text="Let me book that."),
        "Booked for Tuesday 3pm.",
        route=ANTHROPIC_MESSAGES,
    )

    turns = Turns(ChatHarness(claude(fake_model_server, tools=[booking.tool])))
    result = turns.send("Book me Tuesday 3pm")

    first, second = fake_model_server.requests
    assert result.answer == "Booked for Tuesday 3pm."
    assert booking.calls == [{"date": "Tuesday 3pm"}]
    assert first.body["tools"][0]["name"] == "schedule_appointment"
    assert first.body["tools"][0]["input_schema"]["required"] == ["date"]
    assistant, results = second.body["messages"][1:]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {"type": "text", "text": "Let me book that."}
    call = assistant["content"][1]
    assert call["type"] == "tool_use" and call["input"] == {"date": "Tuesday 3pm"}
    assert results["role"] == "user"
    assert results["content"][0]["type"] == "tool_result"
    assert results["content"][0]["tool_use_id"] == call["id"]
    assert "Appointment confirmed for Tuesday 3pm" in results["content"][0]["content"]
    (recorded,) = turns.of_kind("ToolCall")
    assert json.loads(recorded["input"]) == {"date": "Tuesday 3pm"}


def test_a_refusal_names_the_servers_own_message(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script(
        Reply(
            status=401,
            body={
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            },
        ),
        route=ANTHROPIC_MESSAGES,
    )

    result = Turns(ChatHarness(claude(fake_model_server))).send("Hello")

    assert result.answer == ""
    assert "HTTP 401" in result.finish_reason and "invalid x-api-key" in result.finish_reason


def test_an_anthropic_variant_without_a_base_url_reads_anthropic_base_url_and_key(
    fake_model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    settings.PROCTOR_LLM_BASE_URL = ""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_model_server.root_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    fake_model_server.script("Hi.", route=ANTHROPIC_MESSAGES)
    bare = variant("chat", model="claude-fake", api="anthropic")

    assert ChatHarness.option_problems(bare) == []
    turns = Turns(ChatHarness(bare))
    turns.send("Hello")

    (request,) = fake_model_server.requests
    assert request.headers["x-api-key"] == "sk-ant-env"
    assert turns.harness.secrets() == ["sk-ant-env"]


def test_an_openai_variant_without_a_base_url_reads_openai_base_url_before_the_projects(
    fake_model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    settings.PROCTOR_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.PROCTOR_LLM_API_KEY = "project-key"
    monkeypatch.setenv("OPENAI_API_BASE_URL", fake_model_server.url)
    fake_model_server.script("Hi.")

    Turns(ChatHarness(variant("chat", model="gpt-fake", api="openai"))).send("Hello")

    (request,) = fake_model_server.requests
    assert "authorization" not in request.headers  # the project's key stays with its endpoint


def test_with_no_endpoint_anywhere_the_problem_names_the_vendors_variable(settings) -> None:
    settings.PROCTOR_LLM_BASE_URL = ""
    settings.PROCTOR_LLM_COMMAND = ""

    problems = ChatHarness.option_problems(variant("chat", model="claude-x", api="anthropic"))

    assert problems == [
        "variant chat:claude-x: the chat harness needs a model endpoint: give the variant a "
        "base_url or set ANTHROPIC_BASE_URL, PROCTOR_LLM_BASE_URL"
    ]


def test_max_tokens_and_response_format_reach_an_openai_endpoint(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script('{"ok": true}')
    json_variant = variant(
        "chat",
        model="gpt-fake",
        base_url=fake_model_server.url,
        max_tokens=50,
        response_format={"type": "json_object"},
    )

    Turns(ChatHarness(json_variant)).send("Answer in JSON")

    (request,) = fake_model_server.requests
    assert request.body["max_tokens"] == 50
    assert request.body["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"api": "gemini"}, "api must be one of openai, anthropic, not 'gemini'"),
        ({"max_tokens": 0}, "max_tokens must be a whole number above 0, not 0"),
        ({"response_format": "json"}, "response_format must be a dict"),
    ],
)
def test_wrong_request_options_are_named(options, problem, fake_model_server) -> None:
    wrong = variant("chat", model="m", base_url=fake_model_server.url, **options)

    assert any(problem in line for line in ChatHarness.option_problems(wrong))
