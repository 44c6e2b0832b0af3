"""Two task folders run natively: a Harbor task (task.toml) and a Terminal-Bench 1 task
(task.yaml), each in its own image with its hidden tests run after the agent.

The oracle runs each task's reference solution (it should pass: the task is solvable and its
image builds); "idle" is an agent that does nothing (it should fail). Needs a Docker engine
with proctor-base:latest (tests/setup/docker.sh builds it offline); the tasks' FROM
ubuntu:24.04 is mapped onto it, as a team without registry access would.
"""

from proctor import profile, suite, tasks, variant

benchmark = suite(
    "task-folders",
    cases=tasks(".", images={"ubuntu:24.04": "proctor-base:latest"}),
    variants=[
        variant("oracle", sandbox="docker"),
        variant("command", name="idle", profile=profile("idle", run="true"), sandbox="docker"),
    ],
)
