"""What bwrap and docker refuse an agent: writing outside its workspace and home, reading the
host's other files, privileges, and the network unless the variant allows it."""

from __future__ import annotations

from pathlib import Path

# Connects to the host's loopback server and prints its greeting (bash's /dev/tcp: no curl needed).
CALL_HOST = "exec 3<>/dev/tcp/127.0.0.1/{port} && head -n1 <&3"


def test_it_refuses_writes_outside_the_workspace_and_home(open_sandbox, confined_kind) -> None:
    box = open_sandbox(confined_kind)
    for target in (
        "/etc/proctor-confinement-test",
        "/usr/proctor-confinement-test",
        "/proctor-confinement-test",
    ):
        result = box.run(["bash", "-c", f"echo x > {target}"])
        assert result.exit_code != 0
        assert "Read-only file system" in result.stderr
        assert not Path(target).exists()
    assert (
        box.run(
            ["bash", "-c", 'echo x > "$HOME/ok" && echo x > "$TMPDIR/ok" && echo x > ok']
        ).exit_code
        == 0
    )


def test_it_hides_the_hosts_other_files(open_sandbox, confined_kind, tmp_path) -> None:
    secret = tmp_path / "worker-secret.txt"
    secret.write_text("the worker's own file")
    box = open_sandbox(confined_kind)
    result = box.run(["cat", str(secret)])
    assert result.exit_code != 0
    assert "the worker's own file" not in result.stdout


def test_it_runs_without_capabilities(open_sandbox, confined_kind) -> None:
    box = open_sandbox(confined_kind)
    result = box.run(["bash", "-c", "grep CapEff /proc/self/status"])
    assert result.stdout.split() == ["CapEff:", "0000000000000000"]


def test_a_loopback_call_is_refused_with_the_network_off(
    open_sandbox, confined_kind, loopback_server
) -> None:
    box = open_sandbox(confined_kind)
    result = box.run(["bash", "-c", CALL_HOST.format(port=loopback_server.port)], timeout_s=30)
    assert result.exit_code != 0
    assert "hello from the host" not in result.stdout
    assert loopback_server.accepted == 0


def test_a_loopback_call_reaches_the_host_when_the_variant_allows_the_network(
    open_sandbox, confined_kind, loopback_server
) -> None:
    box = open_sandbox(confined_kind, network=True)
    result = box.run(["bash", "-c", CALL_HOST.format(port=loopback_server.port)], timeout_s=30)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "hello from the host"
    assert loopback_server.accepted == 1


def test_it_shows_exposed_host_folders_read_only(open_sandbox, confined_kind, tmp_path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "tool.sh").write_text("echo tool ran\n")
    box = open_sandbox(confined_kind, expose=[str(tools)])
    assert box.run(["bash", str(tools / "tool.sh")]).stdout == "tool ran\n"
    result = box.run(["bash", "-c", f"echo x > {tools}/new"])
    assert result.exit_code != 0
    assert not (tools / "new").exists()
