"""An agent printing the lines that used to crash the recorder (issue 11's fuzzed protocol lines
and 10 MB fields), through the real `proctor eval`, on SQLite and PostgreSQL: the trial ends
by its checks, nothing is printed as a traceback, and each bad line is a recorded protocol
error with its reason or an event made safe to store."""

from __future__ import annotations

import json

from e2e.running import Backend, only_run, trial_folder, write_eval

NASTY_AGENT = r"""
import sys

out = sys.stdout.buffer
def line(text):
    out.write(text if isinstance(text, bytes) else text.encode())
    out.write(b"\n")

line('{"_tag":"Started","sessionId":"nasty-1"}')
line('{"_tag":"Command","command":"big","exitCode":99999999999999999999999999}')
line('{"_tag":"Usage","inputTokens":' + "9" * 5000 + ',"outputTokens":1}')
line('{"_tag":"Message","role":"assistant","text":"nul \\u0000 inside"}')
line(b'{"_tag":"Message","role":"assistant","text":"raw nul \x00 inside"}')
line('{"_tag":"Message","role":"assistant","text":"lone \\ud800 surrogate"}')
line(b'{"_tag":"Message","role":"assistant","text":"bad \xff\xfe bytes"}')
line('{"_tag":"Finished","reason":"early","at":1e300}')
line('{"_tag":"Message","role":"assistant","text":"late","at":' + "1" * 25 + '}')
line('{"_tag":"Command","command":"cat big","exitCode":0,"output":"' + "x" * 10_000_000 + '"}')
line('{"_tag":"Message","role":"","text":"who said this"}')
line('{"_tag":"ToolCall","name":"deep","input":' + "[" * 100_000 + "]" * 100_000 + '}')
line('{"_tag":"Message","role":"assistant","text":"All done."}')
line('{"_tag":"Finished","reason":"done"}')
out.flush()
"""

EVAL = """
from proctor import case, command, profile, suite, variant

s = suite("bytes", prompt="print everything",
          cases=[case("nasty-lines", validate=command("true"))],
          variants=[variant("command", profile=profile(
              "nasty", dir={dir!r}, run='python3 "$PROCTOR_PROFILE_DIR/nasty.py"'))])
"""


def test_an_agent_printing_nasty_lines_ends_by_its_checks_with_each_error_recorded(
    backend: Backend, tmp_path
) -> None:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "nasty.py").write_text(NASTY_AGENT)
    write_eval(tmp_path / "evals", "bytes.eval.py", EVAL.format(dir=str(agent_dir)))

    result = backend.eval(tmp_path / "evals", "--json", timeout=240)

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    (trial,) = only_run(report, "nasty-lines")["trials"]
    assert trial["status"] == "passed", trial
    assert (trial["answer"], trial["finish_reason"]) == ("All done.", "done")

    (trial_id,) = backend.trial_ids(report["batch"])
    events = [(kind, data) for kind, data in backend.events(trial_id) if kind != "Log"]
    errors = [data["error"] for kind, data in events if kind == "ProtocolError"]
    assert errors == [
        "Command: field 'exitCode' is outside the signed 64-bit integer range",
        "Usage: field 'inputTokens' is outside the signed 64-bit integer range",
        "Finished: field 'at' is out of range (epoch milliseconds up to the year 9999)",
        "Message: field 'at' is out of range (epoch milliseconds up to the year 9999)",
        "Message: field 'role' must be 'assistant' or 'user'",
        "ToolCall: the line nests JSON too deeply to read",
    ]
    messages = [data["text"] for kind, data in events if kind == "Message"]
    assert messages == [
        "nul \u2400 inside",
        "lone \ufffd surrogate",
        "bad \ufffd\ufffd bytes",
        "All done.",
    ]
    (big,) = [d for kind, d in events if kind == "Command" and d["origin"] == "agent"]
    assert len(big["output"].encode()) <= 64 * 1024
    assert big["output"].endswith(" bytes]") and "… [truncated: " in big["output"]
    assert big["notes"] == ["output: truncated to 65536 bytes"]

    folder = trial_folder(backend, report["batch"], trial_id)
    log = (folder / "output.log").read_bytes()
    assert b"raw nul \x00 inside" in log, "a line that is not an event stays in the raw log"
    assert "\u2400".encode() in (folder / "events.jsonl").read_bytes()


CHATTY_AGENT = r"""
import sys

for n in range(3_000):
    print('{"_tag":"Message","role":"assistant","text":"step %d"}' % n)
for n in range(20_000):
    print("plain logging line %06d " % n + "." * 80)
print('{"_tag":"Finished","reason":"done"}')
"""


def test_the_events_and_output_log_a_trial_keeps_are_capped_with_a_visible_mark(
    sqlite_backend: Backend, tmp_path
) -> None:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "nasty.py").write_text(CHATTY_AGENT)
    write_eval(tmp_path / "evals", "bytes.eval.py", EVAL.format(dir=str(agent_dir)))
    caps = {"PROCTOR_MAX_TRIAL_EVENTS": "1000", "PROCTOR_MAX_OUTPUT_LOG_BYTES": "1000000"}

    result = sqlite_backend.eval(tmp_path / "evals", "--json", extra_env=caps, timeout=240)

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (trial,) = only_run(report, "nasty-lines")["trials"]
    assert trial["status"] == "passed", trial
    (trial_id,) = sqlite_backend.trial_ids(report["batch"])
    events = sqlite_backend.events(trial_id)
    agent_events = [data for kind, data in events if kind == "Message"]
    assert len(agent_events) <= 1000
    assert agent_events[0]["text"] == "step 0"
    notes = [data["text"] for kind, data in events if kind == "Log" and "dropped" in data["text"]]
    assert len(notes) == 1 and notes[0].endswith(
        "more events were dropped: a trial keeps at most 1000 (PROCTOR_MAX_TRIAL_EVENTS)."
    )
    log = (trial_folder(sqlite_backend, report["batch"], trial_id) / "output.log").read_text()
    assert 1_000_000 < len(log.encode()) < 1_001_000
    assert (
        "… [truncated: output.log keeps 1000000 bytes (PROCTOR_MAX_OUTPUT_LOG_BYTES); "
        "the rest is counted, not kept]\n" in log
    )
    assert (
        log.rstrip("\n")
        .splitlines()[-1]
        .endswith("bytes] not kept in output.log, capped at 1000000 bytes")
    )
