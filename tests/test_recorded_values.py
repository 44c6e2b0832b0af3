"""A trial runs its record: the case and the variant rebuilt from what was recorded give back the
same record, paths into the project and credentials from the environment are recorded so they
hold anywhere and show nothing, and the callables a worker imports are checked against the
record, each mismatch one line naming what differs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from evals_app import project_paths
from evals_app.loading import load_file
from evals_app.recorded_values import (
    case_callables,
    rebuilt_case,
    rebuilt_variant,
    variant_callables,
)
from evals_app.resolution import canonical_hash, resolve_case, trial_prompts, variant_spec
from evals_app.version_diff import describe_changes
from runner.jobs import eval_code

EVERYTHING = """
import os
from pathlib import Path

from proctor import (
    assertion, case, command, judge, mock, profile, responder, simulated_user, suite, tool,
    turn, turns, variant,
)

HERE = Path(__file__).resolve().parent
LIMIT = 3
WORD = os.environ.get("RECORDED_WORD", "hello")


def wrote(ctx):
    return WORD in ctx.read_text("out.txt") and len(WORD) < LIMIT * 10


def short(ctx):
    return 1.0


def prepare(ctx):
    return {"token": "t"}


def refund(request, state):
    return {"ok": True}


def gh(call, state):
    return "done"


def create_ticket(title: str) -> str:
    return "T-1"


def lookup(args):
    return "found"


base = dict(
    prompt="Do {{task}}",
    variants=[
        variant(
            "chat",
            model="m",
            tools=[tool("lookup", description="finds", stub=lookup)],
            temperature=0.2,
        ),
        variant(
            "command",
            model=os.environ.get("RECORDED_MODEL", "m"),
            profile=profile(
                "p",
                run=f"python3 {HERE / 'agent.py'} --config {HERE}/conf.json",
                install=f"bash {HERE / 'install.sh'}",
                env={"API_KEY": os.environ.get("RECORDED_API_KEY", ""), "MODE": "fast"},
                capabilities=["conversation-resume"],
            ),
        ),
    ],
)

everything = suite(
    "everything",
    system_prompt="Be brief.",
    diff_ignore=["build/"],
    mocks=[mock.api("billing", routes={"POST /refunds": refund, "GET /health": "ok",
                                        "GET /x": mock.response(201, json={"a": 1})})],
    cases=[
        case(
            "all-checks",
            variables={"task": "work"},
            validate=[
                wrote,
                judge("Is it good?", threshold=0.7),
                assertion("icontains", "hello", weight=2, metric="m"),
                assertion("python", short),
            ],
            prepare=prepare,
            cache={"key": "deps", "path": ".deps"},
            user=turns("again", "and again"),
            threshold=0.5,
            check_timeout_ms=5_000,
            mocks=[
                mock.cli("gh", script={"pr create *": mock.output(stdout="1"), "pr list": 2,
                                        "*": gh}),
                mock.mcp("tickets", tools={"create_ticket": create_ticket}),
            ],
        ),
        case("responded", variables={"task": "ask"}, validate=command(f"bash {HERE}/check.sh"),
             user=responder(max_turns=3)),
        case("simulated", variables={"task": "chat"}, validate=wrote,
             user=simulated_user("You are Ada.", first_message="Hi",
                                 initial_messages=[{"role": "user", "content": "earlier"}])),
        case("persona-opens", variables={"task": "chat"}, validate=wrote,
             user=simulated_user("You are Bo.", persona_opens=True, max_turns=3)),
        case("asks-again", variables={"task": "work"}, validate=wrote,
             user=turns(turn(variables={"task": "more work"}))),
    ],
    **base,
)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("RECORDED_API_KEY", "sk-recorded-1234567890")
    root = tmp_path / "project"
    (root / "evals").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "p"\n')
    (root / "evals" / "everything.eval.py").write_text(textwrap.dedent(EVERYTHING))
    return root


def loaded(root: Path):
    (suite,) = load_file(root / "evals" / "everything.eval.py").suites
    return suite


