"""A trial's events are written many rows per statement (runner.jobs.event_rows.insert_events;
a COPY on PostgreSQL): through the real `proctor eval` on both databases, every event of a
stream longer than one statement, and not a multiple of it, is stored once, in order, with its
data (tabs, newlines and backslashes too, which COPY's text format escapes), and events.jsonl
holds the same lines."""

from __future__ import annotations

import json

from e2e.running import Backend, only_run, trial_folder, write_eval

EVENTS = 2_345  # two full statements of 1,000 rows and a part of one, in one flush or more

AGENT = f"""
import json, sys
for i in range({EVENTS}):
    kind = i % 3
    if kind == 0:
        line = {{"_tag": "Message", "role": "assistant", "text": f"step {{i}}"}}
    elif kind == 1:
        line = {{"_tag": "Command", "command": f"echo {{i}}", "exitCode": i % 7, "output": "é\\t\\n\\\\r\\r"}}
    else:
        line = {{"_tag": "ToolCall", "callId": f"c{{i}}", "name": "read", "input": {{"n": i}},
                "status": "completed"}}
    print(json.dumps(line))
print(json.dumps({{"_tag": "Finished", "reason": "done"}}))
"""

EVAL = """
from proctor import case, command, profile, suite, variant

s = suite("rows", prompt="print many events",
          cases=[case("many", validate=command("true"))],
          variants=[variant("command", profile=profile(
              "many", dir={dir!r}, run='python3 "$PROCTOR_PROFILE_DIR/agent.py"'))])
"""


def test_every_event_of_a_long_stream_is_stored_once_in_order(backend: Backend, tmp_path) -> None:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "agent.py").write_text(AGENT)
    write_eval(tmp_path / "evals", "rows.eval.py", EVAL.format(dir=str(agent_dir)))

    report = backend.eval_json(tmp_path / "evals", "--fail-under", "0")

    (trial,) = only_run(report, "many")["trials"]
    assert trial["status"] == "passed", trial
    (trial_id,) = backend.trial_ids(report["batch"])
    seqs = [
        seq
        for (seq,) in backend.rows(
            "SELECT seq FROM evals_app_event WHERE trial_id = ? ORDER BY id", trial_id
        )
    ]
    assert seqs == list(range(len(seqs)))  # stored in order, none twice, none missing
    events = [(kind, data) for kind, data in backend.events(trial_id) if kind != "Log"]
    agent_events = [
        (kind, data)
        for kind, data in events
        if kind in ("Message", "ToolCall") or (kind == "Command" and data["origin"] == "agent")
    ]
    assert len(agent_events) == EVENTS
    assert [data["text"] for kind, data in agent_events if kind == "Message"] == [
        f"step {i}" for i in range(0, EVENTS, 3)
    ]
    commands = [data for kind, data in agent_events if kind == "Command"]
    assert [c["exit_code"] for c in commands] == [i % 7 for i in range(1, EVENTS, 3)]
    assert all(c["output"] == "é\t\n\\r\r" for c in commands)
    calls = [data for kind, data in agent_events if kind == "ToolCall"]
    assert [json.loads(c["input"]) for c in calls] == [{"n": i} for i in range(2, EVENTS, 3)]
    lines = (trial_folder(backend, report["batch"], trial_id) / "events.jsonl").read_text()
    assert len(lines.splitlines()) == len(seqs)
