"""Case versions through the real `proctor eval`: a changed definition makes the next version
and leaves the earlier ones, and the trials that ran under them, exactly as they were."""

from __future__ import annotations

from pathlib import Path

from e2e.running import Backend, agent_profile, write_eval

VERSIONED_SUITE = """
from proctor import case, profile, suite, variant


def says_fixed(ctx):
    return {validator_body}


s = suite(
    "versions",
    prompt="Fix the total",
    cases=[case("fix-total", name={name!r}, tags={tags!r}, max_turns={max_turns}, timeout_ms={timeout_ms}, validate=says_fixed)],
    variants=[variant("command", profile={profile})],
)
"""

BASE = {
    "validator_body": '"Fixed" in ctx.answer()',
    "name": "Fix the total",
    "tags": ["arithmetic"],
    "max_turns": 8,
    "timeout_ms": 60_000,
    "profile": agent_profile("echo_agent.sh", name="echo"),
}


class VersionedProject:
    def __init__(self, backend: Backend, folder: Path) -> None:
        self.backend = backend
        self.folder = folder
        self.fields = dict(BASE)

    def run(self, prefix: str = "", **changes) -> int:
        """Write the eval file with ``changes`` and run it; returns the case version it ran."""
        self.fields.update(changes)
        write_eval(self.folder, "versions.eval.py", prefix + VERSIONED_SUITE.format(**self.fields))
        report = self.backend.eval_json(self.folder)
        (run,) = report["runs"]
        assert [t["status"] for t in run["trials"]] == ["passed"]
        return run["case_version"]

    def versions(self) -> list[tuple]:
        """(number, definition_hash, definition, sources) of every version of the case."""
        return self.backend.rows(
            "SELECT v.number, v.definition_hash, v.definition, v.sources FROM evals_app_caseversion v "
            "JOIN evals_app_case c ON v.case_id = c.id WHERE c.slug = 'fix-total' ORDER BY v.number"
        )

    def source_text(self, digest: str) -> str:
        ((text,),) = self.backend.rows(
            "SELECT text FROM evals_app_sourcefile WHERE digest = ?", digest
        )
        return text

    def trials_by_version(self) -> list[tuple]:
        """(version number, trial id, status) of every trial, oldest first."""
        return self.backend.rows(
            "SELECT v.number, t.id, t.status FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
            "JOIN evals_app_caseversion v ON r.case_version_id = v.id ORDER BY t.id"
        )


def test_a_changed_definition_makes_a_new_version_and_history_stays(backend: Backend, tmp_path):
    project = VersionedProject(backend, tmp_path)

    first = project.run()
    unchanged = project.run()
    assert (first, unchanged) == (1, 1)
    (v1,) = project.versions()
    v1_trials = project.trials_by_version()
    assert [number for number, _, _ in v1_trials] == [1, 1]

    edited = project.run(validator_body='"Fixed" in ctx.answer() and "total" in ctx.answer()')
    assert edited == 2
    versions = project.versions()
    assert [number for number, *_ in versions] == [1, 2]
    assert versions[0] == v1, "version 1 is never edited"
    # A version's row names each captured file by digest; the text is stored once, apart.
    v1_source, v2_source = (
        project.source_text(backend.json_value(row[3])["versions.eval.py"])
        for row in (v1, versions[1])
    )
    assert 'return "Fixed" in ctx.answer()\n' in v1_source, "version 1 keeps the source it ran"
    assert 'return "Fixed" in ctx.answer() and "total" in ctx.answer()\n' in v2_source
    assert project.trials_by_version()[:2] == v1_trials, "version 1's trials are untouched"
    assert [number for number, _, _ in project.trials_by_version()] == [1, 1, 2]

    assert project.run(timeout_ms=120_000) == 3
    assert project.run(max_turns=4) == 4
    # Name and tags label the case; neither is part of its definition.
    assert project.run(name="Fix the grand total", tags=["arithmetic", "regression"]) == 4
    assert [number for number, *_ in project.versions()] == [1, 2, 3, 4]
    limits = [
        backend.json_value(definition)["limits"] for _, _, definition, _ in project.versions()
    ]
    assert limits == [
        {"max_turns": 8, "timeout_ms": 60_000},
        {"max_turns": 8, "timeout_ms": 60_000},
        {"max_turns": 8, "timeout_ms": 120_000},
        {"max_turns": 4, "timeout_ms": 120_000},
    ]
    # The case row carries the latest labels.
    ((name, tags),) = backend.rows("SELECT name, tags FROM evals_app_case WHERE slug = 'fix-total'")
    assert (name, backend.json_value(tags)) == ("Fix the grand total", ["arithmetic", "regression"])
    # Every run pinned the version it ran.
    assert [number for number, _, _ in project.trials_by_version()] == [1, 1, 2, 3, 4, 4]
    # A lone tag is one tag, not its letters.
    assert project.run(tags="smoke") == 4
    ((tags,),) = backend.rows("SELECT tags FROM evals_app_case WHERE slug = 'fix-total'")
    assert backend.json_value(tags) == ["smoke"]


def test_moving_an_unchanged_validator_makes_no_new_version(sqlite_backend: Backend, tmp_path):
    project = VersionedProject(sqlite_backend, tmp_path)

    assert project.run() == 1
    assert project.run(prefix="import os  # a new import above everything\n") == 1
