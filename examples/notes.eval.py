"""The smallest possible runner: a bash script that only echoes protocol lines."""

from pathlib import Path

from proctor import case, command, profile, suite, variant

echo = variant(
    "command",
    name="bash-echo",
    profile=profile(
        "echo", dir=str(Path(__file__).parent / "agents"), run='bash "$PROCTOR_PROFILE_DIR/echo.sh"'
    ),
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
            validate=command("grep -q 'buy milk' NOTES.md"),
        ),
    ],
    variants=[echo],
)
