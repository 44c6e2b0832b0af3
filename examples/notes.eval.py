"""The smallest possible runner, a bash script that only echoes protocol lines, and the way most
eval files find their own scripts: from ``Path(__file__)``.

Paths into the project are recorded relative to it and travel with the eval's bundle, so the
same absolute paths work on a rerun from the dashboard, on another worker, or after the folder
moved.
"""

from pathlib import Path

from proctor import case, command, profile, suite, variant

HERE = Path(__file__).resolve().parent

echo = variant(
    "command",
    name="bash-echo",
    profile=profile("echo", run=f"bash {HERE / 'agents' / 'echo.sh'}"),
)

notes = suite(
    "notes",
    name="Notes (bash runner)",
    prompt="Write down: {{todo}}",
    cases=[
        case(
            "write-notes",
            variables={"todo": "buy milk"},
            tags=["smoke"],
            validate=command(f"bash {HERE / 'checks' / 'has_note.sh'} 'buy milk'"),
        ),
    ],
    variants=[echo],
)
