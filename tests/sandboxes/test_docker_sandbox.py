"""The docker sandbox's own promises: the limits a variant sets, the image it names (never
pulled), no process left between steps, and no container left after destroy (removed off the
trial's path, before its process exits, or by the watchdog of a Proctor that was killed)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import REPO

from runner.sandboxes import SandboxError, create_sandbox
from sandboxes.conftest import require_kind

pytestmark = pytest.mark.docker


@pytest.fixture
def engine():
    require_kind("docker")
    import docker

    client = docker.from_env()
    yield client
    client.close()


def test_it_applies_the_variants_limits(open_sandbox, engine) -> None:
    box = open_sandbox("docker", cpus=1.5, memory="256m", pids=64)
    host_config = engine.api.inspect_container(box.container_id)["HostConfig"]
    assert host_config["NanoCpus"] == 1_500_000_000
    assert host_config["Memory"] == 256 * 1024 * 1024
    assert host_config["PidsLimit"] == 64
    assert host_config["NetworkMode"] == "none"
    assert host_config["ReadonlyRootfs"] is True
    inside = box.run(
        [
            "bash",
            "-c",
            "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max",
        ]
    )
    assert inside.stdout.strip() == "64"


def test_it_uses_the_host_network_only_when_allowed(open_sandbox, engine) -> None:
    box = open_sandbox("docker", network=True)
    assert engine.api.inspect_container(box.container_id)["HostConfig"]["NetworkMode"] == "host"


def test_no_process_of_a_timed_out_step_is_left_in_the_container(open_sandbox, engine) -> None:
    box = open_sandbox("docker")
    result = box.run(["bash", "-c", "sleep 300 & sleep 301 & sleep 302"], timeout_s=2)
    assert result.timed_out
    commands = [row[-1] for row in engine.api.top(box.container_id)["Processes"]]
    assert not any("sleep 30" in command for command in commands), commands
    # The container itself still serves the next step.
    assert box.run(["true"]).exit_code == 0


def test_its_steps_need_no_engine_exec(open_sandbox, engine) -> None:
    box = open_sandbox("docker")
    agent = box.run(
        ["sh", "-c", 'echo "$PWD $GREETING"; echo oops >&2; exit 3'], env={"GREETING": "hi there"}
    )
    assert (agent.exit_code, agent.stdout, agent.stderr) == (
        3,
        f"{box.workspace} hi there\n",
        "oops\n",
    )
    assert box.run(["true"]).exit_code == 0
    # The container's step server ran both: the engine made no exec (each costs 40-60 ms).
    assert not engine.api.inspect_container(box.container_id)["ExecIDs"]


def test_a_variable_a_shell_cannot_export_still_reaches_the_program(open_sandbox) -> None:
    box = open_sandbox("docker")
    result = box.run(["env"], env={"npm_config_dry-run": "true"})
    assert "npm_config_dry-run=true" in result.stdout.splitlines()


# A step that kills the container's step server and leaves a process in its place that answers
# every request with success.
POSING_AS_THE_SERVER = r"""
for p in /proc/[0-9]*; do
  if tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q step-server; then kill -9 "${p#/proc/}"; fi