def test_a_case_rebuilt_from_its_record_resolves_to_the_same_record(project: Path):
    suite = loaded(project)
    module = project / "evals" / "everything.eval.py"
    for case in suite.cases:
        resolved = resolve_case(suite, case, module)
        rebuilt = rebuilt_case(
            resolved.definition,
            resolved.definition_hash,
            case_callables(suite, case),
            module_path=module,
            project=project,
        )
        again = resolve_case(rebuilt.suite, rebuilt.case, module)
        assert again.definition == resolved.definition, case.id
        assert again.definition_hash == resolved.definition_hash


def test_a_variant_rebuilt_from_its_record_records_the_same(project: Path, tmp_path: Path):
    suite = loaded(project)
    for variant in suite.variants:
        spec = variant_spec(variant, root=project)
        elsewhere = tmp_path / "worker-copy"
        rebuilt = rebuilt_variant(
            spec, variant_callables(variant), profile_dir=None, project=elsewhere
        )
        assert variant_spec(rebuilt, root=elsewhere) == spec, variant.name
    (chat, command) = [variant_spec(v, root=project) for v in suite.variants]
    assert chat["options"]["tools"][0]["stub"]["callable"] == "lookup"
    profile = command["profile"]
    assert profile["run"] == (
        "python3 ${PROCTOR_PROJECT}/evals/agent.py --config ${PROCTOR_PROJECT}/evals/conf.json"
    )
    assert profile["install"] == "bash ${PROCTOR_PROJECT}/evals/install.sh"
    # The key read from the environment is recorded as a reference to its variable.
    assert profile["env"] == {"API_KEY": "${RECORDED_API_KEY}", "MODE": "fast"}
    rebuilt = rebuilt_variant(command, {}, profile_dir=None, project=Path("/srv/copy"))
    assert rebuilt.profile.run == (
        "python3 /srv/copy/evals/agent.py --config /srv/copy/evals/conf.json"
    )


def test_a_moved_project_records_the_same_versions_and_variants(project: Path, tmp_path: Path):
    before = loaded(project)
    records = [
        resolve_case(before, c, project / "evals" / "everything.eval.py").definition_hash
        for c in before.cases
    ]
    variants = [canonical_hash(variant_spec(v, root=project)) for v in before.variants]
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    project.rename(moved)
    after = loaded(moved)
    assert [
        resolve_case(after, c, moved / "evals" / "everything.eval.py").definition_hash
        for c in after.cases
    ] == records
    assert [canonical_hash(variant_spec(v, root=moved)) for v in after.variants] == variants


def test_what_a_check_reads_is_recorded_without_its_text(project: Path, monkeypatch):
    monkeypatch.setenv("RECORDED_WORD", "s3cr3t-w0rd")
    suite = loaded(project)
    module = project / "evals" / "everything.eval.py"
    definition = resolve_case(suite, suite.cases[0], module).definition
    reads = definition["checks"][0]["reads"]
    assert reads["LIMIT"] == 3
    assert set(reads["WORD"]) == {"sha256"}
    assert "s3cr3t-w0rd" not in repr(definition)

    monkeypatch.setenv("RECORDED_WORD", "other-word")
    (module.parent / "everything.eval.py").write_text(
        module.read_text().replace("LIMIT = 3", "LIMIT = 4")
    )
    changed = resolve_case(loaded(project), loaded(project).cases[0], module).definition
    diff = describe_changes(definition, changed)
    assert "check wrote: LIMIT 3 -> 4" in diff
    assert "check wrote: WORD changed" in diff
    assert not any("other-word" in line or "sha256" in line for line in diff)


@pytest.mark.parametrize(
    ("written", "recorded"),
    [
        ("bash ROOT/check.sh", "bash ${PROCTOR_PROJECT}/check.sh"),
        ("cd ROOT && make", "cd ${PROCTOR_PROJECT} && make"),
        ("cat 'ROOT/a b.txt'", "cat '${PROCTOR_PROJECT}/a b.txt'"),
        ("ROOT2/x ROOT-old/y /prefixROOT/z", "ROOT2/x ROOT-old/y /prefixROOT/z"),
        ("ROOT/.venv/bin/python ROOT/a.py", "ROOT/.venv/bin/python ${PROCTOR_PROJECT}/a.py"),
        ("PATH=ROOT/bin:ROOT/tools", "PATH=${PROCTOR_PROJECT}/bin:${PROCTOR_PROJECT}/tools"),
    ],
)
def test_paths_into_the_project_are_named_by_the_token(tmp_path: Path, written: str, recorded: str):
    root = tmp_path / "proj"
    (root / ".venv").mkdir(parents=True)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    text = written.replace("ROOT", str(root))
    assert project_paths.recorded(text, root) == recorded.replace("ROOT", str(root))
    assert project_paths.resolved(project_paths.recorded(text, root), root) == text


