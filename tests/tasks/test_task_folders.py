"""Reading task folders (issue 30): ``tasks(path)`` makes a case of every Harbor or
Terminal-Bench 1 folder, a bad folder is one line naming the file and the field, task cases are
refused under a sandbox that cannot hold their image, and the folders travel with the bundle."""

from __future__ import annotations

import io
import shutil
import tarfile
import textwrap
from pathlib import Path

import pytest

from evals_app.loading import load_file
from evals_app.recorded_values import rebuilt_case
from evals_app.resolution import resolve_case
from proctor import case, command, suite, tasks, variant
from proctor.definitions import DefinitionError
from proctor.rules import suite_problems
from proctor.tasks import HARBOR, TERMINAL_BENCH
from runner.batches.planning import Planned
from runner.batches.submission import build_submission

FOLDERS = Path(__file__).resolve().parent / "folders"
BROKEN = Path(__file__).resolve().parent / "broken"


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


def harbor(folder: Path, toml: str = "", instruction: str = "Do it.\n") -> Path:
    return write(
        folder,
        {
            "task.toml": toml,
            "instruction.md": instruction,
            "environment/Dockerfile": "FROM ubuntu:24.04\n",
            "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
        },
    )


def test_it_reads_harbor_and_terminal_bench_folders() -> None:
    cases = {c.id: c for c in tasks(FOLDERS)}

    assert sorted(cases) == [
        "compose-api",
        "hidden-tests",
        "no-reward",
        "slow-verifier",
        "tb-compose",
        "tb-count",
        "three-steps",
        "two-rewards",
    ]
    compose = cases["compose-api"].task
    (api,) = compose.services
    assert (api.name, api.build, api.main_waits_for) == ("api", "./api", "service_healthy")
    assert api.healthcheck == ("CMD", "test", "-f", "/tmp/ready")
    assert (api.interval_s, api.retries) == (0.2, 50)
    assert compose.env == {"API_URL": "http://api:8000"}  # main's environment
    two = cases["two-rewards"]
    assert two.task.format == HARBOR
    assert two.name == "proctor/two-rewards"
    assert two.variables["instruction"].startswith("Write the value of the GREETING")
    assert two.tags == ("difficulty:easy", "category:files", "smoke", "rewards", "greeting")
    assert two.timeout_ms == 60_000
    assert two.task.env == {"GREETING": "hello from the task"}
    assert two.task.verifier_env == {"EXPECTED": "hello from the task"}
    assert (two.task.cpus, two.task.memory_mb, two.task.allow_internet) == (1.0, 512, False)
    assert two.task.solution_script == "solution/solve.sh"

    tb = cases["tb-count"]
    assert tb.task.format == TERMINAL_BENCH
    assert tb.variables["instruction"].startswith("Count the lines")
    assert tb.tags == ("difficulty:medium", "category:text", "counting")
    assert tb.timeout_ms == 60_000
    assert (tb.task.tests_script, tb.task.solution_script) == ("run-tests.sh", "solution.sh")
    assert tb.task.parser == "pytest"

    tb_compose = cases["tb-compose"].task
    assert (tb_compose.main_service, tb_compose.dockerfile) == ("client", "Dockerfile")
    (store,) = tb_compose.services
    assert (store.name, store.build, store.main_waits_for) == (
        "store",
        "./store",
        "service_healthy",
    )
    # The client's environment, with Terminal-Bench's variables filled in.
    assert tb_compose.env == {"TEST_DIR": "/tests", "STORE_URL": "http://store:8000"}


def test_a_suite_without_a_prompt_gives_the_instruction() -> None:
    cases = tasks(FOLDERS, include="two-*")
    the_suite = suite("t", cases=cases, variants=[variant("oracle", sandbox="docker")])

    assert the_suite.prompt == "{{instruction}}"
    assert suite_problems(the_suite, "t.eval.py") == []
    definition = resolve_case(the_suite, cases[0], Path(__file__)).definition
    assert definition["prompt"].startswith("Write the value of the GREETING")


def test_a_suite_of_ordinary_cases_still_needs_a_prompt() -> None:
    the_suite = suite("t", cases=[case("c", validate=command("true"))], variants=[variant("x")])

    messages = [p.message for p in suite_problems(the_suite, "t.eval.py")]
    assert any(m.startswith("prompt is required") for m in messages)


