"""A scripted conversational agent for the conversation tests, written with the runner kit.

Markers in the opening prompt choose its behaviour, so one agent serves every test:
  [ask]         asks one question on the first act turn, then does the work
  [ask-forever] asks a new question every turn and never finishes
  [statement]   answers without a question mark
  [plan-file]   in plan mode, writes its plan to ~/plans/plan.md
  [ask-in-plan] in plan mode, asks a question before presenting the plan
  [never-plan]  in plan mode, never presents a plan
  [slow]        takes far too long on every follow-up turn (for timeout tests)
A prompt about a wrong due date (the seed's scripted example, which carries no marker) gets a
question about the time zone first.
It resumes its own session: state lives in ~/talker/<session id>.json.
"""

import json
import os
import time
import uuid
from pathlib import Path

from proctor.runner import create_emitter, env

run = env()
emit = create_emitter()
home = Path(run.home)
session = run.session_id or f"talk-{uuid.uuid4().hex[:8]}"
state_file = home / "talker" / f"{session}.json"
state = json.loads(state_file.read_text()) if state_file.exists() else {"prompts": [], "asked": 0}
state["prompts"].append({"prompt": run.prompt, "mode": run.mode})
opening = state["prompts"][0]["prompt"]
emit.started(session_id=session, model=run.model)


def say(text: str) -> None:
    emit.message(text)
    emit.usage(input_tokens=100, output_tokens=10)


def do_the_work() -> None:
    Path(run.workspace, "cache.py").write_text("CACHE = {}\n")
    emit.file_change([str(Path(run.workspace, "cache.py"))])
    say("Done: added an in-memory cache in cache.py.")


if run.mode == "plan":
    plan_turns = sum(1 for p in state["prompts"] if p["mode"] == "plan")
    # Trying to edit while planning: the mode refuses it.
    emit.tool_call(
        "write_file",
        {"path": "cache.py"},
        error="refused: plan mode is read-only",
        status="denied",
        call_id=f"deny-{plan_turns}",
    )
    if "[never-plan]" in opening:
        say("Still reading the code.")
    elif "[ask-in-plan]" in opening and plan_turns == 1:
        say("Which storage should the cache use: memory (recommended) or redis?")
    else:
        plan = "# Plan\n\n1. Add an in-memory cache in cache.py.\n2. Keep the API unchanged.\n"
        if "[plan-file]" in opening:
            (home / "plans").mkdir(exist_ok=True)
            (home / "plans" / "plan.md").write_text(plan)
        say(plan)
elif "[slow]" in opening and len(state["prompts"]) > 1:
    time.sleep(60)
    say("Finally done.")
elif "due date" in opening.lower() and state["asked"] == 0:
    state["asked"] = 1
    say("Which time zone are the affected users in?")
elif "[ask-forever]" in opening:
    state["asked"] += 1
    say(f"Before I start, question {state['asked']}: which option do you prefer?")
elif "[ask]" in opening and state["asked"] == 0:
    state["asked"] = 1
    say("Should the cache live in memory or in Redis? I recommend in memory.")
elif "[statement]" in opening and len(state["prompts"]) == 1:
    say("I looked at the pricing module.")
else:
    do_the_work()

received = home / "received.log"
with received.open("a") as log:
    log.write(
        json.dumps(
            {
                "session": session,
                "prompt": run.prompt,
                "mode": run.mode,
                "resumed": bool(os.environ.get("PROCTOR_SESSION_ID")),
            }
        )
        + "\n"
    )
state_file.parent.mkdir(parents=True, exist_ok=True)
state_file.write_text(json.dumps(state))
emit.finished("done")
