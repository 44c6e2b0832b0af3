"""An eval file is loaded as its text says, whatever Python's bytecode cache holds: the cache
takes a file as unchanged when its size and its modification time in whole seconds are, so a
file rewritten within the same second at the same size (a script changing one digit) once ran,
and was recorded, as it was before. Most machines write that cache (PYTHONDONTWRITEBYTECODE is
not set), so these tests turn it on whatever the environment says."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from evals_app.loading import load_file

EVAL = """
from proctor import case, command, suite, variant

LIMIT = {limit}

limits = suite(
    "limits-{name}",
    prompt=f"count to {{LIMIT}}",
    cases=[case("counting-{name}", validate=command("true"))],
    variants=[variant("chat", model="m", base_url="http://127.0.0.1:9/v1")],
)
"""


@pytest.fixture(autouse=True)
def bytecode_written(monkeypatch):
    """Python writes and reads its bytecode cache, as on a machine with no such setting."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


def rewrite_keeping_size_and_time(path: Path, text: str) -> None:
    """Write ``text`` (as long as the file's old text) with the file's old modification time:
    what a rewrite within one tick of the file system's clock looks like."""
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_file_rewritten_at_the_same_size_and_time_loads_as_its_new_text(tmp_path: Path):
    module = tmp_path / "limits.eval.py"
    module.write_text(EVAL.format(limit=3, name="a"))
    (suite,) = load_file(module).suites
    assert suite.prompt == "count to 3"

    rewrite_keeping_size_and_time(module, EVAL.format(limit=4, name="a"))
    (suite,) = load_file(module).suites
    assert suite.prompt == "count to 4"


def test_loading_an_eval_file_leaves_no_bytecode_beside_it(tmp_path: Path):
    module = tmp_path / "limits.eval.py"
    module.write_text(EVAL.format(limit=3, name="b"))
    (suite,) = load_file(module).suites
    assert suite.prompt == "count to 3"
    assert not (tmp_path / "__pycache__").exists()
