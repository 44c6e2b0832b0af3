"""A repo() source, a prepare step with a cache, and a secret that only the validator sees."""

import secrets
from pathlib import Path

from fixtures.local_repo import git_repo_from_folder
from variants import careful, hasty

from proctor import Verdict, case, command, repo, suite

GREETER_REPO = git_repo_from_folder(Path(__file__).parent / "fixtures" / "greeter")


def install(ctx):
    """Runs before the agent. The cache folder survives between trials, so the slow part runs
    once; what prepare returns reaches validators as ctx.prepared and is never shown anywhere."""
    if not ctx.cached:
        ctx.exec("mkdir -p .deps && sleep 0.2 && echo 'pretend dependencies' > .deps/installed.txt")
    token = "demo-" + secrets.token_hex(12)  # made here, so it is in no file either
    print(f"issued a test token: {token}")  # shown as [redacted] in the logs
    return {"api_token": token, "cached": ctx.cached}


def tests_pass(ctx) -> Verdict:
    result = ctx.exec(
        "python3 -m pytest -q test_greeter.py 2>&1 || python3 -c 'import test_greeter as t; t.test_greets_by_name()'"
    )
    return Verdict(
        result.exit_code == 0,
        result.output.strip().splitlines()[-1] if result.output.strip() else "",
    )


def token_reached_the_validator(ctx) -> Verdict:
    return Verdict(
        ctx.prepared["api_token"].startswith("demo-"), "the prepared token reached the validator"
    )


greeter = suite(
    "greeter",
    name="Greeter (git source)",
    prompt="Make greet() say hello to the person by name, like 'Hello, Ada!'.",
    source=repo(f"{GREETER_REPO}@v1"),
    cases=[
        case(
            "greet-by-name",
            name="Greet by name",
            tags=["strings"],
            prepare=install,
            cache={"key": "greeter-deps-v1", "path": ".deps"},
            validate=[tests_pass, token_reached_the_validator],
        ),
        case(
            "greet-exact",
            name="Greet, exact text",
            tags=["strings"],
            validate=command("grep -q 'Hello, {name}!' greeter.py"),
        ),
    ],
    variants=[careful, hasty],
    trials=2,
)