def test_paths_outside_the_project_are_found_for_the_warning(tmp_path: Path):
    root = tmp_path / "proj"
    root.mkdir()
    (tmp_path / "data").mkdir()
    named = f"cat {tmp_path}/data /usr/bin/env {root}/x {tmp_path}/missing"
    assert project_paths.outside_paths([named], root) == [f"{tmp_path}/data"]


def write_module(root: Path, body: str) -> Path:
    module = root / "evals" / "small.eval.py"
    module.parent.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "small"\n')
    module.write_text(textwrap.dedent(body))
    return module


SMALL = """
import os
from proctor import case, suite, variant, tool

TOKEN = os.environ.get("SMALL_TOKEN", "")


def token_ok(ctx):
    return TOKEN == "x" * 12


def stub(args):
    return "ok"


small = suite("small", prompt="p", cases=[case("c", validate=token_ok)],
              variants=[variant("chat", model="m", tools=[tool("t", stub=stub)])])
"""


def recorded_code(module: Path, root: Path) -> eval_code.RecordedCode:
    (suite,) = load_file(module).suites
    resolved = resolve_case(suite, suite.cases[0], module)
    spec = variant_spec(suite.variants[0], root=root)
    return eval_code.RecordedCode(
        definition=resolved.definition,
        definition_hash=resolved.definition_hash,
        version=1,
        variant=spec,
        variant_hash=canonical_hash(spec),
        module=module,
        root=root,
        reads_comparable=True,
    )


def test_a_worker_takes_the_callables_the_record_names_and_says_which_one_differs(
    tmp_path: Path, monkeypatch
):
    monkeypatch.setenv("SMALL_TOKEN", "x" * 12)
    root = tmp_path / "small"
    module = write_module(root, SMALL)
    code = recorded_code(module, root)
    eval_code.forget()

    found = eval_code.callables_for(code)
    assert sorted(found) == ["check 0", "tool t"]

    # A worker whose import computes another token: one line naming the value read.
    monkeypatch.setenv("SMALL_TOKEN", "y")
    module.write_text(module.read_text() + "\n")  # a new version of the file: imported again
    with pytest.raises(eval_code.CodeMismatch) as missing:
        eval_code.callables_for(code)
    assert str(missing.value).startswith(
        "validator token_ok in evals/small.eval.py reads TOKEN, whose value here differs"
    )
    assert "\n" not in str(missing.value)

    # Code that differs from the record is named too.
    monkeypatch.setenv("SMALL_TOKEN", "x" * 12)
    module.write_text(module.read_text().replace('== "x" * 12', '== "x" * 12 or True'))
    with pytest.raises(eval_code.CodeMismatch) as changed:
        eval_code.callables_for(code)
    assert str(changed.value) == (
        "validator token_ok in evals/small.eval.py changed since version 1 was recorded"
    )
    module.write_text(module.read_text().replace('return "ok"', 'return "changed"'))
    module.write_text(module.read_text().replace('== "x" * 12 or True', '== "x" * 12'))
    with pytest.raises(eval_code.CodeMismatch) as stub:
        eval_code.callables_for(code)
    assert "the stub of tool t" in str(stub.value) and "changed since version 1" in str(stub.value)


