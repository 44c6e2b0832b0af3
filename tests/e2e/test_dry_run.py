"""`proctor eval --dry-run` (issue 35): the eval files loaded and validated, the batch they
would make listed, and nothing run or recorded: no database, no bundle, no folder."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.running import Backend, write_eval

TWO_BY_TWO = """
from proctor import case, command, profile, suite, variant

agent = profile("noop", run="echo '{\\"_tag\\":\\"Finished\\",\\"reason\\":\\"done\\"}'")

s = suite(
    "greetings",
    name="Greetings",
    prompt="Say hello to {{who}}",
    trials=3,
    cases=[
        case("alice", name="Hello Alice", variables={"who": "Alice"},
             validate=command("touch ran-alice")),
        case("bob", variables={"who": "Bob"}, validate=command("touch ran-bob")),
    ],
    variants=[
        variant("command", model="small", profile=agent),
        variant("command", model="large", profile=agent),
    ],
)
"""


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_it_lists_the_batch_as_json_and_leaves_the_proctor_home_untouched(
    sqlite_backend: Backend, tmp_path
):
    project = tmp_path / "project"
    write_eval(project, "greetings.eval.py", TWO_BY_TWO)
    project_files = files_under(project)

    result = sqlite_backend.eval(project, "--dry-run", "--json")

    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert listing["dry_run"] is True
    assert (listing["runs"], listing["trials"]) == (4, 12)
    [suite] = listing["suites"]
    assert (suite["suite"], suite["name"], suite["file"]) == (
        "greetings",
        "Greetings",
        "greetings.eval.py",
    )
    assert suite["cases"] == [
        {"case": "alice", "name": "Hello Alice"},
        {"case": "bob", "name": "bob"},
    ]
    assert [(v["name"], v["harness"], v["model"]) for v in suite["variants"]] == [
        ("command:noop:small", "command", "small"),
        ("command:noop:large", "command", "large"),
    ]
    assert {(r["case"], r["variant"], r["trials"]) for r in suite["runs"]} == {
        (case, variant, 3)
        for case in ("alice", "bob")
        for variant in ("command:noop:small", "command:noop:large")
    }
    # Nothing ran and nothing was written: no Proctor home (database, artifacts, bundles,
    # caches), and no check ran in any workspace.
    assert not sqlite_backend.home.exists()
    new_files = [f for f in files_under(project) if f not in project_files]
    assert not any("ran-" in f for f in new_files), new_files


def test_it_prints_the_listing_for_a_person(sqlite_backend: Backend, tmp_path):
    project = tmp_path / "project"
    write_eval(project, "greetings.eval.py", TWO_BY_TWO)

    result = sqlite_backend.eval(project, "--dry-run", "--case", "alice")

    assert result.returncode == 0, result.stderr
    assert "suite greetings (greetings.eval.py): 1 case × 2 variants: 2 runs, 6 trials" in (
        result.stdout
    )
    assert "case alice (Hello Alice)" in result.stdout
    assert "variant command:noop:large (command, large, local)" in result.stdout
    assert "case bob" not in result.stdout
    assert "nothing ran and nothing was recorded" in result.stdout
    assert not sqlite_backend.home.exists()


def test_an_invalid_eval_exits_2_with_one_line_per_problem(sqlite_backend: Backend, tmp_path):
    project = tmp_path / "project"
    write_eval(
        project,
        "broken.eval.py",
        TWO_BY_TWO.replace('variables={"who": "Bob"}', "variables={}").replace(
            'model="large"', 'model="large", sandbox="nowhere"'
        ),
    )

    result = sqlite_backend.eval(project, "--dry-run", "--json")

    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, result.stderr
    assert any("case bob: prompt variable {{who}} has no value" in line for line in lines)
    assert any("unknown sandbox 'nowhere'" in line for line in lines)
    assert not sqlite_backend.home.exists()


def test_a_case_needing_a_model_endpoint_is_refused_without_one(sqlite_backend: Backend, tmp_path):
    project = tmp_path / "project"
    write_eval(
        project,
        "judged.eval.py",
        TWO_BY_TWO.replace("command, profile", "command, judge, profile").replace(
            'validate=command("touch ran-bob")', 'validate=judge("Bob was greeted")'
        ),
    )
    env = {"PROCTOR_LLM_BASE_URL": "", "PROCTOR_LLM_COMMAND": ""}

    result = sqlite_backend.eval(project, "--dry-run", extra_env=env)

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "judged.eval.py: suite greetings, case bob: uses a judge, which needs a model endpoint: "
        "set PROCTOR_LLM_BASE_URL (and PROCTOR_LLM_MODEL, PROCTOR_LLM_API_KEY) or PROCTOR_LLM_COMMAND"
    ]
    assert not sqlite_backend.home.exists()


def test_a_postgres_database_gets_no_table_and_no_row(backend: Backend, tmp_path):
    project = tmp_path / "project"
    write_eval(project, "greetings.eval.py", TWO_BY_TWO)

    result = backend.eval(project, "--dry-run")

    assert result.returncode == 0, result.stderr
    assert backend.tables() == []
    assert not backend.home.exists()
