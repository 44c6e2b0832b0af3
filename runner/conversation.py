"""Driving the person's side of a trial: the opening prompt, then whatever the case's
conversation settings say comes next.

Today every case is one shot: the opening prompt, and the agent's answer. The outcome records
how the conversation ended, apart from whether the trial passed.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.session import AgentSession


@dataclass
class ConversationResult:
    outcome: str  # completed | stopped | timed_out
    stop_cause: str = ""


def drive_conversation(session: AgentSession, *, opening_prompt: str) -> ConversationResult:
    session.send(opening_prompt)
    if session.timed_out:
        return ConversationResult("timed_out")
    return ConversationResult("completed")
