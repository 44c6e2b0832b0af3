"""Proctor's cost per trial, against the floor: the same two processes from a bare thread pool.

Each trial of the no-op workload is a fresh folder, an agent process that writes a file and
prints two protocol lines, and a command check (``true``). The floor runs those same two
processes per trial from a plain ``ThreadPoolExecutor`` with as many threads as Proctor's -j, in
this same process and run, so the ratio is what Proctor adds: sandboxes, recording, the
database, artifacts, redaction, live publishing, leases.

The marginal cost is (time of the large batch - time of the small one) / (the difference in
trials): start-up and warm-up fall out. Each figure is the median of ``--repeats`` runs; within
each repeat the floor and Proctor run one after the other, and the last line also gives the
median of the repeats' own ratios, after a line listing each repeat's (their spread). CPU per
trial counts this process and its children (user + system). Start-up is `proctor eval --help`
and a whole one-trial `proctor eval` in a fresh process (an upper bound of the time to the
first trial). CPU is also shown split: what of it the children (agents, checks, shells) used.

Proctor's home (its database and artifacts) is where `proctor eval` keeps it by default: a
``.proctor`` folder in the project the command runs in. The bench makes its project under
``--project-root`` (default ``~/.cache/proctor-bench``, deleted after); the trial folders,
Proctor's and the floor's alike, are made in the temp folder. Where making a file is slow after
many deletions nearby (ext4 without a journal: docs/hot-path.md, "Files made per trial"), the
disk weighs on the figures as much as Proctor does: ``TMPDIR`` and ``--project-root``
on a tmpfs (``/dev/shm``) take the disk out of both sides. Before and after the run, what making
a file costs in each of the two places is printed, to read the figures by.

A run deletes what it made when it ends. On ext4 without a journal every new file then steps over
each inode freed in that block group during the last 60 s, and during the last 6 minutes while
the block of the inode table holding it has changes not yet written back; any file made nearby
makes such a change, so a run's own files keep the last run's deletions in view for 6 minutes
(docs/hot-path.md, "Files made per trial"). Six runs back to back here: a file cost 141, 277,
494, 498, 642 and then 771 us. So a run writes its deletions back and notes when it made them,
and the next run waits until 370 s have passed since (``--no-settle`` measures at once). Only
the bench's own aftermath is waited out: the trial folders Proctor empties during the run, and
any other work on the machine, still count.

Prints figures, never asserts them; the ratio is last.

    .venv/bin/python bench/overhead.py [--small 20] [--large 200] [--repeats 3] [-j 2] [--no-settle]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

AGENT = (
    "echo done > result.txt; "
    """echo '{"_tag":"Started","sessionId":"noop","model":"none"}'; """
    """echo '{"_tag":"Finished","reason":"done"}'"""
)
CHECK = "true"
ROOT = Path(__file__).resolve().parent.parent

EVAL_FILE = f"""
from proctor import case, command, profile, suite, variant

noop = suite(
    "overhead",
    prompt="do nothing",
    cases=[case("noop", validate=command({CHECK!r}))],
    variants=[variant("command", name="noop", profile=profile("noop", run={AGENT!r}))],
)
"""


def cpu_s() -> tuple[float, float]:
    """CPU seconds so far of this process, and of its children that were waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def cgroup_mode() -> str:
    """How runs are contained here, which sets much of a trial's cost: a program created in its
    cgroup (clone3) costs nothing more, while moving one in waits for the kernel's RCU unless
    the cgroup2 hierarchy is mounted with ``favordynmods`` (docs/hot-path.md)."""
    from runner.sandboxes.containment import containment, uses_cgroups

    if not uses_cgroups():
        return "runs contained by their process group"
    if containment().starts_inside:
        return "a cgroup per run, each program created in it (clone3)"
    options = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if fields[2] == "cgroup2":
                options = fields[3]
    favoured = "favordynmods" in options.split(",")
    return (
        f"a cgroup per run, each program moved in by a shell (cgroup2 "
        f"{'with' if favoured else 'without'} favordynmods)"
    )


@functools.cache
def floor_root() -> Path:
    """The floor's folders, under the temp folder like Proctor's; deleted after the run, untimed.
    Made when the floor first runs, not on import: stages.py and trial_profile.py import this
    module for its set-up and never run the floor."""
    return Path(tempfile.mkdtemp(prefix="proctor-bench-floor-"))


def floor(trials: int, jobs: int) -> None:
    """The same processes per trial, from a bare thread pool: a fresh folder, the agent, the check."""
    root = floor_root()

    def one(_: int) -> None:
        folder = tempfile.mkdtemp(prefix="floor-", dir=root)
        subprocess.run(
            ["bash", "-c", AGENT], cwd=folder, stdin=subprocess.DEVNULL, capture_output=True
        )
        subprocess.run(
            ["bash", "-c", CHECK], cwd=folder, stdin=subprocess.DEVNULL, capture_output=True
        )

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, range(trials)))


