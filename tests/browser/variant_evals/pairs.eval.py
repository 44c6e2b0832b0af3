"""The variant browser test's evals: six small cases for two variants of one scripted agent
(no model, no key). solver answers all six; sloppy gets the three sums wrong, so on this batch
solver beats sloppy by 50 points, a difference that holds over six cases."""

from pathlib import Path

from proctor import case, command, profile, suite, variant

AGENT = str(Path(__file__).parent / "agents" / "solver")


def sum_case(slug: str, total: int):
    return case(
        slug,
        variables={"task": f"Write the sum = {total}."},
        validate=command(f"grep -qx {total} answer.txt"),
    )


def word_case(slug: str, word: str):
    return case(
        slug,
        variables={"task": f"Write the word {word}."},
        validate=command(f"grep -qx {word} answer.txt"),
    )


pairs = suite(
    "pairs",
    name="Pairs",
    prompt="{{task}}",
    cases=[
        sum_case("sum-four", 4),
        sum_case("sum-seven", 7),
        sum_case("sum-nine", 9),
        word_case("word-hello", "hello"),
        word_case("word-bye", "bye"),
        word_case("word-yes", "yes"),
    ],
    variants=[
        variant(
            "command",
            name="solver",
            model="scripted/solver",
            profile=profile("solver", dir=AGENT, run='bash "$PROCTOR_PROFILE_DIR/solver.sh"'),
        ),
        variant(
            "command",
            name="sloppy",
            model="scripted/sloppy",
            profile=profile(
                "sloppy", dir=AGENT, run='bash "$PROCTOR_PROFILE_DIR/solver.sh" sloppy'
            ),
        ),
    ],
    trials=2,
)
