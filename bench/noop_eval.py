"""The no-op eval that bench/storage.py and bench/memory.py run: N cases written out one per
line in a single eval file (as a user's suite file grows), one no-op variant, one trial each.

Each trial's agent prints two protocol events and writes nothing; the check is `true`. Writing
the cases out literally (not in a loop) makes the file grow with N, the shape that exposed
storage quadratic in the number of cases per file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

AGENT = """echo '{"_tag":"Started","sessionId":"noop","model":"none"}'; echo '{"_tag":"Finished","reason":"done"}'"""


def write_noop_eval(folder: Path, cases: int) -> Path:
    lines = ",\n".join(
        f'        case("noop-{n:05d}", validate=command("true"))' for n in range(cases)
    )
    path = folder / "noop.eval.py"
    path.write_text(
        "from proctor import case, command, profile, suite, variant\n\n"
        "noop = suite(\n"
        '    "storage-bench",\n'
        '    prompt="do nothing",\n'
        f"    cases=[\n{lines},\n    ],\n"
        f'    variants=[variant("command", name="noop", profile=profile("noop", run={AGENT!r}))],\n'
        ")\n"
    )
    return path


def proctor_env(folder: Path) -> dict[str, str]:
    """The environment of an embedded-mode `proctor eval` homed in ``folder``."""
    env = dict(os.environ)
    env["PROCTOR_HOME"] = str(folder / ".proctor")
    for name in ("DATABASE_URL", "REDIS_URL", "PROCTOR_SERVER"):
        env.pop(name, None)
    return env


def proctor_command(eval_file: Path, jobs: int = 2) -> list[str]:
    proctor = Path(sys.executable).parent / "proctor"
    return [str(proctor), "eval", str(eval_file), "--trials", "1", "-j", str(jobs), "--json"]
