"""The e2b sandbox keeps the promises of every sandbox (tests/sandboxes/test_every_sandbox.py
run on it, against the fake E2B of tests/fakes/e2b_server.py), and what is its own: the files
travel both ways around each step, E2B's lifetime for it is renewed for a long step, and
destroy kills it at the provider."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes.e2b_server import FakeE2B

from proctor import variant
from runner.sandboxes import create_sandbox
from runner.sandboxes.e2b_remote import LIFETIME_MARGIN_S, E2BSandbox
from sandboxes import test_every_sandbox as every


@pytest.fixture(scope="module")
def fake_e2b() -> Iterator[FakeE2B]:
    with FakeE2B(templates=("proctor-base",)) as fake, pytest.MonkeyPatch.context() as patch:
        for name, value in fake.sdk_env().items():
            patch.setenv(name, value)
        yield fake


@pytest.fixture
def sandbox(fake_e2b: FakeE2B) -> Iterator[E2BSandbox]:
    box = create_sandbox(variant("command", sandbox="e2b", template="proctor-base"))
    assert isinstance(box, E2BSandbox)
    yield box
    box.destroy()


# Every promise but the runner kit on python3's path, which is the template's to install.
PROMISES = [
    every.test_it_runs_in_the_workspace_with_its_own_home,
    every.test_it_reports_the_exit_code,
    every.test_it_closes_stdin,
    every.test_it_does_not_leak_the_workers_environment,
    every.test_it_streams_lines_as_they_come,
    every.test_a_timeout_kills_the_whole_process_tree,
    every.test_a_background_child_does_not_outlive_a_normal_exit,
    every.test_files_stay_inside_the_workspace,
    every.test_a_missing_program_is_an_exit_code_not_a_crash,
    every.test_destroy_removes_every_folder,
]


@pytest.mark.parametrize("promise", PROMISES, ids=[p.__name__ for p in PROMISES])
def test_it_keeps_the_promise_of_every_sandbox(promise, sandbox, monkeypatch) -> None:
    if "monkeypatch" in promise.__code__.co_varnames[: promise.__code__.co_argcount]:
        promise(sandbox, monkeypatch)
    else:
        promise(sandbox)


def test_files_travel_both_ways_around_a_step(sandbox: E2BSandbox, fake_e2b: FakeE2B) -> None:
    sandbox.write_text("in/given.txt", "from the worker\n")
    result = sandbox.run(["bash", "-c", "cat in/given.txt; rm in/given.txt; echo made > out.txt"])
    assert result.stdout == "from the worker\n"
    assert sandbox.read_text("out.txt") == "made\n"
    assert not sandbox.exists("in/given.txt"), "a file deleted remotely stays on the worker"


def test_a_long_step_renews_the_sandboxs_lifetime_at_the_provider(
    sandbox: E2BSandbox, fake_e2b: FakeE2B
) -> None:
    (remote,) = [fake_e2b.sandboxes[i] for i in fake_e2b.running() if i == sandbox.remote_id]
    first_end = remote.ends_at
    sandbox.run(["true"], timeout_s=10)
    assert remote.ends_at == first_end, "a short step needs no renewal"
    sandbox.run(["true"], timeout_s=3 * LIFETIME_MARGIN_S)
    assert remote.ends_at >= first_end + 2 * LIFETIME_MARGIN_S


def test_destroy_kills_it_at_the_provider(sandbox: E2BSandbox, fake_e2b: FakeE2B) -> None:
    remote_id = sandbox.remote_id
    assert remote_id in fake_e2b.running()
    sandbox.destroy()
    assert remote_id not in fake_e2b.running()
    assert remote_id in fake_e2b.killed
