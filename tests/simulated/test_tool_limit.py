"""A chat agent whose model would call tools forever, talking to a simulated caller: after the
five rounds of tool calls a turn may make, the model is asked once more with no tools offered,
and the caller is shown those words, never an empty agent message."""

from __future__ import annotations

import json
from typing import Any

from conversations.recorded import recorded_trial, run_eval
from e2e.running import Backend, write_eval
from harnesses.test_chat_harness import tool_call_reply

from simulated.model_roles import AGENT, AGENT_MARK, SIMULATED_USER, ModelRoles

LAST_WORDS = "I am sorry, the booking system is not answering. Could you call back tomorrow?"
EVAL = f"""
from proctor import assertion, case, simulated_user, suite, tool, variant

lookup = tool(
    "lookup_table",
    description="Look up free tables.",
    parameters={{"type": "object", "properties": {{"day": {{"type": "string"}}}}}},
    stub=lambda args: "Still checking, try again.",
)

limits = suite(
    "limits",
    prompt="unused",
    cases=[
        case("forever", variables={{}},
             user=simulated_user("You want a table on Friday. [sim:forever]",
                                 first_message="A table on Friday, please. [case:forever]",
                                 max_turns=2),
             validate=[assertion("icontains", "call back")]),
    ],
    variants=[variant("chat", model="fake-agent", name="host", tools=[lookup],
                      system_prompt="You take bookings. {AGENT_MARK}")],
)
"""


def calls_its_tool_while_it_may(body: dict[str, Any]) -> dict[str, Any] | str:
    """A model that calls its tool whenever it is offered one."""
    if body.get("tools"):
        return tool_call_reply(("lookup_table", json.dumps({"day": "Friday"})))
    return LAST_WORDS


def test_the_simulated_user_sees_the_agents_words_after_the_tool_limit(
    sqlite_home: Backend, roles: ModelRoles, tmp_path
) -> None:
    roles.agent("[case:forever]", *[calls_its_tool_while_it_may] * 7)
    roles.simulated_user("[sim:forever]", "###STOP###")
    write_eval(tmp_path / "evals", "limits.eval.py", EVAL)

    run = run_eval(sqlite_home, tmp_path / "evals")
    trial = recorded_trial(sqlite_home, run.batch, "forever")

    assert trial.turns[0]["answer"] == LAST_WORDS
    assert trial.turns[0]["finish_reason"] == "tool_rounds_exhausted"
    # The caller's consultation holds the agent's words as the agent's last message.
    [consulted] = roles.sent(SIMULATED_USER, "[sim:forever]")
    assert consulted["messages"][-1] == {"role": "user", "content": LAST_WORDS}
    assert len(roles.sent(AGENT, "[case:forever]")) == 7
    assert trial.row["status"] == "passed"
