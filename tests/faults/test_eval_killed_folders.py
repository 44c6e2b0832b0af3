"""`proctor eval -j 2` killed with SIGKILL mid-batch, then `proctor serve` takes its trials over
and finishes the batch: nothing either made ahead of time is left behind. The killed eval's
worker processes kept emptied trial folders for their next trials (``<name>.spare``); a process
killed outright cannot remove them, nor can a stopping serve, which ends with ``os._exit``: the
watchdog of each deletes every folder named after its owner, and the sweeps at start-up and
after a re-queue find any left by their owner's name."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from conftest import PROCTOR, free_port, proctor_env
from e2e.running import Backend, write_eval
from process_state import running

from faults.conftest import wait_for

SHORT_CASES = 6

# The case "long" works for ever on its first run (the one the killed eval started), and
# finishes at once when run again; every other case finishes at once.
AGENT = r"""
import os, sys, time
first_run = sys.argv[1]
if os.environ["SPHYNX_PROMPT"] == "long" and not os.path.exists(first_run):
    open(first_run, "w").write(str(os.getpid()))
    time.sleep(600)
print('{"_tag":"Finished","reason":"done"}', flush=True)
"""


def _eval(project: Path, first_run: Path) -> None:
    project.mkdir()
    (project / "agent.py").write_text(AGENT)
    names = ["long", *(f"short-{n}" for n in range(SHORT_CASES))]
    write_eval(
        project,
        "spares.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        s = suite("spares", prompt="{{{{task}}}}", trials=1,
                  cases=[case(name, variables={{"task": name}}, validate=command("true"))
                         for name in {names!r}],
                  variants=[variant("command", profile=profile("agent",
                      run="python3 {project / "agent.py"} {first_run}"))])
        """,
    )


def _leftovers(temp: Path) -> list[str]:
    return sorted(p.name for p in temp.iterdir() if p.name.startswith("proctor-"))


def _stale_cgroups() -> set[str]:
    from runner.sandboxes import containment

    base = containment.containment().base
    if base is None:
        return set()
    return {
        tree.name
        for tree in base.parent.glob("proctor-*")
        if not containment.identity_alive(tree.name.removeprefix("proctor-"))
    }


def test_serve_finishing_a_killed_evals_batch_leaves_no_folder_or_cgroup(tmp_path: Path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    backend = Backend(
        "sqlite",
        proctor_env(
            tmp_path / "proctor-home",
            PROCTOR_LEASE_S="2",
            DJANGO_SECRET_KEY="x" * 50,
            TMPDIR=str(temp),
        ),
    )
    project, first_run = tmp_path / "project", tmp_path / "first-run"
    _eval(project, first_run)
    stale_before = _stale_cgroups()
    evaluation = subprocess.Popen(
        [PROCTOR, "eval", "--json", "-j", "2"],
        cwd=project,
        env=backend.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    serve = None
    try:
        # One worker runs "long"; the other ran every short case and keeps its folder, emptied,
        # for a next trial that will not come.
        wait_for(
            lambda: (
                backend.exists()
                and "evals_app_trial" in backend.tables()
                and backend.scalar("SELECT COUNT(*) FROM evals_app_trial WHERE status = 'passed'")
                == SHORT_CASES
                and any(name.endswith(".spare") for name in _leftovers(temp))
            ),
            timeout=120,
            what="the short cases to pass and a worker to keep a spare folder",
        )
        workers = [
            int(pid)
            for pid in Path(f"/proc/{evaluation.pid}/task/{evaluation.pid}/children")
            .read_text()
            .split()
        ]
        evaluation.send_signal(signal.SIGKILL)
        evaluation.wait(timeout=60)
        wait_for(
            lambda: not any(running(pid) for pid in workers), timeout=60, what="its workers to die"
        )
        # Their watchdogs delete what they made: the spare and the running trial's folder.
        wait_for(
            lambda: _leftovers(temp) == [],
            timeout=60,
            what="the killed workers' folders to be deleted",
        )
        log = tmp_path / "serve.out"
        with open(log, "w") as out:
            serve = subprocess.Popen(
                [PROCTOR, "serve", f"127.0.0.1:{free_port()}"],
                cwd=project,
                env=backend.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_for(
            lambda: backend.scalar("SELECT status FROM evals_app_batch") == "finished",
            timeout=300,
            what="serve to finish the batch",
        )
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
        # serve ends with os._exit (no atexit): its watchdog deletes the folder it kept.
        wait_for(lambda: _leftovers(temp) == [], timeout=60, what="serve's folders to be deleted")
    finally:
        if evaluation.poll() is None:
            evaluation.kill()
        if serve is not None and serve.poll() is None:
            serve.kill()
            serve.wait()

    statuses = backend.rows("SELECT status FROM evals_app_trial")
    assert statuses == [("passed",)] * (SHORT_CASES + 1)
    assert _stale_cgroups() <= stale_before