def test_include_keeps_tasks_by_name_or_glob() -> None:
    assert [c.id for c in tasks(FOLDERS, include=["tb-*", "proctor/two-rewards"])] == [
        "tb-compose",
        "tb-count",
        "two-rewards",
    ]
    with pytest.raises(DefinitionError, match="matches none of its 8 task folders"):
        tasks(FOLDERS, include="nothing-*")


def test_a_task_folder_itself_is_one_case() -> None:
    assert [c.id for c in tasks(FOLDERS / "tb-count")] == ["tb-count"]


def test_a_relative_path_is_taken_from_the_calling_file() -> None:
    assert len(tasks("folders")) == 8


def test_folder_names_are_made_case_ids_and_collisions_named(tmp_path: Path) -> None:
    harbor(tmp_path / "Fix_The Bug")
    assert [c.id for c in tasks(tmp_path)] == ["fix-the-bug"]

    harbor(tmp_path / "fix-the-bug")
    with pytest.raises(DefinitionError) as caught:
        tasks(tmp_path)
    message = str(caught.value)
    assert "Fix_The Bug and " in message and "fix-the-bug both make the case id" in message


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"task.toml": "[agent]\ntimeout_sec = 'soon'\n"},
            "task.toml: agent.timeout_sec must be a positive number (got 'soon')",
        ),
        ({"task.toml": "[agent\n"}, "task.toml: not valid TOML"),
        ({"task.toml": "agent = 3\n"}, "task.toml: [agent] must be a table (got 3)"),
        (
            {"task.toml": "[environment]\nallow_internet = 'no'\n"},
            "environment.allow_internet must be true or false",
        ),
        (
            {"task.toml": "[environment.env]\nA = [1]\n"},
            "environment.env must be a table of names to text",
        ),
        (
            {"task.toml": "[metadata]\ntags = 'a'\n[verifier]\nreward_threshold = 2\n"},
            "verifier.reward_threshold must be a number from 0 to 1",
        ),
        ({"instruction.md": ""}, "instruction.md: is empty"),
        (
            {"task.toml": "[[steps]]\nname = 'a b'\n"},
            "task.toml: [[steps]] 1 name must be a folder name under steps/ (got 'a b')",
        ),
        (
            {"task.toml": "[[steps]]\nname = 'a'\n"},
            "steps/a/instruction.md: missing (the instruction the agent is given)",
        ),
        (
            {"environment/docker-compose.yaml": "services: {}\n"},
            "docker-compose.yaml: services must be a table of services",
        ),
        (
            {
                "environment/docker-compose.yaml": "services:\n  db:\n    image: x\n    ports: [80]\n"
            },
            "docker-compose.yaml: services.db.ports must be left out (Proctor does not apply it)",
        ),
        (
            {
                "environment/docker-compose.yaml": (
                    "services:\n  main:\n    depends_on:\n      db:\n        condition: service_healthy\n"
                    "  db:\n    image: x\n"
                )
            },
            "services.db.healthcheck must be set, as main waits for it to be healthy",
        ),
        (
            {
                "environment/docker-compose.yaml": (
                    "services:\n  main:\n    depends_on: [cache]\n  db:\n    image: x\n"
                )
            },
            "services.main.depends_on.cache must be a service of the file",
        ),
    ],
)
def test_an_invalid_folder_is_one_line_naming_the_file_and_field(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    folder = harbor(tmp_path / "bad")
    write(folder, files)

    with pytest.raises(DefinitionError) as caught:
        tasks(tmp_path)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
    assert str(folder) in message


def test_a_folder_without_its_verifier_or_image_is_named(tmp_path: Path) -> None:
    folder = harbor(tmp_path / "bad")
    (folder / "tests" / "test.sh").unlink()
    with pytest.raises(
        DefinitionError, match=r"bad/tests/test.sh: missing \(the task's verifier\)"
    ):
        tasks(tmp_path)

    folder = harbor(tmp_path / "bad")
    (folder / "environment" / "Dockerfile").unlink()
    with pytest.raises(DefinitionError, match=r"docker_image is not set and .* is missing"):
        tasks(tmp_path)


def test_the_shipped_malformed_task_is_refused() -> None:
    with pytest.raises(DefinitionError, match=r"malformed/task.toml: verifier.timeout_sec"):
        tasks(BROKEN / "malformed")


def test_a_terminal_bench_folder_is_checked_too(tmp_path: Path) -> None:
    write(tmp_path / "tb", {"task.yaml": "max_agent_timeout_sec: 5\n", "Dockerfile": "FROM x\n"})
    with pytest.raises(DefinitionError, match=r"tb/task.yaml: instruction is required"):
        tasks(tmp_path)
    write(
        tmp_path / "tb",
        {"task.yaml": "instruction: go\nparser_name: swebench\n", "run-tests.sh": ""},
    )
    with pytest.raises(DefinitionError, match=r'parser_name must be "pytest"'):
        tasks(tmp_path)


TB_CLIENT = """
services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: ["sh", "-c", "sleep infinity"]
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
"""


@pytest.mark.parametrize(
    ("compose", "expected"),
    [
        (
            "services:\n  db:\n    image: x\n",
            "docker-compose.yaml: services.client must be set (the agent's container",
        ),
        (TB_CLIENT + "    ports: ['80:80']\n", "services.client.ports must be left out"),
        (
            TB_CLIENT + "      - /srv/data:/data\n",
            "services.client.volumes must be left out (Proctor mounts only the log folders",
        ),
        (
            TB_CLIENT + "      - {type: bind, source: /srv, target: /srv}\n",
            "services.client.volumes must be left out",
        ),
        (
            TB_CLIENT.replace("sleep infinity", "python3 -m http.server"),
            'services.client.command must be left out, or "sleep infinity"',
        ),
        (
            TB_CLIENT + "    environment:\n      - KEY=${API_KEY}\n",
            "docker-compose.yaml: uses ${API_KEY}, which Proctor does not set",
        ),
        (
            TB_CLIENT + "    environment: KEY=1\n",
            "services.client.environment must be a table or a list of NAME=value",
        ),
        (
            TB_CLIENT + "  db:\n    image: x\n    environment: [1, 2]\n",
            "services.db.environment must be a table or a list of NAME=value",
        ),
        (
            TB_CLIENT + "  db:\n    image: x\n    networks: [back]\n",
            "services.db.networks must be left out (Proctor does not apply it)",
        ),
        (
            TB_CLIENT + "    depends_on:\n      db:\n        condition: service_healthy\n"
            "  db:\n    image: x\n",
            "services.db.healthcheck must be set, as client waits for it to be healthy",
        ),
    ],
)
def test_a_terminal_bench_compose_file_is_checked(
    tmp_path: Path, compose: str, expected: str
) -> None:
    folder = write(
        tmp_path / "tb",
        {
            "task.yaml": "instruction: go\n",
            "Dockerfile": "FROM x\n",
            "run-tests.sh": "",
            "docker-compose.yaml": compose,
        },
    )
    with pytest.raises(DefinitionError) as caught:
        tasks(tmp_path)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
    assert str(folder) in message


def test_a_terminal_bench_client_may_run_a_given_image_or_default_a_variable(
    tmp_path: Path,
) -> None:
    write(
        tmp_path / "tb",
        {
            "task.yaml": "instruction: go\n",
            "run-tests.sh": "",
            "docker-compose.yaml": (
                "services:\n  client:\n    image: team/tool:1\n    environment:\n"
                "      MODE: ${MODE:-fast}\n      PRICE: $$5\n"
            ),
        },
    )
    (the_case,) = tasks(tmp_path)
    assert (the_case.task.docker_image, the_case.task.dockerfile) == ("team/tool:1", None)
    assert the_case.task.env == {"MODE": "fast", "PRICE": "$5"}


def test_task_cases_are_refused_under_a_sandbox_without_images() -> None:
    cases = tasks(FOLDERS)
    the_suite = suite(
        "t",
        cases=cases,
        variants=[variant("oracle"), variant("oracle", name="in-docker", sandbox="docker")],
    )

    messages = [p.message for p in suite_problems(the_suite, "t.eval.py")]
    assert messages == [
        "variant oracle: task cases run in their task's image, which the local sandbox cannot "
        'hold; give the variant sandbox="docker"'
    ]


def test_the_oracle_is_refused_for_an_ordinary_case() -> None:
    the_suite = suite(
        "t",
        prompt="p",
        cases=[case("plain", validate=command("true"))],
        variants=[variant("oracle", sandbox="docker")],
    )
    messages = [p.message for p in suite_problems(the_suite, "t.eval.py")]
    assert any("case plain is not a task case" in m for m in messages)


def test_an_edited_test_makes_a_new_case_version(tmp_path: Path) -> None:
    folder = harbor(tmp_path / "task")
    (tmp_path / "t.eval.py").write_text("")
    the_suite = suite("t", cases=tasks(folder), variants=[variant("oracle", sandbox="docker")])
    before = resolve_case(the_suite, the_suite.cases[0], tmp_path / "t.eval.py")
    (folder / "tests" / "test.sh").write_text("echo 0 > /logs/verifier/reward.txt\n")
    after = resolve_case(the_suite, the_suite.cases[0], tmp_path / "t.eval.py")

    assert before.definition_hash != after.definition_hash
    assert before.definition["task"]["folder"] == "${PROCTOR_PROJECT}/task"


def test_the_task_folders_travel_with_the_bundle(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "pyproject.toml").parent.mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    shutil.copytree(FOLDERS / "two-rewards", project / "benchmark" / "two-rewards")
    eval_file = (
        write(
            project / "evals",
            {
                "bench.eval.py": """
            from proctor import suite, tasks, variant

            bench = suite("bench", cases=tasks("../benchmark"), variants=[variant("oracle", sandbox="docker")])
            """
            },
        )
        / "bench.eval.py"
    )
    loaded = load_file(eval_file)
    the_suite = loaded.suites[0]
    planned = [
        Planned(
            resolved=resolve_case(the_suite, c, eval_file),
            variants=list(the_suite.variants),
            trials=1,
        )
        for c in the_suite.cases
    ]

    submission = build_submission(planned, {}, max_bytes=10 << 20)

    digest = submission.value["cases"][0]["bundle"]
    with tarfile.open(fileobj=io.BytesIO(submission.bundles[digest].data)) as archive:
        names = set(archive.getnames())
    for name in (
        "benchmark/two-rewards/task.toml",
        "benchmark/two-rewards/tests/test.sh",
        "benchmark/two-rewards/solution/solve.sh",
        "benchmark/two-rewards/environment/Dockerfile",
        "benchmark/two-rewards/environment/notes.txt",
    ):
        assert name in names


def test_a_worker_finds_the_task_in_its_copy_of_the_project(tmp_path: Path) -> None:
    harbor(tmp_path / "task", "[verifier]\ntimeout_sec = 9\n")
    (tmp_path / "t.eval.py").write_text("")
    the_suite = suite("t", cases=tasks(tmp_path), variants=[variant("oracle", sandbox="docker")])
    recorded = resolve_case(the_suite, the_suite.cases[0], tmp_path / "t.eval.py")
    elsewhere = tmp_path / "worker-copy"

    rebuilt = rebuilt_case(
        recorded.definition,
        recorded.definition_hash,
        {},
        module_path=elsewhere / "t.eval.py",
        project=elsewhere,
    )

    assert rebuilt.case.task.folder == str(elsewhere / "task")
    assert rebuilt.case.task.verifier_timeout_s == 9
    assert rebuilt.case.validate == ()


def test_a_multi_step_task_reads_its_steps() -> None:
    (the_case,) = tasks(FOLDERS, include="three-steps")
    steps = the_case.task.steps

    assert [s.name for s in steps] == ["scaffold", "implement", "finish"]
    assert the_case.variables["instruction"] == steps[0].instruction
    assert [s.min_reward for s in steps] == [1.0, 1.0, None]
    assert steps[0].healthcheck.command == "test -f /app/ready.txt"
    assert (steps[0].healthcheck.interval_s, steps[0].healthcheck.retries) == (0.2, 5)
    assert steps[1].verifier_env == {"WANT": "two"}
    assert the_case.timeout_ms == (30 + 600 + 600) * 1000  # every step's own limit
    recorded = the_case.task.to_definition()
    assert type(the_case.task).from_definition(recorded) == the_case.task


def test_the_build_limit_and_keywords_are_read(tmp_path: Path) -> None:
    harbor(
        tmp_path / "t",
        '[task]\nkeywords = ["sql"]\n[metadata]\ntags = ["db"]\n'
        "[environment]\nbuild_timeout_sec = 90\n",
    )
    (the_case,) = tasks(tmp_path)
    assert the_case.task.build_timeout_s == 90
    assert the_case.tags == ("db", "sql")
