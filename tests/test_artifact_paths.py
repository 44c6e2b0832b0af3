"""A trial's files stay in the trial's folder, whatever name they are given (a mock's name, a
consultation's turn): a path that climbs out or starts at the root is refused, and nothing is
written for it."""

from __future__ import annotations

import pytest

from runner.jobs.artifact_paths import write_text


@pytest.mark.parametrize(
    "name", ["outputs/plan.md", "mocks/billing.jsonl", "./conversation.json", "a/../b.txt"]
)
def test_a_name_inside_the_folder_is_written_there(tmp_path, name) -> None:
    folder = tmp_path / "trial"

    written = write_text(folder, name, "text")

    assert written.read_text() == "text"
    assert folder in written.parents


@pytest.mark.parametrize(
    "name", ["../escaped.txt", "mocks/../../escaped.txt", "/tmp/escaped.txt", "..", "."]
)
def test_a_name_that_leaves_the_folder_is_refused(tmp_path, name) -> None:
    folder = tmp_path / "trial"

    with pytest.raises(ValueError, match="leaves the trial's folder"):
        write_text(folder, name, "text")

    assert sorted(p.name for p in tmp_path.rglob("*")) == []
