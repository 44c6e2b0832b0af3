"""The write audit's inotify watch: once a process watches the audited folders, an audit lists
the same writes as the walk did (new files, changed files, files in new folders), without the
folders Proctor was told to ignore, and falls back to the walk for an agent that started before
the watch did."""

from __future__ import annotations

import threading
import time

from runner.sandboxes import write_watch
from runner.sandboxes.audit import audit_writes, watch_before_agent


def test_a_watched_audit_lists_new_changed_and_nested_writes(open_sandbox, tmp_path) -> None:
    roots = [str(tmp_path / "system")]
    (tmp_path / "system" / "conf").mkdir(parents=True)
    (tmp_path / "system" / "conf" / "old.cfg").write_text("before")
    (tmp_path / "system" / "untouched").write_text("before")
    (tmp_path / "system" / "proctor-home").mkdir()
    box = open_sandbox("local")
    watch_before_agent(box, roots=roots, ignore=[str(tmp_path / "system" / "proctor-home")])
    assert write_watch.existing_watch(roots) is not None
    time.sleep(0.1)  # the marker must come after the files above, on a coarse file clock
    since = time.time()
    system = tmp_path / "system"
    result = box.run(
        [
            "bash",
            "-c",
            f"echo x >> {system}/conf/old.cfg; echo y > {system}/new.txt; "
            f"mkdir -p {system}/made/deeper; echo z > {system}/made/deeper/file; "
            f"echo w > {system}/proctor-home/db; echo v > inside.txt",
        ]
    )
    assert result.exit_code == 0
    written = audit_writes(
        box, since, roots=roots, ignore=[str(system / "proctor-home")], until=time.time()
    )
    assert written == sorted(
        [
            str(system / "conf" / "old.cfg"),
            str(system / "new.txt"),
            str(system / "made/deeper/file"),
        ]
    )
    # A later agent that wrote nothing is told nothing: the earlier writes came before it.
    time.sleep(0.2)
    assert audit_writes(box, time.time(), roots=roots) == []


def test_an_agent_older_than_the_watch_is_audited_by_the_walk(open_sandbox, tmp_path) -> None:
    roots = [str(tmp_path)]
    box = open_sandbox("local")
    since = time.time()
    (tmp_path / "stray").write_text("written before the watch began")
    watch_before_agent(box, roots=roots)
    watch = write_watch.existing_watch(roots)
    assert watch is not None and watch.changed_since(since) is None
    assert audit_writes(box, since, roots=roots) == [str(tmp_path / "stray")]


def test_the_first_agent_does_not_wait_for_the_watch_and_is_audited_by_the_walk(
    open_sandbox, tmp_path, monkeypatch
) -> None:
    roots = [str(tmp_path)]
    walk_may_run = threading.Event()
    set_up = write_watch.WriteWatch.set_up

    def held_set_up(self: write_watch.WriteWatch) -> None:
        walk_may_run.wait(30)
        set_up(self)

    monkeypatch.setattr(write_watch.WriteWatch, "set_up", held_set_up)
    box = open_sandbox("local")
    watch_before_agent(box, roots=roots)  # returns while the set-up walk is held back
    since = time.time()
    (tmp_path / "stray").write_text("written by an agent that started first")
    watch = write_watch.existing_watch(roots)
    assert watch is not None and watch.changed_since(since) is None
    assert audit_writes(box, since, roots=roots) == [str(tmp_path / "stray")]

    walk_may_run.set()
    assert watch.wait_until_set_up(30)
    time.sleep(0.1)  # the next marker must come after the walk, on a coarse file clock
    later = time.time()
    (tmp_path / "later").write_text("written by an agent that started after the walk")
    assert watch.changed_since(later - 0.05) is not None
    assert audit_writes(box, later, roots=roots) == [str(tmp_path / "later")]