def set_up_embedded(folder: Path) -> None:
    """Make this process a `proctor eval` of the no-op eval file written into ``folder``: its
    home there, on SQLite, with no broker; Django set up and the database made."""
    (folder / "noop.eval.py").write_text(EVAL_FILE)
    os.environ["PROCTOR_HOME"] = str(folder / ".proctor")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "proctor.site.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from runner.jobs.database import ensure_database

    ensure_database()


def proctor(folder: Path) -> Callable[[int, int], None]:
    from django.core.management import call_command

    def run(trials: int, jobs: int) -> None:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            call_command(
                "eval",
                str(folder / "noop.eval.py"),
                "--trials",
                str(trials),
                "-j",
                str(jobs),
                "--json",
            )

    return run


def timed(work: Callable[[int, int], None], trials: int, jobs: int) -> tuple[float, float, float]:
    """Wall seconds, this process's CPU seconds and its children's, of one call."""
    (own, children), started = cpu_s(), time.perf_counter()
    work(trials, jobs)
    own_after, children_after = cpu_s()
    return time.perf_counter() - started, own_after - own, children_after - children


def marginal_once(
    work: Callable[[int, int], None], small: int, large: int, jobs: int
) -> tuple[float, float, float]:
    """Marginal wall ms, CPU ms and children's CPU ms per trial, from one run of ``small`` and
    one of ``large``."""
    wall_small, own_small, children_small = timed(work, small, jobs)
    wall_large, own_large, children_large = timed(work, large, jobs)
    per_trial = 1000 / (large - small)
    return (
        (wall_large - wall_small) * per_trial,
        (own_large + children_large - own_small - children_small) * per_trial,
        (children_large - children_small) * per_trial,
    )


def paired(
    works: dict[str, Callable[[int, int], None]], small: int, large: int, jobs: int, repeats: int
) -> dict[str, list[tuple[float, float, float]]]:
    """Each work's marginal figures, ``repeats`` times, the works taking turns within each
    repeat: a machine whose speed drifts over minutes (a shared host) then weighs on both sides
    of a ratio alike, where measuring one side's repeats after the other's did not."""
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in works}
    for _ in range(repeats):
        for name, work in works.items():
            samples[name].append(marginal_once(work, small, large, jobs))
    return samples


