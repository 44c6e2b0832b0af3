"""Time limits on the eval's own code, unit by unit: the forked child that runs validators
and prepare, the rule on the per-case limits, and a chat tool's stub that hangs."""

from __future__ import annotations

import os
import threading
import time

import pytest
from ceilings import finishes
from fakes.openai_server import FakeModelServer, fake_model_server_fixture  # noqa: F401
from harnesses.test_chat_harness import KEY, tool_call_reply

from proctor import case, command, suite, tool, variant
from proctor.rules import case_problems
from runner.core.limits import (
    UserCodeError,
    UserCodeRaised,
    UserCodeTimedOut,
    run_forked,
    run_in_thread,
)
from runner.harnesses.base import TurnRequest
from runner.harnesses.chat.harness import ChatHarness


def test_it_returns_what_the_child_returned_with_what_it_printed() -> None:
    notes: list[str] = []

    def call(note):
        note("a log line")
        print("printed in the child")
        return {"port": 4173}

    value, printed = run_forked(call, limit_s=10, what="prepare", on_note=notes.append)

    assert value == {"port": 4173}
    assert printed == "printed in the child\n"
    assert notes == ["a log line"]


def test_it_kills_a_hanging_child_and_says_what_hung_and_for_how_long() -> None:
    pid_holder: list[int] = []

    with pytest.raises(UserCodeTimedOut) as raised:
        finishes(
            lambda: run_forked(
                lambda note: (note(os.getpid()), time.sleep(3600)),
                limit_s=0.5,
                what="validator slow",
                on_note=pid_holder.append,
            ),
            what="a hanging child past its limit",
        )

    assert str(raised.value) == "validator slow did not finish within 0.5 s"
    with pytest.raises(ProcessLookupError):
        os.kill(pid_holder[0], 0)


def test_an_exception_a_child_exit_and_an_unpicklable_value_are_each_one_sentence() -> None:
    def raises(_note):
        raise ValueError("no such fixture")

    with pytest.raises(UserCodeRaised, match=r"^ValueError: no such fixture$"):
        run_forked(raises, limit_s=10, what="prepare")
    with pytest.raises(UserCodeError, match=r"^prepare ended its process \(exit status 3\)"):
        run_forked(lambda _note: os._exit(3), limit_s=10, what="prepare")
    with pytest.raises(UserCodeRaised, match=r"^returned a lock, which cannot be sent back"):
        run_forked(lambda _note: threading.Lock(), limit_s=10, what="prepare")


@pytest.mark.parametrize("field", ["check_timeout_ms", "prepare_timeout_ms"])
@pytest.mark.parametrize("value", [0, 999, 3_600_001, 1.5, True])
def test_the_per_case_limits_are_whole_milliseconds_in_range(field: str, value: object) -> None:
    bad = case("limited", validate=command("true"), **{field: value})  # type: ignore[arg-type]
    s = suite("s", prompt="p", cases=[bad], variants=[variant("command")])

    assert (
        f"{field} must be a whole number from 1,000 to 3,600,000 milliseconds (got {value!r})"
        in (case_problems(s, bad))
    )


@pytest.mark.parametrize(
    ("check", "said"),
    [
        (command(5), "command() needs the shell command to run, as text"),  # type: ignore[arg-type]
        (command("  "), "command() needs the shell command to run, as text"),
        (command("true", name=7), "command() name must be text, or left out (got 7)"),  # type: ignore[arg-type]
        (
            command("true", timeout_ms=-5),
            "command() timeout_ms must be a whole number from 1,000 to 3,600,000 milliseconds",
        ),
    ],
    ids=["not text", "blank", "name not text", "negative limit"],
)
def test_a_command_check_the_trial_could_not_run_is_refused_at_load(check, said: str) -> None:
    """Before, each loaded: the first and third errored every trial with a TypeError, the
    second passed every trial, the fourth ran with no limit a user would have chosen."""
    bad = case("checked", validate=check)
    s = suite("s", prompt="p", cases=[bad], variants=[variant("command")])

    assert [problem for problem in case_problems(s, bad) if said in problem]


def test_a_list_item_that_is_no_check_is_named_with_its_type() -> None:
    bad = case("checked", validate=[5])  # type: ignore[list-item]
    s = suite("s", prompt="p", cases=[bad], variants=[variant("command")])

    assert "validate[1] is an int, not a validator or judge" in case_problems(s, bad)


def test_a_hanging_tool_stub_fails_its_call_and_the_turn_goes_on(
    fake_model_server: FakeModelServer, monkeypatch
) -> None:
    release = threading.Event()
    monkeypatch.setattr(
        "runner.harnesses.chat.harness.default_limits",
        lambda: type("Limits", (), {"tool_s": 0.5})(),
    )
    fake_model_server.script(
        tool_call_reply(("check_calendar", '{"date": "Friday"}')), "The calendar is down."
    )
    harness = ChatHarness(
        variant(
            "chat",
            model="gpt-fake",
            base_url=fake_model_server.url,
            api_key=KEY,
            tools=[tool("check_calendar", stub=lambda args: release.wait(3600) and "free")],
        )
    )
    events = []

    # The stub waits for a release that comes only after the turn: the turn ends on the
    # tool's limit or not at all.
    result = finishes(
        lambda: harness.run_turn(
            None,  # type: ignore[arg-type]  # the chat harness never touches the sandbox
            TurnRequest(prompt="Is Friday free?", index=0, model="gpt-fake"),
            emit=events.append,
            raw=lambda _stream, _line: None,
            timeout_s=3600,
        ),
        what="a turn whose tool hangs",
    )
    release.set()

    assert result.answer == "The calendar is down."
    (call,) = [e.data for e in events if e.kind == "ToolCall"]
    assert call["status"] == "failed"
    assert call["error"] == "Error: tool check_calendar did not finish within 0.5 s."
    (log,) = [e.data["text"] for e in events if e.kind == "Log"]
    assert log == (
        "tool check_calendar did not finish within 0.5 s; its thread is stopped at its next "
        "Python step (a call blocked in C ends when that call returns)"
    )
    tool_message = fake_model_server.requests[1].body["messages"][-1]
    assert tool_message["content"] == "Error: tool check_calendar did not finish within 0.5 s."


def test_a_tool_stub_spinning_forever_is_stopped_after_its_limit() -> None:
    spins = []

    def spin() -> str:
        while True:  # a stub stuck in a loop: it never returns and never sleeps
            spins.append(1)
            if len(spins) > 1000:
                spins.clear()

    with pytest.raises(UserCodeTimedOut, match="tool spin did not finish within 0.3 s"):
        run_in_thread(spin, limit_s=0.3, what="tool spin")

    deadline = time.monotonic() + 10
    while _threads_named("proctor-tool spin") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _threads_named("proctor-tool spin") == []


def test_a_stub_that_swallows_exceptions_is_still_stopped() -> None:
    def stubborn() -> str:
        while True:
            try:
                time.sleep(0.01)
            except Exception:  # noqa: SIM105  # the author's catch-all cannot keep it alive
                continue

    with pytest.raises(UserCodeTimedOut):
        run_in_thread(stubborn, limit_s=0.3, what="tool stubborn")

    deadline = time.monotonic() + 10
    while _threads_named("proctor-tool stubborn") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _threads_named("proctor-tool stubborn") == []


def _threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]
