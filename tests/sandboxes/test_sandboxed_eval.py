"""`proctor eval` with variants on bwrap and docker: an echo agent's work is graded as on the
local sandbox, and an agent that writes to /etc or calls the host's loopback is refused, with
the refusal in its transcript and nothing written on the host."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import proctor_env
from e2e.running import AGENTS, Backend, write_eval

ESCAPE_AGENT = Path(__file__).resolve().parent / "agents" / "escape_attempts.sh"


def eval_file(kind: str, port: int) -> str:
    return f"""
    from proctor import case, command, files, profile, suite, variant

    echo = profile("echo", dir={str(AGENTS)!r}, run='bash "$PROCTOR_PROFILE_DIR/echo_agent.sh"')
    escape = profile("escape", dir={str(ESCAPE_AGENT.parent)!r}, run='bash "$PROCTOR_PROFILE_DIR/escape_attempts.sh"',
                     env={{"HOST_PORT": "{port}"}})

    sandboxed = suite(
        "sandboxed",
        prompt="Fix the total",
        source=files({{"total.ts": "export const total = 5;\\n"}}),
        cases=[case("total", validate=command("grep -q 'total = 6' total.ts && test ! -e /etc/proctor-test"))],
        variants=[
            variant("command", name="echo", profile=echo, sandbox={kind!r}),
            variant("command", name="escape", profile=escape, sandbox={kind!r}),
        ],
    )
    """


def trial_of_variant(backend: Backend, batch: int, variant: str) -> int:
    return backend.scalar(
        "SELECT t.id FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
        "JOIN evals_app_variant v ON r.variant_id = v.id WHERE r.batch_id = ? AND v.name = ?",
        batch,
        variant,
    )


def test_a_sandboxed_eval_grades_the_agent_and_refuses_its_escapes(
    confined_kind, tmp_path, loopback_server
) -> None:
    backend = Backend("sqlite", proctor_env(tmp_path / "proctor-home"))
    project = tmp_path / "project"
    write_eval(project, "sandboxed.eval.py", eval_file(confined_kind, loopback_server.port))

    report = backend.eval_json(project)

    trials = {run["variant"]: run["trials"][0] for run in report["runs"]}
    assert trials["echo"]["status"] == "passed", json.dumps(trials["echo"], indent=2)
    escape = trials["escape"]
    assert escape["status"] == "failed"  # it never fixed the total
    assert not Path("/etc/proctor-test").exists()
    assert loopback_server.accepted == 0

    events = backend.events(trial_of_variant(backend, report["batch"], "escape"))
    commands = {
        data["command"]: data
        for kind, data in events
        if kind == "Command" and data.get("origin") != "trace"
    }
    write = commands["echo x > /etc/proctor-test"]
    assert write["exit_code"] != 0
    assert "Read-only file system" in write["output"]
    call = commands[f"call 127.0.0.1:{loopback_server.port}"]
    assert call["exit_code"] != 0
    assert "hello from the host" not in call["output"]
