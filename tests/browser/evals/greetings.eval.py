"""The browser tests' evals: two small cases, a steady agent and a sloppy one, both scripted
(no model, no key). Each agent takes two seconds, so a rerun is seen running, then done. The
polite case is also graded by weighted assertions, for the metrics page."""

from pathlib import Path

from proctor import Verdict, assertion, case, command, profile, suite, variant

AGENTS = Path(__file__).parent / "agents"


def agent(mode: str):
    return variant(
        "command",
        name=mode,
        model=f"scripted/{mode}",
        profile=profile(
            mode, dir=str(AGENTS), run=f'bash "$PROCTOR_PROFILE_DIR/greeter.sh" {mode}'
        ),
    )


def greeting_is_exact(ctx) -> bool:
    return ctx.read_text("greeting.txt").strip() == "Hello, Ada!"


def greets_ada(ctx) -> Verdict:
    text = ctx.read_text("greeting.txt").strip()
    return Verdict(text == "Hello, Ada!", f"greeting.txt says {text!r}")


greetings = suite(
    "greetings",
    name="Greetings",
    prompt="Write a greeting for {{name}} into greeting.txt.",
    cases=[
        case(
            "greet-ada",
            variables={"name": "Ada"},
            tags=["smoke"],
            validate=command("grep -qx 'Hello, Ada!' greeting.txt"),
        ),
        case(
            "greet-ada-politely",
            variables={"name": "Ada"},
            validate=[
                greets_ada,
                assertion("python", greeting_is_exact, weight=2, metric="exact-greeting"),
                assertion("icontains", "greeting", metric="mentions-greeting"),
                assertion("latency", 60000, weight=0, metric="latency"),
            ],
            threshold=0.6,
        ),
    ],
    variants=[agent("steady"), agent("sloppy")],
    trials=1,
)
