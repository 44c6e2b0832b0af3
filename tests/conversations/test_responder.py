"""The responder end to end through `proctor eval`: an agent that asks gets its answer and
finishes; every way a conversation stops (the bounds, each rejected reply, each consultation
that yields no reply, the agent's own timeout) is recorded with its cause; and the time the
responder spends does not count against the agent.

Most cases share one batch (the trials run side by side, each scripted by its [case:<id>] tag).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import proctor_env
from e2e.running import Backend, write_eval
from fakes.openai_server import FakeModelServer, Reply

from conversations.conftest import RESPONDER_MODEL, model_env
from conversations.model_script import RESPONDER, ModelScript, answer, done
from conversations.recorded import (
    RecordedTrial,
    benchmark,
    recorded_trial,
    run_eval,
    talker_profile,
)

OPENING = "Requests to the pricing API are slow. Can you add caching?"
EXPECTED = "EXPECTED-MARKER: a working cache with the pricing endpoint under 100ms."
CHECK = "grep -q CACHE cache.py"
QUESTION = "Should the cache live in memory or in Redis? I recommend in memory."
REASON = "the agent recommended the in-memory option"
# The responder's consultation timeout in the shared batch: short, so a late answer times out.
# Long enough for every quick consultation of the stops batch on a busy machine; the one that
# must time out is held for two minutes (the server lets it go when it stops).
CONSULTATION_TIMEOUT_S = "15"
VARIANT = "command:talker"


def asking_eval(case_id: str = "ask", *, timeout_ms: int | None = None) -> str:
    limit = f", timeout_ms={timeout_ms}" if timeout_ms else ""
    return f"""
    from proctor import case, command, profile, responder, suite, variant

    talker = {talker_profile()}

    conversations = suite(
        "conversations",
        prompt="{{{{request}}}}",
        cases=[
            case(
                {case_id!r},
                variables={{"request": "[ask] {OPENING}"}},
                user=responder(max_turns=3),
                expected_output={EXPECTED!r},
                validate=command({CHECK!r}){limit},
            ),
        ],
        variants=[variant("command", profile=talker)],
    )
    """


# --- an agent that asks, gets its answer and finishes ---------------------------------------------


def test_it_answers_the_agents_question_and_completes_when_the_responder_says_done(
    backend_env: dict[str, str], fake_model_server: FakeModelServer, tmp_path: Path
) -> None:
    backend = Backend(
        "postgres" if "DATABASE_URL" in backend_env else "sqlite",
        {**backend_env, **model_env(fake_model_server)},
    )
    script = ModelScript().install(fake_model_server)
    script.responder("[ask]", answer("In memory, please.", REASON), done("the cache is in place"))
    write_eval(tmp_path / "evals", "ask.eval.py", asking_eval())

    run = run_eval(backend, tmp_path / "evals")
    trial = recorded_trial(backend, run.batch, "ask")

    assert trial.row["status"] == "passed"
    assert trial.row["conversation_outcome"] == "completed"
    assert trial.conversation["outcome"] == "completed"
    assert trial.conversation["stop_cause"] is None
    assert trial.user_messages == [f"[ask] {OPENING}", "In memory, please."]
    opening, follow_up = trial.turns
    assert opening["origin"] == {}
    assert follow_up["origin"]["responder"]["reason"] == REASON
    assert follow_up["origin"]["responder"]["model"] == RESPONDER_MODEL
    assert opening["answer"] == QUESTION
    assert [(index, origin) for index, _, origin, _ in trial.turn_rows()] == [
        (0, {}),
        (1, follow_up["origin"]),
    ]
    assert "cache.py" in trial.artifact("workspace.diff")

    # The follow-up resumed the agent's own session rather than starting a new one.
    sessions = trial.started_session_ids()
    assert [turn for turn, _ in sessions] == [0, 1]
    assert (
        sessions[0][1]
        == sessions[1][1]
        == trial.conversation["session_id"]
        == trial.row["session_id"]
    )

    # What the responder was shown: the request and the agent's last message, never the grading.
    shown = trial.artifact("responder/turn-1/prompt.json")
    assert OPENING in shown and QUESTION in shown
    assert "EXPECTED-MARKER" not in shown and CHECK not in shown
    first = json.loads(trial.artifact("responder/turn-1/verdict.json"))
    assert (first["verdict"], first["reason"]) == ("answer", REASON)
    last = json.loads(trial.artifact("responder/turn-2/verdict.json"))
    assert (last["verdict"], last["reason"]) == ("done", "the cache is in place")
    assert "In memory, please." in trial.artifact("responder/turn-2/prompt.json")
    assert [(c["verdict"], c["turn_index"]) for c in trial.consultations("responder")] == [
        ("answer", 0),
        ("done", 1),
    ]

    # What reached the model endpoint.
    sent = script.sent(RESPONDER, "[ask]")
    assert len(sent) == 2
    assert all(body["model"] == RESPONDER_MODEL for body in sent)
    for body in sent:
        everything = json.dumps(body)
        assert (
            OPENING in everything
            and "EXPECTED-MARKER" not in everything
            and CHECK not in everything
        )
    assert QUESTION in sent[0]["messages"][-1]["content"]
    second = sent[1]["messages"][-1]["content"]
    assert "In memory, please." in second and "Done: added an in-memory cache" in second


def test_time_spent_producing_replies_does_not_count_against_the_agents_timeout(
    sqlite_home: Backend, script: ModelScript, tmp_path: Path
) -> None:
    # Sixteen seconds of responder time against a twelve-second budget; the agent's two turns
    # are quick (twelve seconds is room for them on a busy machine).
    script.responder(
        "[ask]", Reply(delay_s=8, text=answer("In memory, please.")), Reply(delay_s=8, text=done())
    )
    write_eval(tmp_path / "evals", "ask.eval.py", asking_eval("slow-responder", timeout_ms=12000))

    run = run_eval(sqlite_home, tmp_path / "evals")
    trial = recorded_trial(sqlite_home, run.batch, "slow-responder")

    consultations = trial.consultations("responder")
    assert [c["verdict"] for c in consultations] == ["answer", "done"]
    # The replies really took longer than the agent's whole budget (the server held each one 8 s).
    assert sum(c["duration_ms"] for c in consultations) > 12000
    assert trial.row["status"] == "passed"
    assert trial.row["conversation_outcome"] == "completed"


def test_a_responder_behind_a_command_is_consulted_outside_the_workspace(tmp_path: Path) -> None:
    seen = tmp_path / "consultation"
    seen.mkdir()
    person = (
        f"pwd > {seen}/cwd; ls -A > {seen}/files; cat > {seen}/stdin.json; "
        'echo \'{"verdict": "done", "reason": "the agent finished"}\''
    )
    backend = Backend("sqlite", proctor_env(tmp_path / "proctor-home", PROCTOR_LLM_COMMAND=person))
    write_eval(
        tmp_path / "evals",
        "command.eval.py",
        f"""
    from proctor import case, command, files, profile, responder, suite, variant

    talker = {talker_profile()}

    by_command = suite(
        "by-command",
        prompt="{{{{request}}}}",
        source=files({{"AGENTS.md": "Always answer in French."}}),
        cases=[case("by-command", variables={{"request": "{OPENING}"}}, user=responder(),
                    expected_output={EXPECTED!r}, validate=command("test -f cache.py"))],
        variants=[variant("command", profile=talker)],
    )
    """,
    )

    run = run_eval(backend, tmp_path / "evals")
    trial = recorded_trial(backend, run.batch, "by-command")

    assert trial.row["conversation_outcome"] == "completed"
    assert [c["verdict"] for c in trial.consultations("responder")] == ["done"]
    # It ran in an empty folder of its own: not the workspace, and without its instruction files.
    assert "/workspace" not in (seen / "cwd").read_text()
    assert (seen / "files").read_text() == ""
    payload = json.loads((seen / "stdin.json").read_text())
    assert OPENING in json.dumps(payload["messages"]) and "EXPECTED-MARKER" not in json.dumps(
        payload
    )


# --- one batch reaching every stop ------------------------------------------------------------------

# case id -> (opening markers, extra case arguments, the responder's scripted answers)
STOPS: dict[str, tuple[str, str, list]] = {
    "responder-cap": (
        "[ask-forever]",
        "user=responder(max_turns=2)",
        [answer("First choice."), answer("Second choice."), answer("Third choice.")],
    ),
    "case-above-responder": (
        "[ask-forever]",
        "user=responder(max_turns=2), max_turns=5",
        [answer("First choice."), answer("Second choice."), answer("Third choice.")],
    ),
    "empty-reply": ("[ask]", "user=responder()", [answer("   ")]),
    # 1,001 characters but 2,002 bytes: the limit is on bytes.
    "reply-too-long": ("[ask]", "user=responder()", [answer("é" * 1001)]),
    "reply-with-code": (
        "[ask]",
        "user=responder()",
        [answer("Use this:\n```python\nCACHE = {}\n```")],
    ),
    "reply-repeated": (
        "[ask-forever]",
        "user=responder()",
        [answer("In memory."), answer("In memory.")],
    ),
    "declined": (
        "[ask]",
        "user=responder()",
        [
            json.dumps(
                {"verdict": "cannot_answer", "reason": "I would have to invent the Redis host"}
            )
        ],
    ),
    "dispatch-failed": (
        "[ask]",
        "user=responder()",
        [Reply(status=400, body={"error": {"message": "this model does not exist"}})],
    ),
    "dispatch-timed-out": (
        "[ask]",
        "user=responder()",
        [Reply(delay_s=120, text=answer("Too late."))],
    ),
    "missing-verdict": ("[ask]", "user=responder()", [json.dumps({"reply": "In memory."})]),
    "not-json": ("[ask]", "user=responder()", ["Sure, go with memory."]),
    "unknown-verdict": (
        "[ask]",
        "user=responder()",
        [json.dumps({"verdict": "maybe", "reply": "In memory."})],
    ),
    "agent-timed-out": (
        "[ask] [slow]",
        # Its first turn and one consultation fit easily; its second turn sleeps a minute.
        "user=responder(), timeout_ms=20000",
        [answer("In memory, please.")],
    ),
    # A reason that is only whitespace: nothing to keep, but the reply is still fine.
    "blank-reason": ("[ask]", "user=responder()", [answer("In memory, please.", "\n"), done()]),
}

REJECTED = {
    "empty-reply": "empty_reply",
    "reply-too-long": "reply_too_long",
    "reply-with-code": "reply_contains_code",
    "reply-repeated": "reply_repeated",
}
NO_REPLY = {
    "declined": "declined",
    "dispatch-failed": "dispatch_failed",
    "dispatch-timed-out": "dispatch_timed_out",
    "missing-verdict": "missing_verdict",
    "not-json": "malformed_verdict",
    "unknown-verdict": "malformed_verdict",
}


def stops_eval() -> str:
    cases = "\n".join(
        f"        case({case_id!r}, variables={{'request': '[case:{case_id}] {markers} add caching'}}, "
        f"{extra}, validate=command('true')),"
        for case_id, (markers, extra, _) in STOPS.items()
    )
    return (
        "from proctor import case, command, profile, responder, suite, variant\n\n"
        f"talker = {talker_profile()}\n\n"
        "stops = suite(\n"
        "    'stops',\n"
        "    prompt='{{request}}',\n"
        "    cases=[\n"
        f"{cases}\n"
        "    ],\n"
        "    variants=[variant('command', profile=talker)],\n"
        ")\n"
    )


@pytest.fixture(scope="module")
def stops_script(module_server: FakeModelServer) -> ModelScript:
    script = ModelScript().install(module_server)
    for case_id, (_, _, replies) in STOPS.items():
        script.responder(f"[case:{case_id}]", *replies)
    return script


@pytest.fixture(scope="module")
def stops_backend(tmp_path_factory, module_server: FakeModelServer) -> Backend:
    home = tmp_path_factory.mktemp("proctor-home")
    return Backend(
        "sqlite",
        proctor_env(home, **model_env(module_server, PROCTOR_LLM_TIMEOUT_S=CONSULTATION_TIMEOUT_S)),
    )


@pytest.fixture(scope="module")
def stops_batch(stops_backend: Backend, stops_script: ModelScript, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stops")
    write_eval(folder, "stops.eval.py", stops_eval())
    return run_eval(stops_backend, folder, "-j", "2")


def stopped(stops_backend: Backend, stops_batch, case_id: str) -> RecordedTrial:
    return recorded_trial(stops_backend, stops_batch.batch, case_id)


def test_it_stops_at_the_responders_bound_when_the_agent_keeps_asking(
    stops_backend, stops_batch
) -> None:
    trial = stopped(stops_backend, stops_batch, "responder-cap")

    assert trial.row["conversation_outcome"] == "stopped"
    assert trial.row["stop_cause"] == "max_turns_reached"
    assert trial.conversation["stop_cause"] == "max_turns_reached"
    # The opening prompt and the two follow-ups the responder may write; the third is not sent.
    assert trial.user_messages[1:] == ["First choice.", "Second choice."]
    # Stopped is a record, not a failure: the checks still graded the trial.
    assert trial.row["status"] == "passed"


def test_a_larger_case_max_turns_neither_adds_follow_ups_nor_counts_the_opening_prompt(
    stops_backend, stops_batch
) -> None:
    trial = stopped(stops_backend, stops_batch, "case-above-responder")

    # Both limits count follow-ups only; the smaller (the responder's 2) is the one reached.
    assert trial.row["stop_cause"] == "max_turns_reached"
    assert trial.user_messages[1:] == ["First choice.", "Second choice."]


@pytest.mark.parametrize("case_id", sorted(REJECTED))
def test_a_rejected_reply_is_never_delivered_and_stops_with_its_cause(
    stops_backend, stops_batch, case_id
) -> None:
    trial = stopped(stops_backend, stops_batch, case_id)

    assert trial.row["conversation_outcome"] == "stopped"
    assert trial.row["stop_cause"] == "responder_cannot_answer"
    assert trial.row["responder_cause"] == REJECTED[case_id]
    assert trial.conversation["responder_outcome"] == {"cause": REJECTED[case_id]}
    delivered = ["In memory."] if case_id == "reply-repeated" else []
    assert trial.user_messages[1:] == delivered
    assert trial.has_artifact(f"responder/turn-{len(delivered) + 1}/prompt.json")


@pytest.mark.parametrize("case_id", ["reply-too-long"])
def test_the_consultation_of_a_rejected_reply_records_why_it_was_rejected(
    stops_backend, stops_batch, case_id
) -> None:
    trial = stopped(stops_backend, stops_batch, case_id)

    (consultation,) = trial.consultations("responder")
    assert consultation["cause"] == REJECTED[case_id]
    assert json.loads(trial.artifact("responder/turn-1/verdict.json"))["cause"] == REJECTED[case_id]


@pytest.mark.parametrize("case_id", sorted(NO_REPLY))
def test_a_consultation_without_a_reply_stops_with_its_cause(
    stops_backend, stops_batch, case_id
) -> None:
    trial = stopped(stops_backend, stops_batch, case_id)

    assert trial.row["conversation_outcome"] == "stopped"
    assert trial.row["stop_cause"] == "responder_cannot_answer"
    assert trial.row["responder_cause"] == NO_REPLY[case_id]
    assert trial.user_messages == [f"[case:{case_id}] [ask] add caching"]
    (consultation,) = trial.consultations("responder")
    assert consultation["cause"] == NO_REPLY[case_id]
    assert json.loads(trial.artifact("responder/turn-1/verdict.json"))["cause"] == NO_REPLY[case_id]


def test_the_declined_consultation_keeps_the_responders_reason(stops_backend, stops_batch) -> None:
    trial = stopped(stops_backend, stops_batch, "declined")

    (consultation,) = trial.consultations("responder")
    assert consultation["verdict"] == "cannot_answer"
    assert consultation["reason"] == "I would have to invent the Redis host"


def test_an_agent_that_outruns_its_time_ends_the_conversation_timed_out(
    stops_backend, stops_batch, stops_script
) -> None:
    trial = stopped(stops_backend, stops_batch, "agent-timed-out")

    assert trial.row["status"] == "timed_out"
    assert trial.row["conversation_outcome"] == "timed_out"
    assert trial.conversation["outcome"] == "timed_out"
    assert trial.user_messages[1:] == ["In memory, please."]
    # Nobody is asked what to say after a turn that never ended.
    assert len(stops_script.sent(RESPONDER, "[case:agent-timed-out]")) == 1


def test_a_reason_of_only_whitespace_does_not_break_the_conversation(
    stops_backend, stops_batch
) -> None:
    trial = stopped(stops_backend, stops_batch, "blank-reason")

    assert trial.row["status"] == "passed", trial.row["error"]
    assert trial.row["conversation_outcome"] == "completed"
    assert trial.user_messages[1:] == ["In memory, please."]


def test_benchmark_counts_each_stop_by_name_per_variant(stops_backend, stops_batch) -> None:
    warnings = benchmark(stops_backend, stops_batch.batch)["validity_warnings"]

    assert warnings == {
        VARIANT: {
            "max_turns_reached": 2,
            "responder_cannot_answer:declined": 1,
            "responder_cannot_answer:dispatch_failed": 1,
            "responder_cannot_answer:dispatch_timed_out": 1,
            "responder_cannot_answer:empty_reply": 1,
            "responder_cannot_answer:malformed_verdict": 2,
            "responder_cannot_answer:missing_verdict": 1,
            "responder_cannot_answer:reply_contains_code": 1,
            "responder_cannot_answer:reply_repeated": 1,
            "responder_cannot_answer:reply_too_long": 1,
            "timed_out": 1,
        }
    }
    assert (
        benchmark(stops_backend, stops_batch.batch)["variants"][VARIANT]["validity_warnings"]
        == warnings[VARIANT]
    )


def test_proctor_eval_names_the_warnings_at_the_end(stops_batch) -> None:
    printed = stops_batch.result.stdout
    warning_lines = [line for line in printed.splitlines() if line.startswith("warning")]

    assert warning_lines, printed
    for name in (
        "max_turns_reached × 2",
        "responder_cannot_answer:reply_too_long × 1",
        "responder_cannot_answer:declined × 1",
        "timed_out × 1",
    ):
        assert name in printed
    assert printed.rindex("warning") > printed.index("stops / responder-cap")
