"""The docker sandbox's own promises: the limits a variant sets, the image it names (never
pulled), no process left between steps, and no container left after destroy."""

from __future__ import annotations

import pytest

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


def test_destroy_removes_the_container(open_sandbox, engine) -> None:
    import docker

    box = open_sandbox("docker")
    container_id = box.container_id
    box.destroy()
    with pytest.raises(docker.errors.NotFound):
        engine.api.inspect_container(container_id)


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