def test_the_process_that_loaded_the_eval_imports_nothing_again(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SMALL_TOKEN", "x" * 12)
    root = tmp_path / "small"
    module = write_module(root, SMALL)
    code = recorded_code(module, root)
    (suite,) = load_file(module).suites
    eval_code.forget()
    eval_code.remember(
        {code.definition_hash: case_callables(suite, suite.cases[0])},
        {code.variant_hash: variant_callables(suite.variants[0])},
        {},
    )
    module.unlink()  # nothing left to import: what was loaded is used

    found = eval_code.callables_for(code)
    assert found["check 0"] is suite.cases[0].checks[0]
    eval_code.forget()


PROMPT_VARIANTS = """
from proctor import case, command, suite, variant

prompts = suite(
    "prompts",
    prompt="Say {{word}}",
    cases=[case("hello", variables={"word": "hello", "tone": "warm", "unused": "x"},
                validate=command("true"))],
    variants=[
        variant("chat", model="m", base_url="http://127.0.0.1:9/v1"),
        variant("chat", model="m", base_url="http://127.0.0.1:9/v1", prompt="Shout {{word}}",
                system_prompt="Be {{tone}}."),
    ],
)
"""


def test_a_variants_own_prompt_runs_from_the_record_alone(tmp_path: Path):
    """A worker elsewhere rebuilds the case and the variant from their JSON records and sends
    the variant's prompt filled with the case's recorded variables."""
    (tmp_path / "prompts.eval.py").write_text(textwrap.dedent(PROMPT_VARIANTS))
    module = tmp_path / "prompts.eval.py"
    (suite,) = load_file(module).suites
    (case,) = suite.cases
    resolved = resolve_case(suite, case, module)
    definition = json.loads(json.dumps(resolved.definition))
    # Only what a variant's prompts fill is recorded with the case.
    assert definition["variables"] == {"tone": "warm", "word": "hello"}
    rebuilt = rebuilt_case(
        definition, resolved.definition_hash, {}, module_path=module, project=tmp_path
    )
    sent = []
    for variant in suite.variants:
        spec = json.loads(json.dumps(variant_spec(variant, root=tmp_path)))
        elsewhere = rebuilt_variant(spec, {}, profile_dir=None, project=tmp_path / "copy")
        sent.append(trial_prompts(rebuilt.definition, elsewhere.options))
    assert sent == [("Say hello", None), ("Shout hello", "Be warm.")]


def test_a_suite_whose_variants_carry_no_prompt_records_its_cases_as_before(tmp_path: Path):
    (tmp_path / "plain.eval.py").write_text(
        textwrap.dedent(PROMPT_VARIANTS).split("    variants=[")[0]
        + '    variants=[variant("chat", model="m", base_url="http://127.0.0.1:9/v1", '
        + 'system_prompt="Be brief.")],\n)\n'
    )
    (suite,) = load_file(tmp_path / "plain.eval.py").suites
    definition = resolve_case(suite, suite.cases[0], tmp_path / "plain.eval.py").definition
    assert "variables" not in definition


def test_a_suite_running_a_command_process_records_every_variable_of_its_cases(tmp_path: Path):
    """The command harness hands the case's variables to its process, so all of them are what
    its trials run with: recorded, read back, and a change to one not in any prompt is a new
    version. A suite without such a variant keeps recording only what its prompts fill."""
    command_suite = PROMPT_VARIANTS.replace(
        'variant("chat", model="m", base_url="http://127.0.0.1:9/v1"),',
        'variant("command", profile=profile("p", run="true")),',
    ).replace(
        "import case, command, suite, variant", "import case, command, profile, suite, variant"
    )
    module = tmp_path / "command.eval.py"
    module.write_text(textwrap.dedent(command_suite))
    (suite,) = load_file(module).suites
    resolved = resolve_case(suite, suite.cases[0], module)

    assert resolved.definition["variables"] == {"tone": "warm", "unused": "x", "word": "hello"}
    rebuilt = rebuilt_case(
        json.loads(json.dumps(resolved.definition)),
        resolved.definition_hash,
        {},
        module_path=module,
        project=tmp_path,
    )
    again = resolve_case(rebuilt.suite, rebuilt.case, module)
    assert (again.definition, again.definition_hash) == (
        resolved.definition,
        resolved.definition_hash,
    )
    module.write_text(module.read_text().replace('"unused": "x"', '"unused": "y"'))
    (changed,) = load_file(module).suites
    assert resolve_case(changed, changed.cases[0], module).definition_hash != (
        resolved.definition_hash
    )

    chat_only = tmp_path / "chat.eval.py"
    chat_only.write_text(textwrap.dedent(PROMPT_VARIANTS))
    (chat,) = load_file(chat_only).suites
    assert resolve_case(chat, chat.cases[0], chat_only).definition["variables"] == {
        "tone": "warm",
        "word": "hello",
    }
