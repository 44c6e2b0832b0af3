"""A conversational command-harness agent for the simulated-user and assertion tests.

It answers every message it is sent, in the session it resumes (state in ~/caller/<id>.json):
  a message holding "bye"      -> a goodbye that ends the conversation with ###STOP###
  a message starting "SAY:"    -> exactly the rest of that message (its final answer, verbatim)
  anything else                -> "Reply <n>: I heard '<message>'. Anything else?"
Every turn reports 1000 input and 100 output tokens, so a variant's prices give a known cost.
"""

import json
import uuid
from pathlib import Path

from proctor.runner import create_emitter, env

run = env()
emit = create_emitter()
session = run.session_id or f"caller-{uuid.uuid4().hex[:8]}"
state_file = Path(run.home) / "caller" / f"{session}.json"
state = json.loads(state_file.read_text()) if state_file.exists() else {"prompts": []}
state["prompts"].append(run.prompt)
emit.started(session_id=session, model=run.model)

if "bye" in run.prompt.lower():
    reply = "Thanks for calling, goodbye. ###STOP###"
elif run.prompt.startswith("SAY:"):
    reply = run.prompt.removeprefix("SAY:")
else:
    reply = f"Reply {len(state['prompts'])}: I heard '{run.prompt}'. Anything else?"
emit.message(reply)
emit.usage(input_tokens=1000, output_tokens=100)

state_file.parent.mkdir(parents=True, exist_ok=True)
state_file.write_text(json.dumps(state))
emit.finished("done")
