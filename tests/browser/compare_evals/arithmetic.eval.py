"""The compare browser tests' evals: three small cases for one scripted agent (no model, no
key). The test runs them once, then breaks the agent's arithmetic and runs them again, so the
second batch has one planted regression and a changed agent digest."""

from pathlib import Path

from proctor import case, command, profile, suite, variant

AGENTS = Path(__file__).parent / "agents"

arithmetic = suite(
    "arithmetic",
    name="Arithmetic",
    prompt="{{task}}",
    cases=[
        case(
            "add-two",
            variables={"task": "Write 2 + 2 into answer.txt."},
            validate=command("grep -qx 4 answer.txt"),
        ),
        case(
            "say-hello",
            variables={"task": "Write hello into answer.txt."},
            validate=command("grep -qx hello answer.txt"),
        ),
        case(
            "count-to-three",
            variables={"task": "Write 3 into answer.txt."},
            validate=command("grep -qx 3 answer.txt"),
        ),
    ],
    variants=[
        variant(
            "command",
            name="solver",
            model="scripted/solver",
            profile=profile(
                "solver", dir=str(AGENTS / "solver"), run='bash "$PROCTOR_PROFILE_DIR/solver.sh"'
            ),
        )
    ],
    trials=3,
)
