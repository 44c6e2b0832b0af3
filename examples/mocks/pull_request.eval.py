"""An agent opens a pull request with ``gh``, mocked by ``mock.cli``: the trial puts a ``gh``
first on the agent's PATH that answers from a script and logs every run.

    proctor eval examples/mocks/pull_request.eval.py
"""

from pathlib import Path

from proctor import assertion, case, mock, profile, suite, variant

AGENTS = Path(__file__).parent / "agents"

gh = mock.cli(
    "gh",
    script={
        "pr create *": "https://github.com/acme/site/pull/7",
        "auth status": mock.output(stderr="Logged in to github.com as proctor\n"),
    },
)

pull_request = suite(
    "mock-pull-request",
    name="Open a pull request with gh (mock.cli)",
    prompt="Open a pull request titled 'Fix the typo in README' with gh.",
    mocks=[gh],
    cases=[
        case(
            "open-pull-request",
            validate=[
                assertion("called", "gh pr create", name="ran gh pr create"),
                assertion("not-called", "gh pr merge", name="did not merge"),
            ],
        )
    ],
    variants=[
        variant(
            "command",
            profile=profile("pr-opener", dir=str(AGENTS / "pr-opener"), run="bash run.sh"),
        ),
        variant(
            "command",
            profile=profile("claims-only", dir=str(AGENTS / "claims-only"), run="bash run.sh"),
        ),
    ],
)
