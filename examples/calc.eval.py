"""Fixing a small calculator module: every kind of check on a files() workspace."""

from variants import careful, hasty

from proctor import Verdict, case, command, files, suite

CALC = """\
def add(a, b):
    return a - b


def divide(a, b):
    return a * b
"""


def add_is_fixed(ctx) -> bool:
    """A validator may return a plain bool."""
    return "return a + b" in ctx.read_text("calc.py")


def divide_works(ctx) -> Verdict:
    """Or a Verdict with a message; ctx.exec runs a command in the workspace."""
    result = ctx.exec("python3 -c 'import calc; print(calc.divide(7, 2))'")
    return Verdict(
        result.output.strip() == "3.5", f"divide(7, 2) printed {result.output.strip()!r}"
    )


def divide_by_zero_is_an_error(ctx) -> Verdict:
    result = ctx.exec("python3 -c 'import calc; calc.divide(1, 0)'")
    raised = "ZeroDivisionError: divide by zero" in result.output
    return Verdict(
        raised,
        "divide(1, 0) raises ZeroDivisionError('divide by zero')"
        if raised
        else f"divide(1, 0) gave: {result.output.strip().splitlines()[-1:] or 'no error'}",
    )


async def answer_mentions_the_work(ctx) -> Verdict:
    """Validators may be async; ctx.answer() is the agent's last message."""
    answer = ctx.answer()
    return Verdict(
        bool(answer) and "fixed" not in answer.lower(), f"the answer says: {answer[:80]}"
    )


def touched_only_calc(ctx) -> Verdict:
    """ctx.turns() has each turn's file changes."""
    changed = {path.rsplit("/", 1)[-1] for turn in ctx.turns() for path in turn.file_changes}
    return Verdict(changed <= {"calc.py"}, f"changed: {', '.join(sorted(changed)) or 'nothing'}")


calc = suite(
    "calc",
    name="Calculator fixes",
    prompt="{{task}} in calc.py. Keep the other functions as they are.",
    source=files({"calc.py": CALC, "README.md": "A tiny calculator.\n"}),
    cases=[
        case(
            "fix-add",
            name="Fix add()",
            variables={"task": "Fix add"},
            tags=["arithmetic", "easy"],
            validate=command("python3 -c 'import calc; assert calc.add(2, 3) == 5'"),
        ),
        case(
            "fix-divide",
            name="Fix divide()",
            variables={
                "task": "Fix divide so it returns a true quotient and raises ZeroDivisionError('divide by zero') on zero"
            },
            tags=["arithmetic", "hard"],
            validate=[divide_works, divide_by_zero_is_an_error, touched_only_calc],
        ),
        case(
            "explain-add",
            name="Fix add() and explain",
            variables={"task": "Fix add and say what you changed"},
            tags=["communication"],
            validate=[add_is_fixed, answer_mentions_the_work],
        ),
    ],
    variants=[careful, hasty],
    trials=3,
)