done
d=$(ls -d "$HOME"/../steps)
setsid sh -c 'exec 3<"$1/requests"; while read -r t <&3; do echo 0 >"$1/exit-$t"; done' fake "$d" &
sleep 0.2
"""


def test_a_step_that_kills_the_step_server_errors_the_trial_and_answers_for_nothing(
    open_sandbox,
) -> None:
    box = open_sandbox("docker")
    with pytest.raises(SandboxError, match="container ended during a step"):
        box.run(["sh", "-c", POSING_AS_THE_SERVER])
    with pytest.raises(SandboxError):
        box.run(["sh", "-c", "echo checked; exit 0"])


SIGNAL_MASKS = ["sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status"]


def test_a_step_gets_the_signals_an_engine_exec_gets(open_sandbox) -> None:
    """The step server ignores and blocks nothing of its own (a shell's background job would start
    with SIGINT and SIGQUIT ignored; the server runs each step in its foreground): a step sees the
    dispositions the engine gives any process it starts, here an exec. Those may already ignore a
    signal the engine's own ancestors ignored (one CI machine's engine passed on signal 32), so the
    comparison is with an exec, not with all zeros."""
    box = open_sandbox("docker")
    by_server = box.run(SIGNAL_MASKS).stdout.split()
    by_exec = box.run(SIGNAL_MASKS, env={"npm_config_dry-run": "true"}).stdout.split()
    assert by_server[0::2] == ["SigBlk:", "SigIgn:"]
    assert by_server == by_exec


def test_destroy_removes_the_container(open_sandbox, engine) -> None:
    import docker

    from runner.sandboxes.container_removal import wait_for_removals

    box = open_sandbox("docker")
    container_id = box.container_id
    box.destroy()
    wait_for_removals()  # the removal runs off the trial's path
    with pytest.raises(docker.errors.NotFound):
        engine.api.inspect_container(container_id)


def test_two_removals_at_once_each_return_only_once_the_container_is_gone(
    open_sandbox, engine
) -> None:
    """The engine refuses a removal while another is under way (409, "removal of container ...
    is already in progress"): that is not done, so each caller waits for the container's end."""
    import docker

    from runner.sandboxes.container_removal import remove

    box = open_sandbox("docker")
    container = box.container
    both_asked = threading.Barrier(2)
    outcomes: list[tuple[bool, str]] = []

    def remove_then_look() -> None:
        both_asked.wait()
        removed = remove(container)
        try:
            engine.api.inspect_container(container.id)
            outcomes.append((removed, "still there"))
        except docker.errors.NotFound:
            outcomes.append((removed, "gone"))

    removers = [threading.Thread(target=remove_then_look) for _ in range(2)]
    for remover in removers:
        remover.start()
    for remover in removers:
        remover.join()
    assert outcomes == [(True, "gone"), (True, "gone")]


def test_a_removal_that_outlasts_the_ceiling_gives_up_in_one_line(monkeypatch, caplog) -> None:
    """A removal stuck in the engine cannot be made on demand: this container answers as the
    engine does while one is under way, and its wait for the end times out."""
    import docker
    import requests

    from runner.sandboxes import container_removal

    class RemovalUnderWay:
        id = "c0ffee" * 10 + "abcd"

        def remove(self, **_: object) -> None:
            answer = requests.Response()
            answer.status_code = 409
            raise docker.errors.APIError(
                "409 Client Error: Conflict",
                response=answer,
                explanation=f"removal of container {self.id} is already in progress",
            )

        def wait(self, **_: object) -> None:
            raise requests.exceptions.ReadTimeout("read timed out")

    monkeypatch.setattr(container_removal, "REMOVAL_CEILING_S", 0.0)
    with caplog.at_level("WARNING", logger=container_removal.__name__):
        assert not container_removal.remove(RemovalUnderWay())
    (said,) = [record.getMessage() for record in caplog.records]
    assert "c0ffeec0ffee was still being removed after 0 s; gave up" in said
    assert "\n" not in said


def test_a_removal_whose_socket_failed_under_the_client_says_so_in_one_line(caplog) -> None:
    """The connection's descriptor was closed behind the client's back (a careless ``dup2``
    elsewhere in the process did it once): the error comes up as the socket's own OSError,
    which must end in one line on the log, not in the remover's thread."""
    from runner.sandboxes import container_removal

    class SocketClosedUnderIt:
        id = "badfd0" * 10 + "abcd"

        def remove(self, **_: object) -> None:
            raise OSError(9, "Bad file descriptor")

    with caplog.at_level("WARNING", logger=container_removal.__name__):
        assert not container_removal.remove(SocketClosedUnderIt())
    (said,) = [record.getMessage() for record in caplog.records]
    assert said == (
        "could not remove docker sandbox container badfd0badfd0: [Errno 9] Bad file descriptor"
    )


# A Proctor process that makes a docker sandbox, says its container, destroys it or not, and
# exits at once or waits to be killed.
SANDBOX_OWNER = """
import sys, time
from proctor import variant
from runner.sandboxes import create_sandbox
box = create_sandbox(variant("command", sandbox="docker"))
print(box.container_id, flush=True)
if sys.argv[1] == "destroy-and-exit":
    box.destroy()
else:
    time.sleep(600)
"""


def _owner(how: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SANDBOX_OWNER, how],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_process_that_exits_right_after_destroy_leaves_no_container(engine) -> None:
    import docker

    owner = _owner("destroy-and-exit")
    container_id = owner.stdout.readline().strip()
    assert owner.wait(timeout=60) == 0
    with pytest.raises(docker.errors.NotFound):
        engine.api.inspect_container(container_id)


def test_the_container_of_a_killed_proctor_is_removed(engine) -> None:
    import docker

    owner = _owner("wait-to-be-killed")
    container_id = owner.stdout.readline().strip()
    assert engine.api.inspect_container(container_id)["State"]["Running"]
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=10)
    deadline = time.monotonic() + 30
    while True:
        try:
            engine.api.inspect_container(container_id)
        except docker.errors.NotFound:
            break
        assert time.monotonic() < deadline, "the watchdog did not remove the container"
        time.sleep(0.1)


def test_a_missing_image_is_one_sentence_and_never_pulled(engine) -> None:
    from proctor import variant

    with pytest.raises(SandboxError) as raised:
        create_sandbox(variant("command", sandbox="docker", image="proctor-no-such-image:1"))
    assert "proctor-no-such-image:1 is not on this engine" in str(raised.value)
    assert not engine.images.list(name="proctor-no-such-image")


def test_a_bad_limit_is_one_sentence(engine) -> None:
    from proctor import variant

    with pytest.raises(SandboxError, match="memory option 'lots' is not a size like 2g"):
        create_sandbox(variant("command", sandbox="docker", memory="lots"))
