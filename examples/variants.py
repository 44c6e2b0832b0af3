"""The variants the example suites compare: two scripted agents and a bash one-liner runner.

They need no API key: each is a small process speaking the command harness protocol.
"""

from pathlib import Path

from proctor import profile, variant

AGENTS = Path(__file__).parent / "agents"

careful = variant(
    "command",
    name="careful",
    model="scripted/careful",
    profile=profile(
        "careful", dir=str(AGENTS / "careful"), run='python3 "$PROCTOR_PROFILE_DIR/agent.py"'
    ),
)
hasty = variant(
    "command",
    name="hasty",
    model="scripted/hasty",
    profile=profile(
        "hasty", dir=str(AGENTS / "hasty"), run='python3 "$PROCTOR_PROFILE_DIR/agent.py"'
    ),
)
