"""What an agent changed, as a validator and the diff artifact see it: a turn's file changes
include what its shell commands wrote (the agent reported nothing), and the workspace diff
leaves out generated files, by default and as the suite adds."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.running import Backend, trial_folder, write_eval

# Writes through plain shell commands and reports no FileChange; a second turn appends.
AGENT = """#!/usr/bin/env bash
if [ -e hello.txt ]; then echo bye >> hello.txt; else echo hi > hello.txt; fi
mkdir -p __pycache__ build
printf 'pyc\\0' > __pycache__/mod.cpython-311.pyc
echo built > build/out.js
echo '{"_tag":"Message","role":"assistant","text":"wrote hello.txt"}'
"""


def test_a_turns_file_changes_include_its_shell_writes_and_the_diff_skips_generated_files(
    sqlite_backend: Backend, tmp_path: Path
):
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "shell_writer.sh").write_text(AGENT)
    project = tmp_path / "project"
    write_eval(
        project,
        "changes.eval.py",
        f"""
    import json

    from proctor import case, files, profile, suite, turns, variant

    def turn_changes(ctx):
        changes = [[p.rsplit("/", 1)[-1] for p in t.file_changes] for t in ctx.turns()]
        return {{"passed": changes == [["hello.txt"], ["hello.txt"]], "message": json.dumps(changes)}}

    writer = profile("writer", dir={str(agent_dir)!r}, run="bash shell_writer.sh",
                     capabilities=["conversation-resume"])
    s = suite(
        "changes", prompt="Write hello.txt", source=files({{"README.md": "# demo\\n"}}),
        diff_ignore=["build/"],
        cases=[case("shell-writes", user=turns("Once more."), validate=turn_changes)],
        variants=[variant("command", name="writer", profile=writer)],
    )
    """,
    )

    report = sqlite_backend.eval_json(project)

    (trial,) = report["runs"][0]["trials"]
    assert trial["status"] == "passed", json.dumps(trial, indent=2)
    (trial_id,) = sqlite_backend.trial_ids(report["batch"], "shell-writes")
    folder = trial_folder(sqlite_backend, report["batch"], trial_id)
    diff = (folder / "workspace.diff").read_text()
    assert diff.startswith("diff --git a/hello.txt b/hello.txt\nnew file mode 100644\n")
    assert "+hi\n+bye\n" in diff
    assert "pycache" not in diff and "build/" not in diff
    turns = json.loads((folder / "conversation.json").read_text())["turns"]
    assert [t["file_changes"] for t in turns] == [
        [turns[0]["file_changes"][0]],
        [turns[0]["file_changes"][0]],
    ]
    assert turns[0]["file_changes"][0].endswith("/hello.txt")
