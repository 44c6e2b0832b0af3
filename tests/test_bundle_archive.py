"""Bundles as bytes: the same files always make the same archive and digest, unpacking gives
the files back (executable bits included), and a hostile or raced unpack leaves nothing
half-written."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tarfile
import threading
from pathlib import Path

import pytest

from evals_app.bundle_archive import KIND_TREE, folder_files, pack_tree, unpack, unpack_once

PROJECT = {
    "evals/sums.eval.py": "from proctor import suite\n",
    "evals/variants.py": "EXPECTED = 6\n",
    "data/prompt.txt": "Write the answer.\n",
    "agent/run.sh": "#!/usr/bin/env bash\necho hi\n",
}


def write_project(root: Path, files: dict[str, str] = PROJECT) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "agent" / "run.sh").chmod(0o755)
    return root


def hostile_tree(name: str) -> bytes:
    """A gzip'd tar holding one file stored under ``name``, as a tampered upload might."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = 5
        tar.addfile(info, io.BytesIO(b"owned"))
    return gzip.compress(raw.getvalue())


def test_the_same_files_make_the_same_digest_whatever_their_times_and_order(tmp_path):
    first = write_project(tmp_path / "first")
    second = write_project(tmp_path / "second")
    for path in second.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    files = folder_files(first)
    reversed_order = dict(reversed(list(folder_files(second).items())))

    packed = pack_tree(files)
    again = pack_tree(reversed_order)

    assert list(reversed_order) != list(files)
    assert again.digest == packed.digest
    assert again.data == packed.data, "the stored bytes are canonical too"
    assert packed.kind == KIND_TREE
    assert len(packed.digest) == 64


def test_a_changed_byte_changes_the_digest(tmp_path):
    root = write_project(tmp_path / "project")
    before = pack_tree(folder_files(root)).digest

    (root / "evals" / "variants.py").write_text("EXPECTED = 7\n")

    assert pack_tree(folder_files(root)).digest != before


def test_a_changed_executable_bit_changes_the_digest(tmp_path):
    root = write_project(tmp_path / "project")
    before = pack_tree(folder_files(root)).digest

    (root / "agent" / "run.sh").chmod(0o644)

    assert pack_tree(folder_files(root)).digest != before


def test_unpacking_gives_back_the_files_and_their_executable_bit(tmp_path):
    packed = pack_tree(folder_files(write_project(tmp_path / "project")))

    unpack(packed.kind, packed.data, tmp_path / "copy")

    copy = tmp_path / "copy"
    assert {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()} == set(PROJECT)
    assert all((copy / rel).read_text() == text for rel, text in PROJECT.items())
    assert os.access(copy / "agent" / "run.sh", os.X_OK)
    assert not os.access(copy / "evals" / "variants.py", os.X_OK)


@pytest.mark.parametrize("name", ["../escaped.txt", "a/../../escaped.txt"])
def test_unpacking_refuses_a_path_that_climbs_out_of_the_folder(tmp_path, name):
    dest = tmp_path / "inside" / "dest"

    with pytest.raises(tarfile.FilterError):
        unpack(KIND_TREE, hostile_tree(name), dest)

    assert not (tmp_path / "inside" / "escaped.txt").exists()
    assert not (tmp_path / "escaped.txt").exists()
    assert list(dest.rglob("*")) == []


def test_unpacking_never_writes_an_absolute_path_outside_the_folder(tmp_path):
    outside = tmp_path / "outside.txt"
    dest = tmp_path / "dest"

    with contextlib.suppress(tarfile.FilterError):  # refusing it is fine too
        unpack(KIND_TREE, hostile_tree(str(outside)), dest)

    assert not outside.exists()


def test_unpacking_refuses_an_absolute_path(tmp_path):
    dest = tmp_path / "dest"

    with pytest.raises(tarfile.FilterError):
        unpack(KIND_TREE, hostile_tree(str(tmp_path / "outside.txt")), dest)

    assert list(dest.rglob("*")) == []


def test_two_threads_unpacking_the_same_bundle_leave_one_complete_folder(tmp_path):
    packed = pack_tree(folder_files(write_project(tmp_path / "project")))
    dest = tmp_path / "cache" / "bundles" / packed.digest
    both_reading = threading.Barrier(2)
    results: list[Path] = []
    errors: list[BaseException] = []

    def read() -> bytes:
        both_reading.wait(timeout=10)  # neither has renamed yet: a real race
        return packed.data

    def unpack_it() -> None:
        try:
            results.append(unpack_once(packed.kind, read, dest, marker=".root"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=unpack_it) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    assert results == [dest, dest]
    files = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    assert files == set(PROJECT) | {".root"}
    assert [p.name for p in dest.parent.iterdir()] == [packed.digest], "no staging folder left"


def test_an_unpacked_bundle_is_not_read_again(tmp_path):
    packed = pack_tree(folder_files(write_project(tmp_path / "project")))
    dest = tmp_path / "cache" / packed.digest
    reads: list[int] = []

    def read() -> bytes:
        reads.append(1)
        return packed.data

    unpack_once(packed.kind, read, dest)
    unpack_once(packed.kind, read, dest)

    assert len(reads) == 1


def test_a_symlinked_folder_is_bundled_like_a_symlinked_file(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "answer.txt").write_text("answer = 6\n")
    evals = tmp_path / "evals"
    evals.mkdir()
    (evals / "fixtures").symlink_to(shared)
    (evals / "answer-link.txt").symlink_to(shared / "answer.txt")

    assert sorted(folder_files(evals)) == ["answer-link.txt", "fixtures/answer.txt"]
