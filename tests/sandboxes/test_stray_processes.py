"""No process outlives its step, in every sandbox: the children an agent hides from its process
group (``setsid``, a double fork, a Python daemon, a child holding stdout) are all gone within
the step's end (awaited under a ceiling that only guards against hanging), after a normal
finish and after a timeout alike, and a child holding stdout does not stretch the step past the
agent's own length: the step returns, not timed out, while the child would sleep for ten minutes.

Each stray writes its pid to ``pid-<kind>`` and holds a lock on ``lock-<kind>`` for as long as
it lives: the lock tells in every sandbox (pids inside bwrap and docker are another namespace's),
/proc/<pid> tells on the host (local). A zombie there is dead: it stays in /proc until the
machine's init reaps it (here up to two seconds later), so it counts as gone."""

from __future__ import annotations

import fcntl
import subprocess
import time
from pathlib import Path

import pytest
from ceilings import HANG_CEILING_S, eventually, finishes
from process_state import running

# Each stray: a shell line that starts it in the background, out of the agent's way.
STRAYS = {
    "setsid": (
        "setsid bash -c 'echo $$ > pid-setsid; exec flock lock-setsid sleep 600' "
        ">/dev/null 2>&1 < /dev/null &"
    ),
    "double-fork": (
        "( ( setsid bash -c 'echo $$ > pid-double-fork; exec flock lock-double-fork sleep 600' "
        ">/dev/null 2>&1 < /dev/null & ) & )"
    ),
    "python-daemon": (
        "python3 -c '"
        "import fcntl, os, sys, time\n"
        "if os.fork(): sys.exit(0)\n"
        "os.setsid()\n"
        "if os.fork(): os._exit(0)\n"
        'lock = open("lock-python-daemon", "w"); fcntl.flock(lock, fcntl.LOCK_EX)\n'
        'open("pid-python-daemon", "w").write(str(os.getpid()))\n'
        "time.sleep(600)' >/dev/null 2>&1 < /dev/null"
    ),
    # Keeps the agent's stdout and stderr open, in a session of its own.
    "holding-stdout": (
        "setsid bash -c 'echo $$ > pid-holding-stdout; exec flock lock-holding-stdout sleep 600' &"
    ),
}
WAIT_FOR_ALL = (
    "while " + " || ".join(f"[ ! -s pid-{kind} ]" for kind in STRAYS) + "; do sleep 0.05; done"
)
START_ALL = "\n".join([*STRAYS.values(), WAIT_FOR_ALL])


