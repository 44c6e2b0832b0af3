"""The write audit: what an agent in the local sandbox wrote outside its workspace and home is
listed; bwrap and docker refuse such writes, so they list nothing."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from runner.sandboxes.audit import audit_writes


def test_it_lists_what_a_local_agent_wrote_outside_its_folders(open_sandbox) -> None:
    # /opt is one of the audited system places; the test cleans up after itself.
    stamp = uuid.uuid4().hex[:8]
    earlier = Path(f"/opt/proctor-audit-before-{stamp}.txt")
    outside = Path(f"/opt/proctor-audit-{stamp}.txt")
    earlier.write_text("before the agent")
    try:
        time.sleep(0.2)  # the marker must come after that write, on a coarse file clock
        box = open_sandbox("local")
        since = time.time()
        result = box.run(
            [
                "bash",
                "-c",
                f'echo x > {outside}; echo y > inside.txt; echo z > "$HOME/notes"; echo t > "$TMPDIR/t"',
            ]
        )
        assert result.exit_code == 0
        written = audit_writes(box, since)
        assert str(outside) in written
        assert str(earlier) not in written
        assert not any(path.startswith(str(box.host_workspace.parent)) for path in written)
    finally:
        earlier.unlink(missing_ok=True)
        outside.unlink(missing_ok=True)


def test_it_leaves_out_the_folders_it_is_told_to_ignore(open_sandbox, tmp_path) -> None:
    box = open_sandbox("local")
    since = time.time()
    box.run(
        [
            "bash",
            "-c",
            f"mkdir -p {tmp_path}/proctor-home; echo x > {tmp_path}/proctor-home/db; echo y > {tmp_path}/stray",
        ]
    )
    written = audit_writes(
        box, since, roots=[str(tmp_path)], ignore=[str(tmp_path / "proctor-home")]
    )
    assert written == [str(tmp_path / "stray")]


def test_a_confined_sandbox_has_nothing_to_list(open_sandbox, confined_kind, tmp_path) -> None:
    box = open_sandbox(confined_kind)
    since = time.time()
    result = box.run(["bash", "-c", f"echo x > {tmp_path}/outside.txt"])
    assert result.exit_code != 0
    assert not (tmp_path / "outside.txt").exists()
    assert audit_writes(box, since) == []
