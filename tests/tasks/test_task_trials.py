"""Task cases run in their own images (issue 30): the oracle passes every task, an agent that
does nothing fails every one, the verifier's rewards and per-test results become checks, a
verifier error says so, the agent never sees the tests or the solution, and the task's image,
workdir, limits, env, user and network are applied.

Every image is built once per session (``built_images``); later sessions reuse the tags."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import proctor_env, tier_unavailable
from e2e.running import Backend, write_eval

from evals_app.resolution import resolve_case
from proctor import profile, suite, tasks, variant
from proctor.definitions import Case, Variant
from runner.core.reporting import MemoryRecorder
from runner.sandboxes.docker import DEFAULT_IMAGE, docker_problem
from runner.sandboxes.engine import client
from runner.sandboxes.task_container import TaskSandbox
from runner.sandboxes.task_images import service_image, task_image
from runner.trial.execute import TrialPlan, execute_trial

pytestmark = pytest.mark.docker

HERE = Path(__file__).resolve().parent
FOLDERS = HERE / "folders"
BROKEN = HERE / "broken"
# The public names the tasks start FROM, mapped onto the offline base image.
IMAGES = {
    "ubuntu:24.04": DEFAULT_IMAGE,
    "python:3.13-slim-bookworm": DEFAULT_IMAGE,
}
ORACLE = variant("oracle", sandbox="docker")
NOTHING = variant(
    "command", name="nothing", profile=profile("nothing", run="true"), sandbox="docker"
)
# Looks for the tests and the solution, and plants a reward for the verifier to find.
SNOOP = variant(
    "command",
    name="snoop",
    profile=profile(
        "snoop",
        run=(
            "{ ls /tests /solution; cat /tests/test.sh; find / -name test.sh -path '*tests*' "
            "-not -path '/proc/*' 2>/dev/null; } > seen.txt 2>&1; "
            "echo 1 > /logs/verifier/reward.txt"
        ),
    ),
    sandbox="docker",
)
# What the tasks whose verifier itself is broken end with, for every agent.
VERIFIER_ERRORS = {
    "no-reward": "verifier error: tests/test.sh wrote no reward (/logs/verifier/reward.txt or "
    "reward.json); its output ends: checked, but I forgot the reward",
    "slow-verifier": "verifier error: tests/test.sh ran past its 2 s limit",
}


@pytest.fixture(scope="session")
def built_images() -> dict[str, str]:
    """Every fixture task's image, built (or found) once: the task's id -> its image."""
    if problem := docker_problem(DEFAULT_IMAGE):
        tier_unavailable("docker", problem)
    engine = client()
    return {c.id: task_image(c.task, engine).name for c in tasks(FOLDERS, images=IMAGES)}


def run(the_case: Case, the_variant: Variant, tmp_path: Path) -> MemoryRecorder:
    the_suite = suite("tasks", cases=[the_case], variants=[the_variant])
    plan = TrialPlan(
        resolved=resolve_case(the_suite, the_case, Path(__file__)),
        variant=the_variant,
        index=0,
        cache_root=tmp_path / "cache",
        git_host="https://git.invalid",
    )
    recorder = MemoryRecorder()
    execute_trial(plan, recorder)
    return recorder


def task_case(name: str) -> Case:
    return tasks(FOLDERS, images=IMAGES, include=name)[0]


def checks(recorder: MemoryRecorder) -> list[tuple[str, str, bool, float | None]]:
    return [(c.kind, c.name, c.passed, c.score) for c in recorder.checks]


@pytest.mark.parametrize(
    "name", ["two-rewards", "tb-count", "hidden-tests", "three-steps", "compose-api", "tb-compose"]
)
def test_the_oracle_passes_and_doing_nothing_fails(name: str, built_images, tmp_path: Path) -> None:
    solved = run(task_case(name), ORACLE, tmp_path)
    assert solved.outcome.status == "passed", (solved.outcome.error, solved.logs[-5:])
    assert solved.outcome.score == 1.0

    idle = run(task_case(name), NOTHING, tmp_path)
    assert idle.outcome.status == "failed", idle.outcome.error
    assert idle.outcome.score == 0.0


def test_two_named_rewards_and_ctrf_results_are_checks(built_images, tmp_path: Path) -> None:
    solved = run(task_case("two-rewards"), ORACLE, tmp_path)
    assert checks(solved) == [
        ("reward", "greeting", True, 1.0),
        ("reward", "notes_kept", True, 1.0),
        ("test", "test_greeting_written", True, None),
        ("test", "test_notes_kept", True, None),
    ]
    assert solved.checks[2].message == "greeting.txt holds: hello from the task"
    assert json.loads(solved.artifacts["logs/verifier/reward.json"]) == {
        "greeting": 1,
        "notes_kept": 1,
    }
    assert "greeting=1 notes=1" in solved.artifacts["verifier/output.log"]
    # The task's listed artifacts and the agent's logs are kept; a missing one is said.
    assert solved.artifacts["artifacts/app/greeting.txt"] == "hello from the task"
    assert solved.artifacts["logs/agent/oracle.log"] == "solved\n"
    assert "artifact /app/absent.txt: not in the container" in solved.logs

    idle = run(task_case("two-rewards"), NOTHING, tmp_path)
    assert checks(idle)[:2] == [
        ("reward", "greeting", False, 0.0),
        ("reward", "notes_kept", True, 1.0),
    ]
    assert idle.checks[0].message == "reward 0 < 1"
    assert idle.checks[2].message == "greeting.txt holds: nothing"


def test_a_lower_reward_threshold_passes_a_partial_reward(built_images, tmp_path: Path) -> None:
    the_case = tasks(FOLDERS, images=IMAGES, include="two-rewards", reward_threshold=0.0)[0]
    assert run(the_case, NOTHING, tmp_path).outcome.status == "passed"


def test_terminal_bench_pytest_results_are_checks(built_images, tmp_path: Path) -> None:
    idle = run(task_case("tb-count"), NOTHING, tmp_path)

    assert checks(idle) == [
        ("reward", "tests", False, 0.0),
        ("test", "tests/test_outputs.py::test_count_file_exists", False, None),
        ("test", "tests/test_outputs.py::test_count_is_right", False, None),
    ]
    assert idle.checks[1].message == "count.txt is missing"


@pytest.mark.parametrize("name", sorted(VERIFIER_ERRORS))
def test_a_broken_verifier_is_a_verifier_error_for_every_agent(
    name: str, built_images, tmp_path: Path
) -> None:
    for the_variant in (ORACLE, NOTHING):
        outcome = run(task_case(name), the_variant, tmp_path).outcome
        assert (outcome.status, outcome.finish_reason) == ("errored", "verifier error")
        assert outcome.error == VERIFIER_ERRORS[name]


def test_the_agent_never_sees_the_tests_or_the_solution(built_images, tmp_path: Path) -> None:
    snooped = run(task_case("hidden-tests"), SNOOP, tmp_path)

    # The reward it planted was cleared before the verifier ran.
    assert snooped.outcome.status == "failed"
    diff = snooped.artifacts["workspace.diff"]
    assert "ls: cannot access '/tests': No such file or directory" in diff
    assert "ls: cannot access '/solution': No such file or directory" in diff
    assert "marmalade" not in diff


def test_an_unobtainable_from_is_one_line_naming_it_and_the_map(tmp_path: Path) -> None:
    if problem := docker_problem(DEFAULT_IMAGE):
        tier_unavailable("docker", problem)
    the_case = tasks(BROKEN / "unbuildable-from", images=IMAGES)[0]

    outcome = run(the_case, ORACLE, tmp_path).outcome

    assert outcome.status == "errored"
    assert outcome.error == (
        "task unbuildable-from: Dockerfile starts FROM registry.invalid/nowhere/base:1.0, which "
        "is not on this engine and is never pulled; map it onto a local image: tasks(..., "
        'images={"registry.invalid/nowhere/base:1.0": "proctor-base:latest"}), or '
        "PROCTOR_IMAGE_MAP=registry.invalid/nowhere/base:1.0=proctor-base:latest for the worker"
    )


def test_an_image_is_built_once_per_digest(built_images, monkeypatch) -> None:
    from runner.sandboxes import task_images

    def no_build(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(task_images, "_build", no_build)
    again = {c.id: task_image(c.task, client()).name for c in tasks(FOLDERS, images=IMAGES)}
    assert again == built_images
    assert built_images["no-reward"] == built_images["slow-verifier"]  # the same Dockerfile


def test_the_worker_map_maps_a_from_too(built_images, monkeypatch) -> None:
    monkeypatch.setenv("PROCTOR_IMAGE_MAP", json.dumps(IMAGES))
    found = {c.id: task_image(c.task, client()).name for c in tasks(FOLDERS)}
    assert found == built_images


def write_task(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return folder


@pytest.fixture
def shaped_sandbox(built_images, tmp_path: Path) -> Iterator[TaskSandbox]:
    """A container of a task that names a docker_image, a workdir, limits, env and a user."""
    folder = write_task(
        tmp_path / "shaped",
        {
            "task.toml": """
                [agent]
                user = "65534"
                [environment]
                docker_image = "example.invalid/team/base:2"
                workdir = "/srv/work"
                cpus = 1
                memory_mb = 256
                allow_internet = false
                [environment.env]
                MARK = "set by the task"
            """,
            "instruction.md": "Look around.\n",
            "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
        },
    )
    task = tasks(folder, images={"example.invalid/team/base:2": DEFAULT_IMAGE})[0].task
    box = TaskSandbox.for_task(variant("x", sandbox="docker", network=True), task)
    yield box
    box.destroy()


def test_the_task_shapes_its_container(shaped_sandbox: TaskSandbox) -> None:
    box = shaped_sandbox
    config = box.engine.api.inspect_container(box.container_id)
    assert config["Config"]["Image"] == DEFAULT_IMAGE
    assert config["Config"]["User"] == "65534"
    assert config["HostConfig"]["NanoCpus"] == 1_000_000_000
    assert config["HostConfig"]["Memory"] == 256 << 20
    assert config["HostConfig"]["NetworkMode"] == "none"  # allow_internet = false wins

    seen = box.run(["sh", "-c", 'id -u; pwd; echo "$MARK"; ls /sys/class/net; touch here'])
    assert seen.stdout.split("\n")[:4] == ["65534", "/srv/work", "set by the task", "lo"]
    assert (box.host_workspace / "here").exists()
    assert box.run(["id", "-u"], user="0").stdout.strip() == "0"


def test_the_workspace_starts_with_the_images_workdir(built_images, tmp_path: Path) -> None:
    task = task_case("two-rewards").task
    box = TaskSandbox.for_task(NOTHING, task)
    try:
        assert box.workspace == "/app"
        assert (box.host_workspace / "notes.txt").read_text() == "these notes must stay\n"
        assert box.run(["cat", "notes.txt"]).stdout == "these notes must stay\n"
    finally:
        box.destroy()


def test_proctor_eval_runs_a_folder_of_tasks(built_images, tmp_path: Path) -> None:
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    project = tmp_path / "project"
    write_eval(
        project,
        "bench.eval.py",
        f"""
        from proctor import profile, suite, tasks, variant

        bench = suite(
            "bench",
            cases=tasks({str(FOLDERS)!r}, images={IMAGES!r}, include=["two-rewards", "tb-count"]),
            variants=[
                variant("oracle", sandbox="docker"),
                variant("command", name="nothing", profile=profile("nothing", run="true"),
                        sandbox="docker"),
            ],
        )
        """,
    )

    report = backend.eval_json(project)

    statuses = {(r["case"], r["variant"]): r["trials"][0]["status"] for r in report["runs"]}
    assert statuses == {
        ("two-rewards", "oracle:docker"): "passed",
        ("tb-count", "oracle:docker"): "passed",
        ("two-rewards", "nothing"): "failed",
        ("tb-count", "nothing"): "failed",
    }
    names = backend.rows(
        "SELECT c.kind, c.name, c.passed, c.score FROM evals_app_check c "
        "JOIN evals_app_trial t ON c.trial_id = t.id JOIN evals_app_run r ON t.run_id = r.id "
        "JOIN evals_app_variant v ON r.variant_id = v.id WHERE v.name = 'oracle:docker' "
        "ORDER BY c.trial_id, c.[index]"
    )
    assert ("reward", "greeting", 1, 1.0) in [tuple(row) for row in names]
    assert ("test", "tests/test_outputs.py::test_count_is_right", 1, None) in [
        tuple(row) for row in names
    ]


def test_steps_run_in_order_and_min_reward_stops_the_task(built_images, tmp_path: Path) -> None:
    solved = run(task_case("three-steps"), ORACLE, tmp_path)
    assert [t["index"] for t in solved.turns] == [0, 1, 2]
    conversation = json.loads(solved.artifacts["conversation.json"])
    assert [t["origin"] for t in conversation["turns"]] == [
        {"runner": "step scaffold"},
        {"runner": "step implement"},
        {"runner": "step finish"},
    ]
    assert [c.name for c in solved.checks] == [
        "scaffold: reward",
        "implement: reward",
        "finish: reward",
    ]
    assert "steps/implement/logs/verifier/reward.txt" in solved.artifacts

    idle = run(task_case("three-steps"), NOTHING, tmp_path)
    assert idle.outcome.status == "failed"
    assert idle.outcome.stop_cause == "stopped after step scaffold: reward 0 < 1"
    assert checks(idle) == [("reward", "scaffold: reward", False, 0.0)]


def test_a_step_whose_healthcheck_fails_ends_the_trial(built_images, tmp_path: Path) -> None:
    folder = write_task(
        tmp_path / "unhealthy",
        {
            "task.toml": """
                [environment]
                docker_image = "proctor-base:latest"
                [[steps]]
                name = "first"
                [steps.healthcheck]
                command = "test -e /nowhere"
                interval_sec = 0.1
                retries = 1
            """,
            "steps/first/instruction.md": "Wait.\n",
            "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
        },
    )
    outcome = run(tasks(folder)[0], ORACLE, tmp_path).outcome

    assert outcome.status == "errored"
    assert outcome.error == "step first: its healthcheck `test -e /nowhere` failed 2 times"


def left_behind(engine) -> set[str]:
    """The ids of the task service containers and trial networks on the engine (a test
    compares them before and after its trial: other processes may run tasks meanwhile)."""
    containers = engine.api.containers(all=True, filters={"label": "proctor.sandbox=task-service"})
    networks = engine.api.networks(filters={"label": "proctor.sandbox=task-network"})
    return {item["Id"] for item in [*containers, *networks]}


def test_a_compose_task_waits_for_its_healthy_service_and_tears_it_down(
    built_images, tmp_path: Path
) -> None:
    before = left_behind(client())
    # The api starts slowly: the oracle fetches at once, so it passes only if main waited.
    solved = run(task_case("compose-api"), ORACLE, tmp_path)
    assert solved.outcome.status == "passed", solved.outcome.error
    assert left_behind(client()) <= before


def test_a_terminal_bench_compose_task_runs_its_client_beside_its_service(
    built_images, tmp_path: Path
) -> None:
    engine = client()
    the_case = task_case("tb-compose")
    (store,) = the_case.task.services
    ours = {built_images["tb-compose"], service_image(the_case.task, store, engine)}

    def on_the_engine() -> tuple[set[str], set[str]]:
        """This task's containers (by their images, which no other test runs) and the
        trial networks."""
        containers = {c["Id"] for c in engine.api.containers(all=True) if c["Image"] in ours}
        networks = engine.api.networks(filters={"label": "proctor.sandbox=task-network"})
        return containers, {n["Id"] for n in networks}

    containers, networks = on_the_engine()
    # The store starts slowly: the oracle stores at once, so it passes only if client waited.
    solved = run(the_case, ORACLE, tmp_path)
    assert solved.outcome.status == "passed", (solved.outcome.error, solved.logs[-5:])
    assert checks(solved)[1] == (
        "test",
        "tests/test_outputs.py::test_the_store_keeps_the_greeting",
        True,
        None,
    )
    idle = run(the_case, NOTHING, tmp_path)
    assert idle.checks[1].message == "the store answers 404 for /greeting"

    after, networks_after = on_the_engine()
    assert after <= containers
    assert networks_after <= networks


def test_an_unhealthy_service_errors_the_trial_in_one_line(built_images, tmp_path: Path) -> None:
    folder = write_task(
        tmp_path / "sick",
        {
            "task.toml": '[environment]\ndocker_image = "proctor-base:latest"\n',
            "instruction.md": "Wait.\n",
            "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
            "environment/docker-compose.yaml": """
                services:
                  main:
                    depends_on:
                      db:
                        condition: service_healthy
                  db:
                    image: proctor-base:latest
                    command: sleep 60
                    healthcheck:
                      test: ["CMD", "false"]
                      interval: 100ms
                      retries: 1
            """,
        },
    )
    before = left_behind(client())
    outcome = run(tasks(folder)[0], ORACLE, tmp_path).outcome

    assert outcome.status == "errored"
    assert outcome.error == (
        "task sick: service db is unhealthy, and main waits for it to be healthy"
    )
    assert left_behind(client()) <= before


def test_a_rerun_runs_the_bundled_task_after_its_folder_is_gone(
    built_images, tmp_path: Path
) -> None:
    from e2e.test_bundles_and_reruns import rerun

    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "bench"\n')
    shutil.copytree(FOLDERS / "two-rewards", project / "benchmark" / "two-rewards")
    write_eval(
        project / "evals",
        "bench.eval.py",
        f"""
        from proctor import suite, tasks, variant

        bench = suite(
            "bench",
            cases=tasks("../benchmark", images={IMAGES!r}),
            variants=[variant("oracle", sandbox="docker")],
        )
        """,
    )
    first = backend.eval_json(project)
    assert [t["status"] for t in first["runs"][0]["trials"]] == ["passed"]

    shutil.rmtree(project / "benchmark")
    report = rerun(backend, first["batch"], tmp_path / "elsewhere", forget_unpacked=True)

    assert [t["status"] for t in report["runs"][0]["trials"]] == ["passed"]
