"""The model client judges and the responder consult: HTTP against a fake server on loopback,
and a command with the prompt on stdin."""

from __future__ import annotations

import json
import os
import socket
import time
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest
from ceilings import HANG_CEILING_S, finishes
from fakes.openai_server import (  # noqa: F401
    FakeModelServer,
    Reply,
    chat_completion_body,
    fake_model_server_fixture,
)

from runner.llm import LLMConfig, LLMError, complete, http_client, parse_json_answer, resolve_config
from runner.llm.http_client import complete_http

MESSAGES = [{"role": "user", "content": "Which option do you want?"}]
KEY = "sk-test-4f9a1c7e"


def http_config(server: FakeModelServer, **overrides) -> LLMConfig:
    values: dict[str, Any] = {
        "base_url": server.url,
        "api_key": KEY,
        "model": "gpt-fake",
        "timeout_s": 10.0,
        "max_retries": 3,
    }
    values.update(overrides)
    return LLMConfig(**values)


def rate_limited() -> Reply:
    return Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0"})


# --- HTTP ------------------------------------------------------------------------------------------


def test_it_returns_the_assistants_answer(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script("Take the recommended option.")

    completion = complete(http_config(fake_model_server), MESSAGES)

    assert completion.text == "Take the recommended option."
    assert completion.model == "gpt-fake"
    assert completion.usage == {"input_tokens": 11, "output_tokens": 4}
    [request] = fake_model_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {"model": "gpt-fake", "messages": MESSAGES, "temperature": 0}


def test_it_asks_for_a_json_object_in_json_mode(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script('{"verdict": "answer"}')

    completion = complete(http_config(fake_model_server), MESSAGES, json_mode=True)

    assert parse_json_answer(completion.text) == {"verdict": "answer"}
    assert fake_model_server.requests[0].body["response_format"] == {"type": "json_object"}


def test_it_sends_the_key_as_a_bearer_token(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script("ok")

    complete(http_config(fake_model_server), MESSAGES)

    assert fake_model_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_it_sends_no_authorization_header_without_a_key(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script("ok")

    complete(http_config(fake_model_server, api_key=None), MESSAGES)

    assert "authorization" not in fake_model_server.requests[0].headers


def test_it_retries_a_rate_limit_and_then_answers(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script(rate_limited(), rate_limited(), "finally")

    completion = complete(http_config(fake_model_server), MESSAGES)

    assert completion.text == "finally"
    assert len(fake_model_server.requests) == 3


def test_it_backs_off_exponentially_and_honours_retry_after(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(
        Reply(status=500, body="internal error"),
        Reply(status=502, body="bad gateway"),
        Reply(status=429, headers={"Retry-After": "7"}),
        "ok",
    )
    slept: list[float] = []

    completion = complete_http(http_config(fake_model_server), MESSAGES, sleep=slept.append)

    assert completion.text == "ok"
    assert len(slept) == 3
    assert 0.5 <= slept[0] <= 1.0
    assert 1.0 <= slept[1] <= 2.0
    assert slept[2] == 7.0


def test_it_fails_with_dispatch_failed_when_retries_run_out(
    fake_model_server: FakeModelServer,
) -> None:
    overloaded = Reply(
        status=503,
        body={"error": {"message": "the engine is overloaded"}},
        headers={"Retry-After": "0"},
    )
    fake_model_server.script(overloaded, overloaded, overloaded)

    with pytest.raises(LLMError) as raised:
        complete(http_config(fake_model_server, max_retries=2), MESSAGES)

    assert raised.value.cause == "dispatch_failed"
    assert "HTTP 503" in str(raised.value)
    assert "the engine is overloaded" in str(raised.value)
    assert len(fake_model_server.requests) == 3
    assert fake_model_server.unused_replies() == 0


def test_it_retries_a_refused_connection_and_then_fails() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The port is closed again: every connection is refused.
    config = LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2)
    slept: list[float] = []

    with pytest.raises(LLMError) as raised:
        complete_http(config, MESSAGES, sleep=slept.append)

    assert raised.value.cause == "dispatch_failed"
    assert str(raised.value) == (
        f"could not reach the model endpoint at http://127.0.0.1:{port}/v1/chat/completions: "
        "Connection refused (tried 3 times)"
    )
    assert len(slept) == 2


def test_it_times_out_with_dispatch_timed_out_and_does_not_retry(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(Reply(text="too late", delay_s=5))

    with pytest.raises(LLMError) as raised:
        complete(http_config(fake_model_server, timeout_s=0.3), MESSAGES)

    assert raised.value.cause == "dispatch_timed_out"
    assert "did not answer within 0.3s" in str(raised.value)
    assert len(fake_model_server.requests) == 1


def test_it_honours_retry_after_as_an_http_date_and_caps_every_form(
    fake_model_server: FakeModelServer,
) -> None:
    in_twenty_seconds = formatdate(time.time() + 20, usegmt=True)
    fake_model_server.script(
        Reply(status=429, headers={"Retry-After": "when we feel like it"}),
        Reply(status=429, headers={"Retry-After": in_twenty_seconds}),
        Reply(status=503, headers={"Retry-After": "Fri, 31 Dec 2100 23:59:59 GMT"}),
        Reply(status=429, headers={"Retry-After": "3600"}),
        Reply(status=503, headers={"Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT"}),
        "ok",
    )
    slept: list[float] = []

    completion = complete_http(
        http_config(fake_model_server, max_retries=5), MESSAGES, sleep=slept.append
    )

    assert completion.text == "ok"
    assert 0.5 <= slept[0] <= 1.0  # unreadable: the backoff decides
    assert 10.0 <= slept[1] <= 20.0  # the date is to the second, and the clock moved on
    assert slept[2:] == [60.0, 60.0, 0.0]  # capped both ways


def test_it_retries_a_dropped_connection_and_says_so_when_it_keeps_dropping(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(Reply(drop=True), "after the drop", Reply(drop=True), Reply(drop=True))
    slept: list[float] = []

    answered = complete_http(http_config(fake_model_server), MESSAGES, sleep=slept.append)
    with pytest.raises(LLMError) as raised:
        complete_http(http_config(fake_model_server, max_retries=1), MESSAGES, sleep=slept.append)

    assert answered.text == "after the drop"
    assert raised.value.cause == "dispatch_failed"
    assert str(raised.value) == (
        f"the connection to the model endpoint at {fake_model_server.url}/chat/completions "
        "broke: Server disconnected without sending a response. (tried 2 times)"
    )
    assert len(slept) == 2
    assert fake_model_server.unused_replies() == 0


def test_a_server_trickling_its_answer_cannot_outlast_the_timeout(
    fake_model_server: FakeModelServer,
) -> None:
    # Each piece comes well within the timeout; the whole answer does not.
    fake_model_server.script(Reply(text="slowly " * 20, trickle_s=0.1))

    with pytest.raises(LLMError) as raised:
        complete(http_config(fake_model_server, timeout_s=0.5, max_retries=2), MESSAGES)

    assert raised.value.cause == "dispatch_timed_out"
    assert "did not answer within 0.5s" in str(raised.value)
    assert len(fake_model_server.requests) == 1
    # It hung up on the answer rather than read it to the end and then complained.
    assert fake_model_server.client_hung_up.wait(timeout=10)


def test_a_base_url_http_cannot_send_to_fails_at_once() -> None:
    slept: list[float] = []

    with pytest.raises(LLMError) as raised:
        complete_http(LLMConfig(base_url="localhost:8000/v1"), MESSAGES, sleep=slept.append)

    assert raised.value.cause == "dispatch_failed"
    assert str(raised.value) == (
        "cannot send to the model endpoint at localhost:8000/v1/chat/completions: "
        "Request URL is missing an 'http://' or 'https://' protocol."
    )
    assert slept == []


def test_it_names_where_a_redirect_points_and_does_not_follow_it(
    fake_model_server: FakeModelServer,
) -> None:
    moved = "https://models.example/v1/chat/completions"
    fake_model_server.script(Reply(status=308, headers={"Location": moved}), "never sent")

    with pytest.raises(LLMError) as raised:
        complete(http_config(fake_model_server), MESSAGES)

    assert raised.value.cause == "dispatch_failed"
    assert str(raised.value) == (
        f"the model endpoint refused the request (HTTP 308): it redirects to {moved}; "
        "point the base URL there"
    )
    assert len(fake_model_server.requests) == 1


def test_consultations_share_one_connection_and_keep_no_cookies(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(
        Reply(text="first", headers={"Set-Cookie": "gateway=trial-1; Path=/"}), "second"
    )
    config = http_config(fake_model_server)

    complete(config, MESSAGES)
    complete(config, MESSAGES)

    first, second = fake_model_server.requests
    assert first.client_port == second.client_port
    assert "cookie" not in second.headers


def test_it_goes_through_the_proxy_the_environment_names(
    fake_model_server: FakeModelServer, monkeypatch
) -> None:
    # The fake stands in for the proxy: it is asked for the whole URL of a host only it reaches.
    endpoint = "http://models.internal.invalid/v1"
    fake_model_server.add_route(f"{endpoint}/chat/completions", chat_completion_body)
    fake_model_server.script("through the proxy", route=f"{endpoint}/chat/completions")
    monkeypatch.setenv("HTTP_PROXY", fake_model_server.root_url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    # The client reads the environment when it is made, once per process.
    monkeypatch.setattr(http_client, "_shared", None)

    completion = complete(LLMConfig(base_url=endpoint, model="m"), MESSAGES)

    assert completion.text == "through the proxy"


def test_a_forked_child_opens_a_connection_of_its_own(fake_model_server: FakeModelServer) -> None:
    # `proctor eval -j N` forks its trial workers: a child writing on the parent's pooled
    # connection would mix the two processes' requests and answers.
    fake_model_server.script("parent", "child", "parent again")
    config = http_config(fake_model_server)
    complete(config, MESSAGES)
    reader, writer = os.pipe()

    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, whatever happens
        os.close(reader)
        try:
            said = complete(config, MESSAGES).text
        except BaseException as error:
            said = repr(error)
        os.write(writer, said.encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        child_said = pipe.read().decode()
    os.waitpid(pid, 0)
    after = complete(config, MESSAGES)

    assert child_said == "child"
    assert after.text == "parent again"
    parent, child, parent_again = (request.client_port for request in fake_model_server.requests)
    assert child != parent
    assert parent_again == parent


def test_it_fails_at_once_on_a_client_error_with_the_servers_message(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(
        Reply(
            status=400,
            body={
                "error": {
                    "message": "The model `gpt-fake` does not exist",
                    "type": "invalid_request_error",
                }
            },
        ),
        "never sent",
    )

    with pytest.raises(LLMError) as raised:
        complete(http_config(fake_model_server), MESSAGES)

    assert raised.value.cause == "dispatch_failed"
    assert (
        str(raised.value)
        == "the model endpoint refused the request (HTTP 400): The model `gpt-fake` does not exist"
    )
    assert len(fake_model_server.requests) == 1


def test_it_never_puts_the_key_in_an_error_message(fake_model_server: FakeModelServer) -> None:
    # Some providers quote the key they refused.
    fake_model_server.script(
        Reply(status=401, body={"error": {"message": f"Incorrect API key provided: {KEY}."}})
    )
    config = http_config(fake_model_server)

    with pytest.raises(LLMError) as raised:
        complete(config, MESSAGES)

    assert KEY not in str(raised.value)
    assert "Incorrect API key provided: [redacted]." in str(raised.value)
    assert KEY not in config.describe()
    assert KEY not in repr(config)
    assert config.describe() == f"{fake_model_server.url} model gpt-fake"


def test_an_answer_without_choices_is_dispatch_failed(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script(
        {"object": "chat.completion", "choices": []}, Reply(body="<html>gateway</html>")
    )
    config = http_config(fake_model_server, max_retries=0)

    with pytest.raises(LLMError) as no_choices:
        complete(config, MESSAGES)
    with pytest.raises(LLMError) as not_json:
        complete(config, MESSAGES)

    assert no_choices.value.cause == "dispatch_failed"
    assert "no choices" in str(no_choices.value)
    assert "something other than a JSON object" in str(not_json.value)


def test_it_fails_with_a_sentence_when_no_endpoint_is_configured() -> None:
    with pytest.raises(LLMError) as raised:
        complete(LLMConfig(), MESSAGES)

    assert raised.value.cause == "dispatch_failed"
    assert str(raised.value) == (
        "no model endpoint configured: set PROCTOR_LLM_BASE_URL (and PROCTOR_LLM_MODEL) or PROCTOR_LLM_COMMAND"
    )


# --- command ---------------------------------------------------------------------------------------


def test_the_command_gets_the_prompt_as_json_on_stdin_and_answers_on_stdout(tmp_path: Path) -> None:
    seen = tmp_path / "stdin.json"
    config = LLMConfig(command=f"cat > {seen}; echo 'Use the default.'", model="small-model")

    completion = complete(config, MESSAGES, json_mode=True)

    assert completion.text == "Use the default."
    assert completion.model == "small-model"
    assert json.loads(seen.read_text()) == {
        "model": "small-model",
        "messages": MESSAGES,
        "json": True,
    }


def test_a_failing_command_is_dispatch_failed_with_the_end_of_its_stderr() -> None:
    config = LLMConfig(command="echo 'loading model' >&2; echo 'model not found: tiny' >&2; exit 3")

    with pytest.raises(LLMError) as raised:
        complete(config, MESSAGES)

    assert raised.value.cause == "dispatch_failed"
    assert (
        str(raised.value)
        == "the consultation command exited with status 3: loading model model not found: tiny"
    )


def test_a_command_that_outruns_its_timeout_is_dispatch_timed_out() -> None:
    config = LLMConfig(command="sleep 30; echo never", timeout_s=0.3)

    with pytest.raises(LLMError) as raised:
        complete(config, MESSAGES)

    assert raised.value.cause == "dispatch_timed_out"
    assert "did not finish within 0.3s" in str(raised.value)


def test_a_command_that_ignores_its_stdin_still_answers() -> None:
    long_prompt = [{"role": "user", "content": "x" * 500_000}]
    config = LLMConfig(command="echo 'No need to read.'", timeout_s=10)

    completion = complete(config, long_prompt)

    assert completion.text == "No need to read."


def test_a_child_left_in_the_background_does_not_hold_the_answer_back() -> None:
    # Held back by its child, the answer would wait for its hour, past the command's timeout.
    config = LLMConfig(command="sleep 3600 & echo 'Answered.'", timeout_s=HANG_CEILING_S)

    completion = finishes(lambda: complete(config, MESSAGES), what="a command answering")

    assert completion.text == "Answered."


def test_the_command_runs_in_a_fresh_directory_outside_the_workspace(
    tmp_path: Path, monkeypatch
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Always answer in French.\n")
    monkeypatch.chdir(workspace)
    config = LLMConfig(command="pwd; ls -A | wc -l; touch written-by-consultation")

    completion = complete(config, MESSAGES)

    scratch, entries = completion.text.splitlines()
    assert Path(scratch).resolve() != workspace.resolve()
    assert workspace.resolve() not in Path(scratch).resolve().parents
    assert entries.strip() == "0"
    assert not Path(scratch).exists()
    assert sorted(os.listdir(workspace)) == ["AGENTS.md"]


# --- reading JSON answers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"verdict": "answer", "reply": "Yes."}',
        '  \n{"verdict": "answer", "reply": "Yes."}\n',
        '```json\n{"verdict": "answer", "reply": "Yes."}\n```',
        'Here you go:\n```\n{"verdict": "answer", "reply": "Yes."}\n```\nThanks.',
        'My verdict is {"verdict": "answer", "reply": "Yes."} as asked.',
        '{not json} but then {"verdict": "answer", "reply": "Yes."}',
    ],
)
def test_it_reads_a_json_object_however_the_model_wrapped_it(text: str) -> None:
    assert parse_json_answer(text) == {"verdict": "answer", "reply": "Yes."}


def test_it_keeps_nested_objects_whole() -> None:
    assert parse_json_answer('Result: {"a": {"b": [1, {"c": "}"}]}} done') == {
        "a": {"b": [1, {"c": "}"}]}
    }


@pytest.mark.parametrize(
    "text", ["", "I think it passes.", "[1, 2]", '{"unterminated": true', "```json\n[]\n```"]
)
def test_it_reads_nothing_from_an_answer_without_an_object(text: str) -> None:
    assert parse_json_answer(text) is None


# --- which endpoint --------------------------------------------------------------------------------


@pytest.fixture
def endpoint_settings(settings):
    settings.PROCTOR_LLM_BASE_URL = "http://models.internal:8000/v1"
    settings.PROCTOR_LLM_API_KEY = KEY
    settings.PROCTOR_LLM_MODEL = "settings-model"
    settings.PROCTOR_LLM_COMMAND = None
    settings.PROCTOR_LLM_TIMEOUT_S = 45.0
    return settings


def test_settings_give_the_default_endpoint(endpoint_settings) -> None:
    config = resolve_config()

    assert config == LLMConfig(
        base_url="http://models.internal:8000/v1",
        api_key=KEY,
        model="settings-model",
        command=None,
        timeout_s=45.0,
    )
    assert config.kind == "http"


def test_a_suite_endpoint_overrides_settings_and_a_model_override_wins_last(
    endpoint_settings,
) -> None:
    suite_level = LLMConfig(model="suite-model")

    assert resolve_config(base=suite_level).model == "suite-model"
    assert resolve_config(base=suite_level).base_url == "http://models.internal:8000/v1"
    assert resolve_config(base=suite_level).timeout_s == 45.0
    assert resolve_config(base=suite_level, model_override="judge-model").model == "judge-model"
    assert resolve_config(model_override="judge-model").model == "judge-model"


def test_a_command_named_by_a_suite_replaces_the_http_endpoint_of_settings(
    endpoint_settings,
) -> None:
    config = resolve_config(base=LLMConfig(command="my-agent --print"))

    assert config.kind == "command"
    assert config.base_url is None
    assert config.model == "settings-model"


def test_nothing_configured_is_unconfigured(settings) -> None:
    settings.PROCTOR_LLM_BASE_URL = None
    settings.PROCTOR_LLM_COMMAND = None

    config = resolve_config(model_override="some-model")

    assert config.kind == "unconfigured"
    assert config.describe() == "no model endpoint configured"


def test_the_django_side_reads_the_settings_once_into_a_value(endpoint_settings) -> None:
    from runner.jobs.model_endpoint import config_from_settings

    read = config_from_settings()
    endpoint_settings.PROCTOR_LLM_MODEL = "changed-later"

    assert read.model == "settings-model"
    assert read.base_url == "http://models.internal:8000/v1"
    assert read.timeout_s == 45.0


def test_an_endpoint_the_caller_resolved_wins_over_the_installed_one(endpoint_settings) -> None:
    given = LLMConfig(command="resolved-before-the-core --print", model="given-model")

    config = resolve_config(project=given, model_override="judge-model")

    assert config.command == "resolved-before-the-core --print"
    assert config.base_url is None
    assert config.model == "judge-model"


def test_without_django_the_environment_names_the_endpoint(monkeypatch) -> None:
    from runner.llm import endpoints

    monkeypatch.setattr(endpoints, "_project_config", None)  # as in a plain script
    monkeypatch.setenv("PROCTOR_LLM_BASE_URL", " http://env.internal/v1 ")
    monkeypatch.setenv("PROCTOR_LLM_MODEL", "env-model")
    monkeypatch.setenv("PROCTOR_LLM_TIMEOUT_S", "30")
    monkeypatch.delenv("PROCTOR_LLM_COMMAND", raising=False)

    config = resolve_config()

    assert config.base_url == "http://env.internal/v1"
    assert config.model == "env-model"
    assert config.timeout_s == 30.0
