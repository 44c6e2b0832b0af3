"""A plain agent for the budget and plan-mode-write tests, written with the runner kit.

In plan mode it writes its plan to ~/plans/plan.md (the profile's plan_file) and presents it;
with [write-in-plan] in the opening prompt it also writes notes.md into the workspace while
planning, which plan mode should have prevented. In act mode it asks about the time zone first
when the request is about a due date (the seed's scripted example), and otherwise adds
cache.py and reports it, every turn: it never runs out of things to say, so a responder that
never says done keeps the conversation going to its bound.
"""

import json
from pathlib import Path

from proctor.runner import create_emitter, env

run = env()
emit = create_emitter()
home = Path(run.home)
session = run.session_id or "steady-session"
state_file = home / "steady" / f"{session}.json"
state = json.loads(state_file.read_text()) if state_file.exists() else {"prompts": []}
state["prompts"].append(run.prompt)
opening = state["prompts"][0]
emit.started(session_id=session, model=run.model)


def say(text: str) -> None:
    emit.message(text)
    emit.usage(input_tokens=50, output_tokens=5)


if run.mode == "plan":
    if "[write-in-plan]" in opening:
        Path(run.workspace, "notes.md").write_text("planning notes\n")
    plan = "# Plan\n\n1. Add an in-memory cache in cache.py.\n"
    (home / "plans").mkdir(exist_ok=True)
    (home / "plans" / "plan.md").write_text(plan)
    say(plan)
elif "due date" in opening.lower() and len(state["prompts"]) == 1:
    say("Which time zone are the affected users in?")
else:
    Path(run.workspace, "cache.py").write_text("CACHE = {}\n")
    say(f"Done (message {len(state['prompts'])}): the cache is in cache.py.")

state_file.parent.mkdir(parents=True, exist_ok=True)
state_file.write_text(json.dumps(state))
emit.finished("done")
