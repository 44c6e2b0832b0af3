"""The side-by-side browser test's eval: one case run once by each of two variants of a
scripted agent (no model, no key) that read the task alike and then part: `careful` writes the
right greeting, `hasty` a wrong one and a note beside it."""

from pathlib import Path

from proctor import Verdict, case, profile, suite, variant

AGENTS = Path(__file__).parent / "agents"


def greeting_is_written(ctx) -> Verdict:
    return Verdict(bool(ctx.read_text("greeting.txt").strip()), "greeting.txt is not empty")


def greeting_is_for_ada(ctx) -> Verdict:
    text = ctx.read_text("greeting.txt").strip()
    return Verdict(text == "Hello, Ada!", f"greeting.txt says {text!r}")


def greeter(mode: str):
    return variant(
        "command",
        name=mode,
        model=f"scripted/{mode}",
        profile=profile(
            mode, dir=str(AGENTS), run=f'bash "$PROCTOR_PROFILE_DIR/greeter.sh" {mode}'
        ),
    )


pair = suite(
    "greeting-pair",
    name="Greeting, two ways",
    prompt="Write a greeting for Ada into greeting.txt.",
    cases=[
        case(
            "greet-ada",
            validate=[greeting_is_written, greeting_is_for_ada],
        )
    ],
    variants=[greeter("careful"), greeter("hasty")],
    trials=1,
)
