"""The client `proctor eval --server` uses, against scripted server answers: it uploads only what
is missing, follows the batch, and turns every failure into lines a person reads."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass

import httpx
import pytest

from runner.batches.remote import ProctorServer, RemoteError, server_url

URL = "http://proctor.test"


@dataclass
class FakeBundle:
    kind: str
    data: bytes


def server(handler, **kwargs) -> ProctorServer:
    return ProctorServer(URL, "key-1", transport=httpx.MockTransport(handler), **kwargs)


def answer(code: int, body) -> httpx.Response:
    return httpx.Response(code, json=body)


def refused_with(code: int, body) -> str:
    with pytest.raises(RemoteError) as raised, server(lambda request: answer(code, body)) as s:
        s.submit({"format": 1})
    return str(raised.value)


def test_it_uploads_only_the_bundles_the_server_lacks():
    seen: list[tuple[str, str, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), request.content))
        assert request.headers["Authorization"] == "Token key-1"
        if request.url.path == "/api/bundles/missing/":
            assert json.loads(request.content) == {"organization": "acme", "digests": ["a", "b"]}
            return answer(200, {"missing": ["b"]})
        return answer(201, {"digest": "b", "kind": "git", "size": 3})

    bundles = {"a": FakeBundle("tree", b"aa"), "b": FakeBundle("git", b"bbb")}
    with server(handler, organization="acme") as s:
        uploaded = s.upload_bundles(bundles)

    assert (uploaded.new, uploaded.present, uploaded.bytes) == (1, 1, 3)
    assert seen[1] == ("PUT", f"{URL}/api/bundles/b/?organization=acme&kind=git", b"bbb")
    assert len(seen) == 2


def test_it_sends_nothing_when_a_bundle_is_over_the_servers_limit():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        return answer(200, {"missing": ["a", "b"], "max_bytes": 2 * 1024 * 1024})

    bundles = {"a": FakeBundle("tree", b"a"), "b": FakeBundle("tree", b"b" * 3 * 1024 * 1024)}
    with pytest.raises(RemoteError) as raised, server(handler) as s:
        s.upload_bundles(bundles, {"b": "the profile of variant command"})

    assert str(raised.value) == (
        f"the server at {URL} accepts bundles of at most 2.0 MB (its PROCTOR_BUNDLE_MAX_MB) and "
        "the profile of variant command is 3.0 MB compressed: leave large files out with a .proctorignore"
    )
    assert seen == ["POST"]


def test_it_follows_the_batch_until_it_finishes():
    answers = iter(
        [
            {"status": "queued", "trial_counts": {"total": 2, "queued": 2, "passed": 0}},
            {"status": "running", "trial_counts": {"total": 2, "passed": 1, "running": 1}},
            {"status": "finished", "trial_counts": {"total": 2, "passed": 1, "failed": 1}},
        ]
    )
    progress = []

    with server(lambda request: answer(200, next(answers))) as s:
        s.wait(7, progress.append, sleep=lambda s: None)

    assert [p.get("passed", 0) + p.get("failed", 0) for p in progress] == [0, 1, 2]


def test_it_names_an_unreachable_server():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    with pytest.raises(RemoteError) as raised, ProctorServer(f"http://127.0.0.1:{port}", "k") as s:
        s.report(1)

    assert str(raised.value).startswith(
        f"cannot reach the Proctor server at http://127.0.0.1:{port}: "
    )
    assert "\n" not in str(raised.value)


def test_it_says_the_token_was_refused():
    message = refused_with(403, {"detail": "Invalid token."})

    assert message.startswith(f"the server at {URL} refused the token (Invalid token.)")
    assert "proctor createtoken" in message


def test_it_passes_on_the_servers_organization_sentence():
    assert refused_with(404, {"detail": "no organization globex for this user"}) == (
        f"the server at {URL} answered: no organization globex for this user"
    )


def test_it_says_a_bundle_was_too_large():
    assert "too large: the server accepts" in refused_with(
        413, {"detail": "the server accepts bundles of at most 1.0 MB"}
    )


def test_it_lists_the_servers_problems_one_per_line():
    with (
        pytest.raises(RemoteError) as raised,
        server(
            lambda request: answer(
                400, {"problems": ["case a: owned by suite b", "bundle c was not uploaded"]}
            )
        ) as s,
    ):
        s.submit({"format": 1})

    assert raised.value.lines == ["case a: owned by suite b", "bundle c was not uploaded"]


def test_it_says_when_the_url_is_not_a_proctor_server():
    def handler(request):
        return httpx.Response(200, text="<html>hello</html>", headers={"content-type": "text/html"})

    with pytest.raises(RemoteError) as raised, server(handler) as s:
        s.report(1)

    assert "is not Proctor's API" in str(raised.value)


def test_it_refuses_a_server_address_that_is_not_http():
    with pytest.raises(RemoteError) as raised:
        server_url("proctor.example.com")

    assert (
        str(raised.value)
        == "--server must be an http:// or https:// URL, not 'proctor.example.com'"
    )
