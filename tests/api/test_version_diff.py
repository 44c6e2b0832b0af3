"""How a case's history describes what changed from one version to the next."""

from __future__ import annotations

import copy

from evals_app.version_diff import describe_changes, unified_source_diff

VALIDATOR = {
    "kind": "validator",
    "name": "has_health_route",
    "qualname": "has_health_route",
    "path": "evals/api.eval.py",
    "start": 10,
    "end": 14,
    "sha256": "aaa",
}
PYTEST = {"kind": "command", "name": "pytest -q", "command": "pytest -q", "timeout_ms": 600000}

DEFINITION = {
    "suite": "api",
    "case": "health-route",
    "prompt": "Add a /health route that returns 200",
    "system_prompt": None,
    "source": {"kind": "empty"},
    "prepare": None,
    "cache": None,
    "limits": {"max_turns": 8, "timeout_ms": 900000},
    "conversation": {"user": None, "expected_output": None, "plan_mode": False},
    "checks": [VALIDATOR],
}


def changed(**edits) -> dict:
    definition = copy.deepcopy(DEFINITION)
    definition.update(copy.deepcopy(edits))
    return definition


def test_it_calls_a_version_without_predecessor_the_first():
    assert describe_changes(None, DEFINITION) == ["first version"]


def test_it_reports_nothing_for_equal_definitions():
    assert describe_changes(DEFINITION, copy.deepcopy(DEFINITION)) == []


def test_it_names_each_change_in_reading_order():
    new = changed(
        prompt="Add a /healthz route that returns 200",
        limits={"max_turns": 8, "timeout_ms": 1800000},
        checks=[{**VALIDATOR, "sha256": "bbb"}, PYTEST],
    )

    assert describe_changes(DEFINITION, new) == [
        "prompt changed",
        "limits.timeout_ms: 900000 -> 1800000",
        "check has_health_route: source changed",
        "check added: pytest -q",
    ]


def test_it_reports_removed_and_reordered_checks():
    old = changed(checks=[VALIDATOR, PYTEST, {**PYTEST, "name": "ruff", "command": "ruff check"}])
    new = changed(checks=[PYTEST, VALIDATOR])

    assert describe_changes(old, new) == ["check removed: ruff", "checks reordered"]


def test_it_tells_a_moved_validator_from_an_edited_one():
    new = changed(checks=[{**VALIDATOR, "start": 20, "end": 24}])

    assert describe_changes(DEFINITION, new) == ["check has_health_route: now at lines 20-24"]


def test_it_reports_a_changed_command_and_its_timeout():
    old = changed(checks=[{**PYTEST, "name": "tests"}])
    new = changed(checks=[{**PYTEST, "name": "tests", "command": "pytest -x", "timeout_ms": 60000}])

    assert describe_changes(old, new) == [
        "check tests: command changed",
        "check tests.timeout_ms: 600000 -> 60000",
    ]


def test_it_describes_source_files_by_path():
    old = changed(source={"kind": "files", "files": {"app.py": "x = 1\n", "old.txt": "bye"}})
    new = changed(source={"kind": "files", "files": {"app.py": "x = 2\n", "new.txt": "hi"}})

    assert describe_changes(old, new) == [
        "source file added: new.txt",
        "source file removed: old.txt",
        "source file changed: app.py",
    ]


def test_it_describes_a_new_source_kind_and_a_moved_repo_ref():
    repo = {"kind": "repo", "url": "https://github.com/acme/api", "ref": "main"}

    assert describe_changes(DEFINITION, changed(source=repo)) == ["source: empty -> repo"]
    assert describe_changes(changed(source=repo), changed(source={**repo, "ref": "v2"})) == [
        'source.ref: "main" -> "v2"'
    ]


def test_it_describes_prepare_cache_system_prompt_and_conversation():
    prepare = {
        "qualname": "install",
        "path": "evals/api.eval.py",
        "start": 1,
        "end": 3,
        "sha256": "p",
    }
    new = changed(
        system_prompt="Be terse.",
        prepare=prepare,
        cache={"key": "npm-lock-v1", "path": "node_modules"},
        conversation={"user": None, "expected_output": None, "plan_mode": True},
    )

    assert describe_changes(DEFINITION, new) == [
        "system prompt added",
        "prepare added",
        "cache added",
        "conversation.plan_mode: false -> true",
    ]
    edited_prepare = {**new, "prepare": {**prepare, "sha256": "q"}}
    assert describe_changes(new, edited_prepare) == ["prepare: source changed"]


def test_it_names_keys_it_does_not_know_yet():
    new = changed(judges={"model": "small"})

    assert describe_changes(DEFINITION, new) == ["judges added"]


def test_it_diffs_captured_sources_like_git():
    old = {"evals/api.eval.py": "def check():\n    return True", "evals/gone.py": "x = 1\n"}
    new = {"evals/api.eval.py": "def check():\n    return False\n", "evals/new.py": "y = 2\n"}

    diff = unified_source_diff(old, new)

    assert "--- a/evals/api.eval.py\n+++ b/evals/api.eval.py\n" in diff
    assert "-    return True\n+    return False\n" in diff
    assert "--- a/evals/gone.py\n+++ /dev/null\n" in diff
    assert "--- /dev/null\n+++ b/evals/new.py\n@@ -0,0 +1 @@\n+y = 2\n" in diff


def test_it_returns_an_empty_diff_for_identical_sources():
    sources = {"evals/api.eval.py": "def check():\n    return True\n"}

    assert unified_source_diff(sources, dict(sources)) == ""
