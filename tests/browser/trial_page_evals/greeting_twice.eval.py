"""The trial page tests' eval: one case tried twice by the scripted steady agent (no model, no
key), graded by a validator with a line far wider than its panel."""

from pathlib import Path

from proctor import Verdict, case, profile, suite, variant

AGENTS = Path(__file__).parent.parent / "evals" / "agents"


def greeting_is_for_ada(ctx) -> Verdict:
    text = ctx.read_text("greeting.txt").strip()
    why = f"greeting.txt says {text!r}; a greeting for Ada names her, says hello and ends with an exclamation mark, as the case asks, and this is the end of a wide line"  # noqa: E501
    return Verdict(text == "Hello, Ada!", why)


greetings = suite(
    "greetings-twice",
    name="Greetings, twice",
    prompt="Write a greeting for Ada into greeting.txt.",
    cases=[case("greet-ada-twice", validate=greeting_is_for_ada)],
    variants=[
        variant(
            "command",
            name="steady",
            model="scripted/steady",
            profile=profile(
                "steady", dir=str(AGENTS), run='bash "$PROCTOR_PROFILE_DIR/greeter.sh" steady'
            ),
        )
    ],
    trials=2,
)