def medians(samples: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """The median of each figure (wall, CPU, children's CPU) over the samples."""
    wall, cpu, children = (statistics.median(figure) for figure in zip(*samples, strict=True))
    return wall, cpu, children


# The folders file_cost_us made, deleted with the rest by clean_up: deleted at once, the probe
# before the run would leave a hundred freed inodes in each place for the run to step over.
PROBE_FOLDERS: list[Path] = []


def file_cost_us(parent: Path, files: int = 100) -> float:
    """Median microseconds to make an empty file in a new folder under ``parent``: on an ext4
    disk without a journal it moves with how many files were deleted nearby in the last
    minutes (docs/hot-path.md, "Files made per trial"), from tens of microseconds to more than
    a millisecond, for the floor (two files a trial) and Proctor (seven) alike."""
    folder = Path(tempfile.mkdtemp(prefix="proctor-bench-files-", dir=parent))
    PROBE_FOLDERS.append(folder)
    costs = []
    for index in range(files):
        started = time.perf_counter()
        os.close(os.open(folder / str(index), os.O_CREAT | os.O_WRONLY, 0o644))
        costs.append(time.perf_counter() - started)
    return statistics.median(costs) * 1e6


# How long ext4 may step over a freed inode: a minute, plus five while its inode table block has
# changes not written back (the kernel's RECENTCY_MIN and RECENTCY_DIRTY), which a file made in
# that block makes; and a margin. Measured in docs/hot-path.md, "Files made per trial".
SETTLE_S = 370
# In --project-root: its modification time is when the last run finished deleting.
CLEANED_STAMP = ".cleaned"


def settle(project_root: Path) -> float:
    """Wait until the last run's deletions are SETTLE_S old; returns the seconds waited."""
    try:
        cleaned = (project_root / CLEANED_STAMP).stat().st_mtime
    except FileNotFoundError:
        return 0.0
    wait = cleaned + SETTLE_S - time.time()
    if wait <= 0:
        return 0.0
    time.sleep(wait)  # clean_up wrote the deletions back before it set the stamp
    return wait


def clean_up(folder: Path, project_root: Path) -> None:
    """Delete this run's project, floor and probe folders, write the deletions back to the disk,
    and note when (see settle)."""
    for made in (floor_root(), *PROBE_FOLDERS, folder):
        shutil.rmtree(made, ignore_errors=True)
    os.sync()
    (project_root / CLEANED_STAMP).touch()


def start_up(folder: Path, repeats: int) -> tuple[float, float]:
    """Median seconds of `proctor eval --help` and of a whole one-trial `proctor eval`."""
    env = {**os.environ, "PROCTOR_HOME": str(folder / ".proctor-start")}
    # Python's default: the first start writes the compiled modules that later starts read.
    # Without it (PYTHONDONTWRITEBYTECODE=1, as some CI images set) every start compiles the
    # project's modules again, a fixed cost of the environment, not of Proctor.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proctor_cli = [sys.executable, "-m", "proctor.site.cli"]

    def seconds(argv: list[str]) -> float:
        started = time.perf_counter()
        subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, check=False)
        return time.perf_counter() - started

    seconds([*proctor_cli, "eval", str(folder / "noop.eval.py"), "--json"])  # makes the database
    help_s = statistics.median(seconds([*proctor_cli, "eval", "--help"]) for _ in range(repeats))
    one_s = statistics.median(
        seconds([*proctor_cli, "eval", str(folder / "noop.eval.py"), "--json"])
        for _ in range(repeats)
    )
    return help_s, one_s


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--small", type=int, default=20)
    parser.add_argument("--large", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument(
        "--project-root",
        type=Path,
        default=Path.home() / ".cache" / "proctor-bench",
        help="where the bench's project (its eval file and Proctor's home) is made",
    )
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="measure at once, even within 6 minutes of the last run's deletions",
    )
    args = parser.parse_args()

    args.project_root.mkdir(parents=True, exist_ok=True)
    waited = 0.0 if args.no_settle else settle(args.project_root)
    folder = Path(tempfile.mkdtemp(prefix="proctor-bench-", dir=args.project_root))
    set_up_embedded(folder)
    files_before = (file_cost_us(Path(tempfile.gettempdir())), file_cost_us(folder))
    ours = proctor(folder)
    ours(2, 1)  # warm up: imports, first queries, the write audit's watch

    print(
        f"no-op trials at -j {args.jobs}, {args.small} vs {args.large} trials, medians of "
        f"{args.repeats} (SQLite, local sandbox); load {os.getloadavg()[0]:.2f}; "
        f"{cgroup_mode()}; Proctor's home in {folder}, trial folders in {tempfile.gettempdir()}"
    )
    if waited:
        print(f"waited {waited:.0f} s for the last run's deleted files to age past {SETTLE_S} s")
    samples = paired(
        {"floor": floor, "proctor": ours}, args.small, args.large, args.jobs, args.repeats
    )
    floor_ms, floor_cpu, floor_kids = medians(samples["floor"])
    ours_ms, ours_cpu, ours_kids = medians(samples["proctor"])
    # Each repeat's own ratio (its floor and Proctor measured minutes apart at most).
    paired_ms = statistics.median(
        p[0] / f[0] for f, p in zip(samples["floor"], samples["proctor"], strict=True)
    )
    paired_cpu = statistics.median(
        p[1] / f[1] for f, p in zip(samples["floor"], samples["proctor"], strict=True)
    )
    spread = ", ".join(
        f"{p[0] / f[0]:.2f}x/{p[1] / f[1]:.2f}x"
        for f, p in zip(samples["floor"], samples["proctor"], strict=True)
    )
    help_s, one_s = start_up(folder, args.repeats)
    print(f"{'':8} {'marginal ms/trial':>18} {'CPU ms/trial':>13} {'of it children':>15}")
    print(f"{'floor':8} {floor_ms:>18.1f} {floor_cpu:>13.1f} {floor_kids:>15.1f}")
    print(f"{'proctor':8} {ours_ms:>18.1f} {ours_cpu:>13.1f} {ours_kids:>15.1f}")
    print(f"start-up: `proctor eval --help` {help_s:.2f} s, a one-trial eval {one_s:.2f} s")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"a file made costs {files_before[0]:.0f} us before the run and "
        f"{file_cost_us(Path(tempfile.gettempdir())):.0f} us after in the temp folder, "
        f"{files_before[1]:.0f} us and {file_cost_us(folder):.0f} us in the project "
        "(Proctor's home)"
    )
    print(f"each repeat's ratios (marginal/CPU): {spread}")
    print(
        f"ratio (proctor / floor): marginal {ours_ms / floor_ms:.2f}x, "
        f"CPU {ours_cpu / floor_cpu:.2f}x (medians of the repeats' own ratios: marginal "
        f"{paired_ms:.2f}x, CPU {paired_cpu:.2f}x)"
    )
    clean_up(folder, args.project_root)


if __name__ == "__main__":
    main()
