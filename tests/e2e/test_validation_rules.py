"""Every rule an eval file must follow, checked before anything runs: `proctor eval` names the
file, the suite or case and the field in one line, exits 2, and leaves the database as it was."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from e2e.running import Backend, agent_profile, write_eval

PROFILE = agent_profile("echo_agent.sh", name="echo")
# A command variant that can hold a conversation, for the rules of its person's side.
CONVERSING = (
    'variant("command", profile=profile("talker", run="true", '
    'capabilities=["conversation-resume"]))'
)
# The variants.json beside the JSON eval files of the rules below.
JSON_VARIANTS = '[{"harness": "command", "profile": {"run": "true"}}]'


def rules_file(
    *,
    suite_id="rules",
    case_id="good-case",
    prompt="Do it",
    validate="ok",
    case_fields="",
    suite_fields="",
    variant=f'variant("command", profile={PROFILE})',
) -> str:
    validate_part = f", validate={validate}" if validate is not None else ""
    return f"""
    from proctor import (
        case, command, files, profile, repo, responder, simulated_user, suite, turn, turns,
        variant,
    )


    def ok(ctx):
        return True


    s = suite({suite_id!r}, prompt={prompt!r},
              cases=[case({case_id!r}{validate_part}{case_fields})],
              variants=[{variant}]{suite_fields})
    """


def rule(
    name: str,
    expected: list[str],
    *,
    files: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    **fields,
):
    """One broken input: the files to write (default: rules.eval.py built from ``fields``), the
    arguments, and the words its one line must hold."""
    return pytest.param(files or {"rules.eval.py": rules_file(**fields)}, args, expected, id=name)


# The line of rules_file() that calls case(), as write_eval writes it.
CASES_LINE = next(
    number
    for number, line in enumerate(textwrap.dedent(rules_file()).lstrip().splitlines(), start=1)
    if "cases=[case(" in line
)

RULES = [
    rule(
        # Printed as written: Rich once turned the ":m:" of this name into an emoji.
        "variant-name-with-an-emoji-code",
        ["rules.eval.py", "variant command:echo:m:nope", "unknown sandbox 'nope'"],
        variant=f'variant("command", profile={PROFILE}, model="m", sandbox="nope")',
    ),
    rule(
        "variant-model-not-text",
        ["rules.eval.py", "variant command:echo:5", "model must be text", "got 5"],
        variant=f'variant("command", profile={PROFILE}, model=5)',
    ),
    rule(
        "variant-prompt-not-text",
        ["rules.eval.py", "variant command:echo:short", "prompt must be text", "got 5"],
        variant=f'variant("command", profile={PROFILE}, prompt=5, prompt_name="short")',
    ),
    rule(
        "simulated-user-first-message-and-persona-opens",
        ["rules.eval.py", "case good-case", "has a first_message and persona_opens=True"],
        case_fields=", user=simulated_user('You are Bo.', first_message='Hi', persona_opens=True)",
        variant=CONVERSING,
    ),
    rule(
        "variables-not-a-mapping",
        ["rules.eval.py", "case good-case", "variables must map", "got a str"],
        case_fields=", variables='task=x'",
    ),
    rule(
        "expected-output-not-text",
        ["rules.eval.py", "case good-case", "expected_output must be text", "got 5"],
        case_fields=", expected_output=5",
    ),
    rule(
        "case-name-not-text",
        ["rules.eval.py", "case good-case", "name must be text", "got 5"],
        case_fields=", name=5",
    ),
    rule(
        "cases-holds-no-case",
        ["rules.eval.py", "suite rules", "cases must be built with case(...), not NoneType"],
        files={
            "rules.eval.py": f"""
            from proctor import profile, suite, variant

            s = suite("rules", prompt="Do it", cases=[None],
                      variants=[variant("command", profile={PROFILE})])
            """
        },
    ),
    rule(
        "simulated-user-message-without-content",
        [
            "rules.eval.py",
            f"line {CASES_LINE}:",
            "initial_messages: message 2",
            '{"role", "content"}',
        ],
        case_fields=", user=simulated_user('You are Bo.', initial_messages="
        "[{'role': 'user', 'content': 'Hi'}, {'role': 'assistant'}])",
    ),
    rule(
        "simulated-user-messages-file-missing",
        ["rules.eval.py", "initial_messages file://calls/none.json", "No such file"],
        case_fields=", user=simulated_user('You are Bo.', initial_messages="
        "'file://calls/none.json')",
    ),
    rule(
        "simulated-user-first-message-not-text",
        ["rules.eval.py", "case good-case", "simulated_user first_message must be text", "5"],
        case_fields=", user=simulated_user('You are Bo.', first_message=5)",
        variant=CONVERSING,
    ),
    rule(
        # PostgreSQL refused the row with a traceback; SQLite kept all 201 characters.
        "label-too-long",
        ["--label is 201 characters; a batch's label is text of at most 200"],
        args=("--label", "x" * 201),
    ),
    rule(
        # Names past what the database keeps: PostgreSQL refused the row with a traceback.
        "case-name-too-long",
        ["rules.eval.py", "case good-case", "name 'CCCCCCCCCCCCCCCCCCCC'… is 201 characters"],
        case_fields=", name='C' * 201",
    ),
    rule(
        "variant-model-too-long",
        ["rules.eval.py", "variant long-model: model", "is 201 characters; the most is 200"],
        variant=f'variant("command", profile={PROFILE}, model="m" * 201, name="long-model")',
    ),
    rule(
        "source-file-not-text",
        ["rules.eval.py", "case good-case", "source file 'a.txt' must hold text (got an int)"],
        case_fields=", source=files({'a.txt': 5})",
    ),
    rule(
        "source-file-and-folder",
        ["rules.eval.py", "case good-case", "source file 'src' is also the folder of 'src/a.py'"],
        case_fields=", source=files({'src': 'x', 'src/a.py': 'y'})",
    ),
    rule(
        "source-files-not-a-mapping",
        ["rules.eval.py", "case good-case", "files() takes a mapping", "got a str"],
        case_fields=", source=files('a.txt')",
    ),
    rule(
        "source-repo-names-none",
        ["rules.eval.py", "case good-case", "repo('acme/api@') names no repository"],
        case_fields=", source=repo('acme/api@')",
    ),
    rule(
        "turn-gate-not-a-regex",
        ["rules.eval.py", "case good-case", "turn 1: agent_response_matches", "got 5"],
        case_fields=", user=turns(turn('Go on', agent_response_matches=5))",
        variant=CONVERSING,
    ),
    rule(
        "turn-prompt-not-text",
        ["rules.eval.py", "case good-case", "turn 2's prompt must be text (got 5)"],
        case_fields=", user=turns('Go on', 5)",
        variant=CONVERSING,
    ),
    rule(
        "responder-model-not-a-name",
        ["rules.eval.py", "case good-case", "responder model", "got 3"],
        case_fields=", user=responder(model=3)",
        variant=CONVERSING,
    ),
    rule(
        "diff-ignore-not-a-pattern",
        ["rules.eval.py", "suite rules", "diff_ignore[2]", "glob pattern"],
        suite_fields=", diff_ignore=['build/', 3]",
    ),
    rule(
        "diff-ignore-not-a-gitignore-line",
        ["rules.eval.py", "suite rules", "diff_ignore[2]", ".gitignore", "got '!'"],
        suite_fields=", diff_ignore=['build/', '!']",
    ),
    rule(
        "id-uppercase",
        ["rules.eval.py", "case Health-Route", "id", "lowercase"],
        case_id="Health-Route",
    ),
    rule("id-leading-hyphen", ["rules.eval.py", "case -health", "id"], case_id="-health"),
    rule("id-trailing-hyphen", ["rules.eval.py", "case health-", "id"], case_id="health-"),
    rule(
        "id-double-hyphen", ["rules.eval.py", "case health--route", "id"], case_id="health--route"
    ),
    rule(
        "id-101-characters", ["rules.eval.py", "case " + "a" * 101, "id", "100"], case_id="a" * 101
    ),
    rule("suite-id-uppercase", ["rules.eval.py", "suite Rules", "id"], suite_id="Rules"),
    rule(
        "13-tags",
        ["rules.eval.py", "case good-case", "tags", "12"],
        case_fields=", tags=[f't{i}' for i in range(13)]",
    ),
    rule(
        "max-turns-0",
        ["rules.eval.py", "case good-case", "max_turns", "1 to 50"],
        case_fields=", max_turns=0",
    ),
    rule(
        "max-turns-51",
        ["rules.eval.py", "case good-case", "max_turns", "1 to 50"],
        case_fields=", max_turns=51",
    ),
    rule(
        "timeout-999",
        ["rules.eval.py", "case good-case", "timeout_ms", "1,000"],
        case_fields=", timeout_ms=999",
    ),
    rule(
        "timeout-3600001",
        ["rules.eval.py", "case good-case", "timeout_ms", "3,600,000"],
        case_fields=", timeout_ms=3_600_001",
    ),
    rule(
        "missing-validate",
        ["rules.eval.py", "case good-case", "validate", "required"],
        validate=None,
    ),
    rule(
        "21-checks",
        ["rules.eval.py", "case good-case", "validate", "21", "20"],
        validate="[ok] * 21",
    ),
    rule(
        "command-in-a-list",
        ["rules.eval.py", "case good-case", "validate", "command()"],
        validate='[ok, command("true")]',
    ),
    rule(
        "variable-without-value",
        ["rules.eval.py", "case good-case", "{{task}}", "variables"],
        prompt="Please {{task}}",
        case_fields=", variables={'other': 'x'}",
    ),
    rule(
        "cache-outside-workspace",
        ["rules.eval.py", "case good-case", "cache", "inside the workspace"],
        case_fields=", cache={'key': 'deps-v1', 'path': '../outside'}",
    ),
    rule(
        "cache-absolute",
        ["rules.eval.py", "case good-case", "cache", "inside the workspace"],
        case_fields=", cache={'key': 'deps-v1', 'path': '/tmp/deps'}",
    ),
    rule(
        "duplicate-case-across-files",
        ["second.eval.py", "suite second", "case same-id", "id", "first.eval.py"],
        files={
            "first.eval.py": rules_file(suite_id="first", case_id="same-id"),
            "second.eval.py": rules_file(suite_id="second", case_id="same-id"),
        },
    ),
    rule(
        "duplicate-case-in-one-suite",
        ["rules.eval.py", "case same-id", "id"],
        files={
            "rules.eval.py": rules_file(case_id="same-id").replace(
                "cases=[case('same-id', validate=ok)]",
                "cases=[case('same-id', validate=ok), case('same-id', validate=ok)]",
            )
        },
    ),
    rule(
        "duplicate-case-in-the-database",
        ["rules.eval.py", "suite other", "case seeded-case", "seeded"],
        suite_id="other",
        case_id="seeded-case",
    ),
    rule(
        "unknown-harness",
        ["rules.eval.py", "suite rules", "harness", "no-such-agent"],
        variant='variant("no-such-agent")',
    ),
    rule(
        "command-harness-without-profile",
        ["rules.eval.py", "suite rules", "profile"],
        variant='variant("command")',
    ),
    rule(
        "network-not-a-bool",
        ["rules.eval.py", "suite rules", "variant command:echo", "network", "'no'"],
        variant=f'variant("command", profile={PROFILE}, network="no")',
    ),
    rule(
        "profile-env-not-a-mapping",
        ["rules.eval.py", "suite rules", "variant command:p", "profile env", "'KEY=1'"],
        variant='variant("command", profile=profile("p", run="true", env="KEY=1"))',
    ),
    rule(
        "profile-unknown-capability",
        ["rules.eval.py", "suite rules", "variant command:p", "capabilities", "'resume'"],
        variant='variant("command", profile=profile("p", run="true", capabilities=["resume"]))',
    ),
    rule(
        "command-blank",
        ["rules.eval.py", "case good-case", "command()", "shell command"],
        validate='command("  ")',
    ),
    rule(
        "judge-without-rubric",
        ["rules.eval.py", "case good-case", "judge()", "rubric"],
        validate='[ok, __import__("proctor").judge("")]',
    ),
    rule(
        "json-validate-list-bad-command",
        ["rules.eval.json", "suite rules", "case json-case", "validate[2]", "timeout_ms"],
        files={
            "rules.eval.json": '{"id": "json-case", "prompt": "p", "validate": [{"command": "true"},'
            ' {"command": "true", "timeout_ms": 5}]}',
            "variants.json": JSON_VARIANTS,
        },
    ),
    rule(
        "json-plan-mode-not-a-bool",
        ["rules.eval.json", "case json-case", "plan_mode", "true or false in JSON", "'yes'"],
        files={
            "rules.eval.json": '{"id": "json-case", "prompt": "p", "validate": "true",'
            ' "plan_mode": "yes"}',
            # The one problem is the value's: no word of what plan mode would need.
            "variants.json": JSON_VARIANTS,
        },
    ),
    rule(
        "json-variant-typo",
        ["rules.eval.json", "suite rules", "unknown option sandbx"],
        files={
            "rules.eval.json": '{"id": "json-case", "prompt": "p", "validate": "true"}',
            "variants.json": '[{"harness": "command", "sandbx": "docker", "profile": {"run": "true"}}]',
        },
    ),
    rule(
        "json-variants-file-not-json",
        ["rules.eval.json", "variants.json is not valid JSON"],
        files={
            "rules.eval.json": '{"id": "json-case", "prompt": "p", "validate": "true"}',
            "variants.json": "[{harness: command}]",
        },
    ),
    rule(
        "syntax-error",
        ["rules.eval.py", "line 2", "syntax"],
        files={"rules.eval.py": "from proctor import suite\ns = suite(\n"},
    ),
    rule(
        "exception-at-import",
        ["rules.eval.py", "line 2", "KeyError", "DATABASE_PASSWORD"],
        files={"rules.eval.py": "import os\nPASSWORD = os.environ['DATABASE_PASSWORD']\n"},
    ),
    rule("no-suite-in-file", ["rules.eval.py", "no suite"], files={"rules.eval.py": "x = 1\n"}),
    rule("path-does-not-exist", ["missing.eval.py", "does not exist"], args=("missing.eval.py",)),
    rule(
        "path-is-not-an-eval-file",
        ["notes.txt", ".eval.py"],
        files={"notes.txt": "hello\n"},
        args=("notes.txt",),
    ),
    rule("unknown-case", ["--case nope"], args=("--case", "nope")),
    rule("unknown-variant", ["--variant nope", "command:echo"], args=("--variant", "nope")),
    rule("trials-0", ["--trials"], args=("--trials", "0")),
]


# Rules are checked before the database is opened, so every one runs on the embedded default;
# on PostgreSQL, the rule that reads the database and a few that must leave it untouched.
ON_POSTGRES = {
    "duplicate-case-in-the-database",
    "id-double-hyphen",
    "command-in-a-list",
    "unknown-case",
}
COMBINATIONS = [pytest.param("sqlite", *p.values, id=f"sqlite-{p.id}") for p in RULES] + [
    pytest.param("postgres", *p.values, id=f"postgres-{p.id}") for p in RULES if p.id in ON_POSTGRES
]


@pytest.fixture(scope="module")
def seeded_backends(module_backends, tmp_path_factory):
    """Databases that already hold a batch, so 'unchanged' means more than 'still empty'."""
    seeded: dict[str, Backend] = {}

    def get(kind: str) -> Backend:
        if kind not in seeded:
            backend = module_backends.get(kind)
            folder = tmp_path_factory.mktemp(f"seed-{kind}")
            write_eval(folder, "seed.eval.py", rules_file(suite_id="seeded", case_id="seeded-case"))
            backend.eval_json(folder)
            seeded[kind] = backend
        return seeded[kind]

    return get


@pytest.mark.parametrize(("kind", "files", "args", "expected"), COMBINATIONS)
def test_it_rejects_in_one_line_and_writes_nothing(
    seeded_backends, tmp_path: Path, kind, files, args, expected
):
    seeded = seeded_backends(kind)
    for name, text in files.items():
        write_eval(tmp_path, name, text)
    before = seeded.counts()

    result = seeded.eval(tmp_path, *args)

    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"one line, not: {result.stderr}"
    for word in expected:
        assert word in lines[0], f"{word!r} is not in {lines[0]!r}"
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert seeded.counts() == before
    assert before["evals_app_batch"] == 1


def test_a_long_problem_stays_on_one_line_when_stderr_is_not_a_terminal(
    sqlite_backend: Backend, tmp_path: Path
):
    write_eval(tmp_path, "rules.eval.py", rules_file(case_id="Health-Route"))
    env = {k: v for k, v in sqlite_backend.env.items() if k not in ("COLUMNS", "LINES")}

    result = Backend("sqlite", env).eval(tmp_path)

    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_rejected_file_creates_no_database(sqlite_backend: Backend, tmp_path: Path):
    write_eval(tmp_path, "rules.eval.py", rules_file(case_fields=", max_turns=0"))

    result = sqlite_backend.eval(tmp_path, "--json")

    assert result.returncode == 2
    assert result.stdout == ""
    assert not sqlite_backend.sqlite_path.exists()


def test_it_lists_every_problem_of_a_file_at_once(sqlite_backend: Backend, tmp_path: Path):
    write_eval(
        tmp_path,
        "rules.eval.py",
        rules_file(case_id="Bad--Id", case_fields=", max_turns=0, timeout_ms=1"),
    )

    result = sqlite_backend.eval(tmp_path)

    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("rules.eval.py: ")]
    assert [line.split(": ")[2].split()[0] for line in lines] == ["id", "max_turns", "timeout_ms"]