def _held(lock: Path) -> bool:
    with open(lock, "rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def _alive_after(sandbox, within_s: float = HANG_CEILING_S) -> list[str]:
    """The strays still alive ``within_s`` after now (at once when none is): holding their
    lock, or (local) in /proc."""
    deadline = time.monotonic() + within_s
    while True:
        alive = []
        for kind in STRAYS:
            if _held(sandbox.host_workspace / f"lock-{kind}"):
                alive.append(f"{kind} (holds its lock)")
            elif sandbox.kind == "local":
                pid = (sandbox.host_workspace / f"pid-{kind}").read_text().strip()
                if running(int(pid)):
                    alive.append(f"{kind} (pid {pid} in /proc)")
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


def test_no_stray_outlives_a_normal_finish(sandbox) -> None:
    # The child holding stdout would hold the step until its timeout: it ends with the agent.
    result = sandbox.run(["bash", "-c", f"{START_ALL}\necho started"], timeout_s=HANG_CEILING_S)
    assert result.exit_code == 0 and not result.timed_out, result.output
    assert result.stdout.strip() == "started"
    assert _alive_after(sandbox) == []


def test_no_stray_outlives_a_timeout(sandbox) -> None:
    # A kill that missed the agent would leave the step waiting for its hour of sleep.
    result = finishes(
        lambda: sandbox.run(["bash", "-c", f"{START_ALL}\necho started; sleep 3600"], timeout_s=4),
        what="a step past its timeout",
    )
    assert result.timed_out, result.output
    assert "started" in result.stdout, "the strays were not all started before the timeout"
    assert _alive_after(sandbox) == []


@pytest.mark.parametrize(
    "line",
    [
        "echo hi; sleep 600 >/dev/null &",
        "echo hi; setsid sleep 600 &",
        "echo hi; setsid sleep 600 >/dev/null &",
    ],
)
def test_a_background_child_does_not_stretch_a_short_agent(sandbox, line) -> None:
    # Held by its child, the step would run into its timeout long before the child's ten minutes.
    result = sandbox.run(["bash", "-c", f"{line} sleep 0.5"], timeout_s=HANG_CEILING_S)
    assert result.exit_code == 0 and not result.timed_out and result.stdout == "hi\n"


def test_the_cgroups_of_a_dead_proctor_are_swept_at_start_up(tmp_path) -> None:
    from runner.sandboxes import containment

    if not containment.uses_cgroups():
        pytest.skip("runs are contained by their process group here: no cgroup to sweep")
    base = containment.containment().base
    assert base is not None
    # What a Proctor killed along with its watchdog leaves: a run cgroup with a process in it.
    left = base.parent / "proctor-99999999-1" / "run-1"
    left.mkdir(parents=True)
    pid_file = tmp_path / "pid"
    subprocess.Popen(
        ["sh", "-c", f'echo $$ > "$0/cgroup.procs"; echo $$ > {pid_file}; exec sleep 600', left],
        start_new_session=True,
    )
    while not pid_file.exists() or not pid_file.read_text().strip():
        time.sleep(0.01)
    pid = int(pid_file.read_text())
    assert running(pid)

    containment.sweep_stale_cgroups(base.parent)

    assert eventually(lambda: not running(pid))
    assert not left.parent.exists()


def test_a_stale_tree_another_process_sweeps_meanwhile_is_passed_over(monkeypatch) -> None:
    """Workers forked together sweep the same dead Proctor's trees at once: a tree that vanishes
    between the listing and the look inside must not stop this process from starting."""
    from runner.sandboxes import containment

    if not containment.uses_cgroups():
        pytest.skip("runs are contained by their process group here: no cgroup to sweep")
    base = containment.containment().base
    assert base is not None
    gone, kept = base.parent / "proctor-99999998-1", base.parent / "proctor-99999997-1"
    for tree in (gone, kept):
        (tree / "run-1").mkdir(parents=True)
    alive = containment.identity_alive

    def swept_by_another_process_while_asked(identity: str) -> bool:
        if identity == "99999998-1" and gone.exists():
            (gone / "run-1").rmdir()
            gone.rmdir()
        return alive(identity)

    monkeypatch.setattr(containment, "identity_alive", swept_by_another_process_while_asked)
    containment.sweep_stale_cgroups(base.parent)
    assert not gone.exists() and not kept.exists()


def _cgroup_of_run(line: str, cwd: Path) -> Path:
    """The cgroup a run of the shell ``line`` was in (read at its end)."""
    from runner.sandboxes import containment
    from runner.sandboxes.processes import run_process

    mount = containment._cgroup2_mount()
    assert mount is not None
    result = run_process(
        ["bash", "-c", f"{line}\ncat /proc/self/cgroup"], cwd=str(cwd), timeout_s=30
    )
    assert result.exit_code == 0, result.stderr
    (entry,) = [row for row in result.stdout.splitlines() if row.startswith("0::")]
    return mount / entry[3:].lstrip("/")


def test_a_cgroup_left_empty_serves_the_next_run_and_one_left_busy_is_ended(tmp_path) -> None:
    from runner.sandboxes import containment

    if not containment.uses_cgroups():
        pytest.skip("runs are contained by their process group here: no cgroup to reuse")
    first = _cgroup_of_run("true", tmp_path)
    assert first.name.startswith("run-")
    assert _cgroup_of_run("true", tmp_path) == first, "an empty cgroup is kept for the next run"
    # A run that leaves a process behind: its cgroup is ended (the stray killed) and removed.
    busy = _cgroup_of_run(
        "setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > stray", tmp_path
    )
    assert busy == first
    stray = int((tmp_path / "stray").read_text())
    # The stray is ended and its cgroup removed (off the run's path when the kernel is slow to
    # finish it): awaited, under a ceiling that only guards against a hang.
    assert eventually(lambda: not running(stray) and not busy.exists()), (
        "a cgroup that was not empty is removed, never used again"
    )
    assert _cgroup_of_run("true", tmp_path) != busy


def test_a_cgroup_the_kernel_empties_after_the_run_stopped_waiting_is_still_removed(
    tmp_path, monkeypatch
) -> None:
    # A busy machine can take seconds to finish a run's killed processes. The run does not
    # wait that long (here: not at all), but the cgroup must still go once they are gone, not
    # stay behind with nothing left to remove it, and no later run may be put in it.
    from runner.sandboxes import containment

    if not containment.uses_cgroups():
        pytest.skip("runs are contained by their process group here: no cgroup to remove")
    monkeypatch.setattr(containment, "EMPTY_WAIT_S", 0.0)
    # A hundred strays: the kernel cannot have killed them all by the removal right after the kill.
    strays = "for i in $(seq 100); do setsid sleep 600 > /dev/null 2>&1 < /dev/null & done"
    busy = _cgroup_of_run(strays, tmp_path)
    assert eventually(lambda: not busy.exists()), "a cgroup emptied late is removed all the same"
    assert _cgroup_of_run("true", tmp_path) != busy


def test_a_cgroup_a_run_made_inside_its_own_is_removed_with_it(tmp_path) -> None:
    # A run as root may make cgroups inside its own and move processes there; the kernel
    # refuses to remove a cgroup with one inside, so ending the run removes them first.
    from runner.sandboxes import containment

    if not containment.uses_cgroups():
        pytest.skip("runs are contained by their process group here: no cgroup to nest in")
    line = (
        f'own={containment._cgroup2_mount()}$(sed -n "s/^0:://p" /proc/self/cgroup)\n'
        'mkdir -p "$own/inner/deeper"\n'
        "setsid bash -c 'echo $$ > pid; exec sleep 600' > /dev/null 2>&1 < /dev/null &\n"
        "while [ ! -s pid ]; do sleep 0.01; done\n"
        'echo $(cat pid) > "$own/inner/deeper/cgroup.procs"'
    )
    outer = _cgroup_of_run(line, tmp_path)
    stray = int((tmp_path / "pid").read_text())
    assert eventually(lambda: not running(stray) and not outer.exists()), (
        "the run's cgroup and the ones made inside it are removed, their processes ended"
    )
