"""Simulated users end to end through `proctor eval`: a persona played by the fake model server
talks to the caller agent (a command-harness agent that resumes its session) until the agent
says ###STOP###, the persona wraps up, or its turns run out; a persona whose endpoint fails
stops the conversation with the cause. Every turn the persona wrote is recorded with its
origin and the prompt it was shown.

The cases share one batch (their trials run side by side, each persona routed by its
``[sim:<id>]`` tag).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import proctor_env
from conversations.recorded import EvalRun, RecordedTrial, benchmark, recorded_trial, run_eval
from e2e.running import Backend, write_eval
from fakes.openai_server import FakeModelServer

from simulated.conftest import MODEL, model_env
from simulated.model_roles import SIMULATED_USER, ModelRoles
from simulated.running import caller_profile, check_rows, score_and_threshold

PERSONA = (
    "You are Alex Thompson. You called to book a table for two on Friday. "
    "You are reactive: only respond to what the agent asks."
)
OPENING = "Hi, I'd like to book a table."
STOP = "###STOP###"


def persona(key: str) -> str:
    return f"{PERSONA} [sim:{key}]"


SHARED_EVAL = f"""
from proctor import assertion, case, profile, simulated_user, suite, variant

caller = {caller_profile()}

calls = suite(
    "calls",
    prompt="{{{{request}}}}",
    cases=[
        case("agent-stop", variables={{"request": "unused opening"}},
             user=simulated_user({persona("agent-stop")!r}, first_message={OPENING!r}, max_turns=5),
             validate=[assertion("icontains", "goodbye")]),
        case("persona-stop", variables={{"request": "I want to reschedule my booking."}},
             user=simulated_user({persona("persona-stop")!r}, max_turns=5, model="persona-small"),
             validate=[assertion("icontains", "tuesday")]),
        case("wrap-up", variables={{"request": "unused opening"}},
             user=simulated_user({persona("wrap-up")!r}, first_message={OPENING!r}, max_turns=5),
             validate=[assertion("icontains", "heard")]),
        case("max-turns", variables={{"request": "unused opening"}},
             user=simulated_user({persona("max-turns")!r}, first_message={OPENING!r}, max_turns=3),
             validate=[assertion("turn-count", 3)]),
        case("persona-fails", variables={{"request": "unused opening"}},
             user=simulated_user({persona("persona-fails")!r}, first_message={OPENING!r}),
             validate=[assertion("icontains", "heard")]),
        case("persona-silent", variables={{"request": "unused opening"}},
             user=simulated_user({persona("persona-silent")!r}, first_message={OPENING!r}),
             validate=[assertion("icontains", "heard")]),
        case("long-call", variables={{"request": "unused opening"}},
             user=simulated_user({persona("long-call")!r}, first_message={OPENING!r}, max_turns=10),
             validate=[assertion("icontains", "heard")]),
    ],
    variants=[variant("command", profile=caller)],
)
"""


@pytest.fixture(scope="module")
def shared(module_sqlite: Backend, module_roles: ModelRoles, tmp_path_factory) -> EvalRun:
    module_roles.simulated_user("[sim:agent-stop]", "Just that, bye!")
    module_roles.simulated_user("[sim:persona-stop]", "Tuesday at 7pm works.", STOP)
    module_roles.simulated_user("[sim:wrap-up]", f"Perfect, thank you! {STOP}")
    module_roles.simulated_user("[sim:max-turns]", *["Tell me more."] * 6)
    # [sim:persona-fails] is never scripted: the endpoint refuses every consultation (HTTP 400).
    module_roles.simulated_user("[sim:persona-silent]", "   ")
    module_roles.simulated_user(
        "[sim:long-call]", *[f"And another thing, number {n}." for n in range(1, 13)]
    )
    folder = tmp_path_factory.mktemp("simulated-evals")
    write_eval(folder, "calls.eval.py", SHARED_EVAL)
    return run_eval(module_sqlite, folder)


def trial_of(shared: EvalRun, backend: Backend, case: str) -> RecordedTrial:
    return recorded_trial(backend, shared.batch, case)


def test_it_plays_the_persona_from_its_first_message_until_the_agent_says_stop(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "agent-stop")

    assert trial.row["status"] == "passed"
    assert (trial.row["conversation_outcome"], trial.row["stop_cause"]) == ("completed", "")
    assert trial.conversation["outcome"] == "completed"
    # The first message opens the conversation (not the suite's prompt); the persona's reply follows.
    assert trial.user_messages == [OPENING, "Just that, bye!"]
    assert STOP in trial.turns[-1]["answer"]
    opening, reply = trial.turns
    assert opening["origin"] == {}
    assert reply["origin"] == {"simulated_user": {"model": MODEL}}
    assert [(index, origin) for index, _, origin, _ in trial.turn_rows()] == [
        (0, {}),
        (1, reply["origin"]),
    ]

    # One consultation, after the agent's first answer: the persona in the system message, the
    # conversation seen from the person's side (its own words as the assistant's).
    [consultation] = trial.consultations("simulated_user")
    assert (consultation["turn_index"], consultation["verdict"], consultation["model"]) == (
        0,
        "reply",
        MODEL,
    )
    system, *history = consultation["prompt"]
    assert system["role"] == "system" and PERSONA in system["content"]
    assert history == [
        {"role": "assistant", "content": OPENING},
        {"role": "user", "content": opening["answer"]},
    ]
    assert json.loads(trial.artifact("simulated-user/turn-1/prompt.json")) == consultation["prompt"]
    assert (
        json.loads(trial.artifact("simulated-user/turn-1/verdict.json"))["answer"]
        == "Just that, bye!"
    )

    # What reached the endpoint is what was recorded; the agent's STOP ended it, no more asking.
    [sent] = module_roles.sent(SIMULATED_USER, "[sim:agent-stop]")
    assert sent["model"] == MODEL
    assert sent["messages"] == consultation["prompt"]


def test_it_ends_completed_when_the_persona_says_stop_and_delivers_nothing_more(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "persona-stop")

    assert trial.row["status"] == "passed"
    assert (trial.row["conversation_outcome"], trial.row["stop_cause"]) == ("completed", "")
    # Without a first message the case's prompt opens; the persona's STOP is never sent to the agent.
    assert trial.user_messages == ["I want to reschedule my booking.", "Tuesday at 7pm works."]
    assert all(STOP not in message for message in trial.user_messages)
    assert [(c["turn_index"], c["verdict"]) for c in trial.consultations("simulated_user")] == [
        (0, "reply"),
        (1, "stop"),
    ]
    assert json.loads(trial.artifact("simulated-user/turn-2/verdict.json"))["verdict"] == "stop"
    assert "Tuesday at 7pm works." in trial.artifact("simulated-user/turn-2/prompt.json")


def test_a_persona_consults_its_own_model_when_it_names_one(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "persona-stop")

    assert [body["model"] for body in module_roles.sent(SIMULATED_USER, "[sim:persona-stop]")] == [
        "persona-small",
        "persona-small",
    ]
    assert trial.turns[1]["origin"] == {"simulated_user": {"model": "persona-small"}}
    assert [c["model"] for c in trial.consultations("simulated_user")] == [
        "persona-small",
        "persona-small",
    ]


def test_a_persona_wrapping_up_in_words_says_them_once_without_the_marker(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "wrap-up")

    assert (trial.row["conversation_outcome"], trial.row["stop_cause"]) == ("completed", "")
    assert trial.user_messages == [OPENING, "Perfect, thank you!"]
    assert [c["verdict"] for c in trial.consultations("simulated_user")] == ["stop"]


def test_it_stops_at_max_turns_counting_every_message_the_persona_delivered(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "max-turns")

    assert (trial.row["conversation_outcome"], trial.row["stop_cause"]) == (
        "stopped",
        "max_turns_reached",
    )
    assert trial.conversation["stop_cause"] == "max_turns_reached"
    assert trial.user_messages == [OPENING, "Tell me more.", "Tell me more."]
    assert len(module_roles.sent(SIMULATED_USER, "[sim:max-turns]")) == 2
    # A stopped conversation is a record, not a failure: the checks still graded it.
    assert trial.row["status"] == "passed"
    assert check_rows(trial)[0]["message"] == "3 turns (at most 3)"


def test_a_persona_whose_endpoint_fails_stops_the_conversation_with_the_cause(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "persona-fails")

    assert (trial.row["conversation_outcome"], trial.row["stop_cause"]) == (
        "stopped",
        "simulated_user_failed",
    )
    assert trial.row["responder_cause"] == "dispatch_failed"
    assert trial.conversation["responder_outcome"] == {"cause": "dispatch_failed"}
    assert trial.user_messages == [OPENING]
    [consultation] = trial.consultations("simulated_user")
    assert consultation["cause"] == "dispatch_failed"
    assert (
        "nothing scripted"
        in json.loads(trial.artifact("simulated-user/turn-1/verdict.json"))["reason"]
    )
    assert trial.row["status"] == "passed"


def test_a_persona_that_says_nothing_stops_the_conversation_as_an_empty_reply(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "persona-silent")

    assert (trial.row["stop_cause"], trial.row["responder_cause"]) == (
        "simulated_user_failed",
        "empty_reply",
    )
    assert trial.user_messages == [OPENING]


def test_a_persona_may_take_more_turns_than_the_cases_default(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "long-call")

    assert trial.row["stop_cause"] == "max_turns_reached"
    assert len(trial.user_messages) == 10


def test_benchmark_counts_each_stopped_conversation_as_a_validity_warning(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    report = benchmark(module_sqlite, shared.batch)

    assert report["validity_warnings"] == {
        "command:caller": {
            "max_turns_reached": 2,  # max-turns and long-call
            "simulated_user_failed:dispatch_failed": 1,
            "simulated_user_failed:empty_reply": 1,
        }
    }
    assert report["variants"]["command:caller"]["passed"] == 7


def test_the_terminal_names_the_stopped_conversations(shared: EvalRun) -> None:
    assert "simulated_user_failed:dispatch_failed × 1" in shared.result.stdout


# --- on each database -----------------------------------------------------------------------------


def test_a_simulated_call_graded_by_weighted_assertions_is_stored_on_each_database(
    backend_env: dict[str, str], fake_model_server: FakeModelServer, tmp_path: Path
) -> None:
    backend = Backend(
        "postgres" if "DATABASE_URL" in backend_env else "sqlite",
        {**backend_env, **model_env(fake_model_server)},
    )
    roles = ModelRoles().install(fake_model_server)
    roles.simulated_user("[sim:booked]", "Friday at 8, please.", STOP)
    write_eval(
        tmp_path / "evals",
        "booked.eval.py",
        f"""
    from proctor import assertion, case, profile, simulated_user, suite, variant

    caller = {caller_profile()}

    calls = suite(
        "calls",
        prompt="{{{{request}}}}",
        cases=[
            case("booked", variables={{"request": "unused"}}, threshold=0.7,
                 user=simulated_user({persona("booked")!r}, first_message={OPENING!r}),
                 validate=[
                     assertion("icontains", "friday at 8", weight=3, metric="disposition"),
                     assertion("not-icontains", "[object object]", weight=1, metric="no-json-leak"),
                     assertion("regex", "table for (two|2)", weight=1, metric="knowledge"),
                     assertion("latency", 0, weight=0, metric="latency"),
                 ]),
        ],
        variants=[variant("command", profile=caller)],
    )
    """,
    )

    run = run_eval(backend, tmp_path / "evals")
    trial = recorded_trial(backend, run.batch, "booked")

    assert trial.user_messages == [OPENING, "Friday at 8, please."]
    assert trial.turn_rows()[1][2] == {"simulated_user": {"model": MODEL}}
    assert [c["turn_index"] for c in trial.consultations("simulated_user")] == [0, 1]
    checks = check_rows(trial)
    assert [(c["metric"], c["weight"], c["passed"], c["score"]) for c in checks] == [
        ("disposition", 3.0, True, 1.0),
        ("no-json-leak", 1.0, True, 1.0),
        ("knowledge", 1.0, False, 0.0),
        ("latency", 0.0, False, 0.0),
    ]
    assert all(c["kind"] == "assertion" for c in checks)
    # 4 of 5 weighted points; the weight-0 latency check is information only.
    assert score_and_threshold(trial) == (pytest.approx(0.8), 0.7)
    assert trial.row["status"] == "passed"


# --- seeded conversations on a harness that cannot seed -------------------------------------------


def _seeded_eval(initial_messages: str) -> str:
    return f"""
    from proctor import case, command, profile, simulated_user, suite, variant

    caller = {caller_profile()}

    calls = suite(
        "calls",
        prompt="{{{{request}}}}",
        cases=[
            case("resume", variables={{"request": "I'd like to pay with my card."}},
                 user=simulated_user({PERSONA!r}, initial_messages={initial_messages}),
                 validate=command("true")),
        ],
        variants=[variant("command", profile=caller)],
    )
    """


def _refused(backend: Backend, folder: Path) -> str:
    result = backend.eval(folder)
    assert result.returncode == 2, (
        f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    )
    assert "Traceback" not in result.stderr
    assert not backend.exists() or backend.scalar("SELECT COUNT(*) FROM evals_app_trial") == 0
    return result.stderr.strip()


def test_initial_messages_on_a_harness_that_cannot_seed_are_refused_before_anything_runs(
    tmp_path: Path, fake_model_server: FakeModelServer
) -> None:
    backend = Backend("sqlite", proctor_env(tmp_path / "home", **model_env(fake_model_server)))
    seeded = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! Your name?"},
    ]
    write_eval(tmp_path / "evals", "seeded.eval.py", _seeded_eval(repr(seeded)))

    message = _refused(backend, tmp_path / "evals")

    assert len(message.splitlines()) == 1
    assert (
        "seeded-conversation" in message and "initial messages" in message and "command" in message
    )
    assert fake_model_server.requests == []


def test_initial_messages_from_a_file_are_read_relative_to_the_eval_file(
    tmp_path: Path, fake_model_server: FakeModelServer
) -> None:
    backend = Backend("sqlite", proctor_env(tmp_path / "home", **model_env(fake_model_server)))
    folder = tmp_path / "evals" / "calls"
    (folder / "transcripts").mkdir(parents=True)
    (folder / "transcripts" / "call.json").write_text(
        json.dumps(
            [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello! Your name?"},
            ]
        )
    )
    write_eval(folder, "seeded.eval.py", _seeded_eval('"file://transcripts/call.json"'))

    # Run from elsewhere: the file is still found (the refusal is the harness's, not the file's).
    message = _refused(backend, tmp_path / "evals")

    assert "seeded-conversation" in message and "cannot read" not in message


def test_a_missing_initial_messages_file_is_one_clear_line(
    tmp_path: Path, fake_model_server: FakeModelServer
) -> None:
    backend = Backend("sqlite", proctor_env(tmp_path / "home", **model_env(fake_model_server)))
    write_eval(
        tmp_path / "evals", "seeded.eval.py", _seeded_eval('"file://transcripts/missing.json"')
    )

    message = _refused(backend, tmp_path / "evals")

    assert len(message.splitlines()) == 1
    assert "seeded.eval.py" in message and "transcripts/missing.json" in message
    assert "cannot read" in message


def test_an_initial_messages_file_that_is_not_a_message_list_is_one_clear_line(
    tmp_path: Path, fake_model_server: FakeModelServer
) -> None:
    backend = Backend("sqlite", proctor_env(tmp_path / "home", **model_env(fake_model_server)))
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "call.json").write_text(json.dumps({"caller": "Alex"}))
    write_eval(tmp_path / "evals", "seeded.eval.py", _seeded_eval('"file://call.json"'))

    message = _refused(backend, tmp_path / "evals")

    assert len(message.splitlines()) == 1
    assert "call.json" in message and "role" in message
