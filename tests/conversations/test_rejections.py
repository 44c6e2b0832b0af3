"""Conversation and plan-mode evals that cannot run are refused before any sandbox is built:
`proctor eval` exits 2 with one sentence naming the file, the case and the rule, and records
nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e.running import Backend, write_eval

from conversations.recorded import run_eval, talker_profile


def python_eval(
    *, capabilities: tuple[str, ...], case_args: str, plan_file: str | None = None
) -> str:
    return f"""
    from proctor import case, command, profile, responder, suite, turn, turns, variant

    talker = {talker_profile(capabilities=capabilities, plan_file=plan_file)}

    refused = suite(
        "refused",
        prompt="{{{{request}}}}",
        cases=[case("caching", variables={{"request": "[ask] add caching"}}, validate=command("true"), {case_args})],
        variants=[variant("command", profile=talker)],
    )
    """


def json_eval(folder: Path, case: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "refused.eval.json").write_text(json.dumps(case))
    (folder / "variants.json").write_text(
        json.dumps(
            [
                {
                    "harness": "command",
                    "profile": {
                        "name": "talker",
                        "dir": str(Path(__file__).parent / "agents"),
                        "run": 'python3 "$PROCTOR_PROFILE_DIR/talker.py"',
                        "capabilities": ["conversation-resume", "plan-mode"],
                    },
                }
            ]
        )
    )


def write_refused(kind: str, folder: Path) -> list[str]:
    """Write the refused eval ``kind`` into ``folder``; returns words its one-line message names."""
    if kind == "conversation-without-resume":
        write_eval(
            folder, "refused.eval.py", python_eval(capabilities=(), case_args="user=responder()")
        )
        return ["caching", "conversation-resume"]
    if kind == "script-without-resume":
        write_eval(
            folder,
            "refused.eval.py",
            python_eval(capabilities=("plan-mode",), case_args='user=turns("Yes.")'),
        )
        return ["caching", "conversation-resume"]
    if kind == "plan-mode-without-plan-mode":
        write_eval(
            folder,
            "refused.eval.py",
            python_eval(
                capabilities=("conversation-resume",), case_args="user=responder(), plan_mode=True"
            ),
        )
        return ["caching", "plan-mode"]
    if kind == "plan-mode-without-a-signal":
        write_eval(
            folder,
            "refused.eval.py",
            python_eval(
                capabilities=("conversation-resume", "plan-mode"), case_args="plan_mode=True"
            ),
        )
        return ["caching", "responder", "plan file"]
    if kind == "turns-and-responder":
        json_eval(
            folder,
            {
                "id": "caching",
                "prompt": "Add caching.",
                "expected_output": "A cache.",
                "turns": [{"prompt": "Yes.", "deliver_when": "always"}],
                "responder": {"type": "llm"},
            },
        )
        return ["caching", "turns", "responder"]
    if kind == "responder-not-llm":
        json_eval(
            folder,
            {
                "id": "caching",
                "prompt": "Add caching.",
                "expected_output": "A cache.",
                "responder": {"type": "heuristic", "max_turns": 3},
            },
        )
        return ["caching", "llm"]
    raise AssertionError(kind)


REFUSED = [
    "conversation-without-resume",
    "script-without-resume",
    "plan-mode-without-plan-mode",
    "plan-mode-without-a-signal",
    "turns-and-responder",
    "responder-not-llm",
]

ONE_SHOT = f"""
from proctor import case, command, profile, suite, variant

talker = {talker_profile()}

accepted = suite(
    "accepted",
    prompt="{{{{request}}}}",
    cases=[case("one-shot", variables={{"request": "add caching"}}, validate=command("test -f cache.py"))],
    variants=[variant("command", profile=talker)],
)
"""


@pytest.fixture(scope="module")
def recorded_home(module_sqlite: Backend, tmp_path_factory) -> Backend:
    """A home that already recorded a batch, so "nothing recorded" is a real comparison."""
    folder = tmp_path_factory.mktemp("accepted")
    write_eval(folder, "accepted.eval.py", ONE_SHOT)
    run_eval(module_sqlite, folder)
    return module_sqlite


def assert_refused(backend: Backend, folder: Path, named: list[str]) -> str:
    """Run `proctor eval` on ``folder``, expect the refusal, and return what it printed."""
    before = backend.counts()
    batches = (
        sorted(p.name for p in (backend.artifacts / "batches").glob("*"))
        if backend.artifacts.exists()
        else []
    )

    result = backend.eval(folder)

    assert result.returncode == 2, f"stdout: {result.stdout}\nstderr: {result.stderr}"
    assert "Traceback" not in result.stderr
    # One problem, one sentence (however the terminal wrapped it; see the one-line test below).
    message = " ".join(result.stderr.split())
    assert message.startswith("refused.eval.") and message.count("refused.eval.") == 1, (
        result.stderr
    )
    for word in named:
        assert word in message
    assert backend.counts() == before
    after = (
        sorted(p.name for p in (backend.artifacts / "batches").glob("*"))
        if backend.artifacts.exists()
        else []
    )
    assert after == batches
    return result.stderr


@pytest.mark.parametrize("kind", REFUSED)
def test_an_eval_the_harness_or_its_shape_cannot_run_is_refused_before_anything_runs(
    recorded_home: Backend, tmp_path: Path, kind: str
) -> None:
    named = write_refused(kind, tmp_path / kind)

    assert_refused(recorded_home, tmp_path / kind, named)


def test_a_refused_conversation_records_nothing_on_either_database(
    backend_env: dict[str, str], tmp_path: Path
) -> None:
    # An endpoint is configured so the only broken rule is the missing capability.
    env = {**backend_env, "PROCTOR_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    backend = Backend("postgres" if "DATABASE_URL" in env else "sqlite", env)
    named = write_refused("conversation-without-resume", tmp_path / "refused")

    assert_refused(backend, tmp_path / "refused", named)


def test_the_refusal_is_printed_on_one_line_when_stderr_is_not_a_terminal(
    recorded_home: Backend, tmp_path: Path
) -> None:
    named = write_refused("plan-mode-without-plan-mode", tmp_path / "refused")

    printed = assert_refused(recorded_home, tmp_path / "refused", named)

    assert len(printed.strip().splitlines()) == 1, printed


def test_a_responder_or_judge_without_a_model_endpoint_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    from conftest import proctor_env, run_proctor

    folder = tmp_path / "no-endpoint"
    folder.mkdir()
    (folder / "needs_model.eval.py").write_text(
        "from proctor import case, judge, profile, responder, suite, variant\n"
        "talker = variant('command', name='talker', profile=profile('t', run='true', capabilities=['conversation-resume']))\n"
        "s = suite('needs-model', prompt='{{p}}', variants=[talker], cases=[\n"
        "    case('asks', variables={'p': 'x'}, user=responder(), validate=judge('did it')),\n"
        "])\n"
    )
    env = proctor_env(tmp_path / "home")
    result = run_proctor("eval", cwd=folder, env=env)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(
        "needs_model.eval.py: suite needs-model, case asks: uses a responder and a judge"
    )
    assert "PROCTOR_LLM_BASE_URL" in line
    assert not (tmp_path / "home" / "artifacts").exists()
