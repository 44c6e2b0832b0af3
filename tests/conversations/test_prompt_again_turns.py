"""A scripted turn given variables asks the case's prompt again: recorded filled with them,
asked in the variant's own words when the variant carries a prompt; a script of text turns
keeps the record it had."""

from __future__ import annotations

from pathlib import Path

from evals_app.resolution import resolve_case, trial_user
from proctor import assertion, case, suite, turn, turns, variant
from proctor.rules import case_problems


def resolved(user, tmp_path: Path):
    asked = case(
        "brother",
        variables={"question": "Who founded Rome?"},
        user=user,
        validate=[assertion("icontains", "remus")],
    )
    module = tmp_path / "history.eval.py"
    module.write_text("")
    history = suite(
        "history", prompt="Q: {{question}}", variants=[variant("chat", model="m")], cases=[asked]
    )
    return history, asked, resolve_case(history, asked, module)


def test_a_turn_with_variables_is_the_prompt_asked_again_in_each_variants_words(tmp_path: Path):
    _, asked, record = resolved(
        turns(turn(variables={"question": "Who was his brother?"})), tmp_path
    )

    (recorded,) = record.definition["conversation"]["user"]["turns"]
    assert recorded["prompt"] == "Q: Who was his brother?"
    assert recorded["variables"] == {"question": "Who was his brother?"}
    user = trial_user(record.definition, {"prompt": "Briefly: {{question}}"}, asked.user)
    assert [t.prompt for t in user.turns] == ["Briefly: Who was his brother?"]
    # A variant without a prompt of its own asks the suite's, as recorded.
    assert trial_user(record.definition, {}, asked.user) is asked.user


def test_a_script_of_text_turns_keeps_its_record(tmp_path: Path):
    _, _, record = resolved(turns("And his brother?"), tmp_path)

    assert record.definition["conversation"]["user"] == {
        "type": "turns",
        "turns": [
            {"prompt": "And his brother?", "deliver_when": "always", "agent_response_matches": None}
        ],
    }


def test_a_turn_with_both_text_and_variables_or_variables_not_text_is_named(tmp_path: Path):
    for user, problem in (
        (turns(turn("Why?", variables={"question": "x"})), "turn 1 gives both a prompt and"),
        (turns(turn(variables={"question": 3})), "turn 1's variables must map names to text"),
    ):
        history, asked, _ = resolved(user, tmp_path)
        assert any(problem in p for p in case_problems(history, asked)), user
