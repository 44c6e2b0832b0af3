"""``similar`` and ``not-similar`` through `proctor eval`: the output's and the value's
embeddings come from the model endpoint (scripted vectors here), their cosine similarity is
held to the threshold (0.75 unless set), and an endpoint that cannot embed fails the check
saying so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import proctor_env
from e2e.running import Backend, only_run, write_eval
from fakes.openai_server import EMBEDDINGS, FakeModelServer, Reply

ANSWER = "Your order ships tomorrow."
EXPECTED = "The order leaves the warehouse tomorrow."
UNRELATED = "We cannot refund you."

EVAL = """
from proctor import assertion, case, suite, variant

checks = suite(
    "similarity",
    prompt="Where is my order?",
    cases=[
        case("default-threshold", validate=[assertion("similar", {expected!r})]),
        case("strict-threshold", validate=[assertion("similar", {expected!r}, threshold=0.9)]),
        case("any-of", validate=[assertion("similar", [{unrelated!r}, {expected!r}])]),
        case("not-similar", validate=[assertion("not-similar", {unrelated!r})]),
        case("not-similar-fails", validate=[assertion("not-similar", {expected!r})]),
        case("named-model", validate=[
            assertion("similar", {expected!r}, grader="text-embedding-3-small")]),
    ],
    variants=[variant("chat", model="fake-agent")],
)
"""


def agent(_body: dict[str, Any]) -> str:
    return ANSWER


def run_similarity_eval(tmp_path: Path, server: FakeModelServer, *args: str) -> dict[str, Any]:
    """`proctor eval --json ARGS` on EVAL, with ``server`` as the project's model endpoint."""
    write_eval(
        tmp_path / "project",
        "similarity.eval.py",
        EVAL.format(expected=EXPECTED, unrelated=UNRELATED),
    )
    backend = Backend("sqlite", proctor_env(tmp_path / "home", PROCTOR_LLM_BASE_URL=server.url))
    return backend.eval_json(tmp_path / "project", *args)


def test_similarity_is_the_cosine_of_the_endpoints_embeddings_against_the_threshold(
    tmp_path,
) -> None:
    with FakeModelServer() as server:
        server.script(*[agent] * 6)
        # cos(answer, expected) = 0.8; the unrelated text is orthogonal to the answer.
        server.embed_as(ANSWER, [1.0, 0.0, 0.0])
        server.embed_as(EXPECTED, [0.8, 0.6, 0.0])
        server.embed_as(UNRELATED, [0.0, 0.0, 1.0])
        report = run_similarity_eval(tmp_path, server, "-j", "1")
        models = [r.body["model"] for r in server.requests_to(EMBEDDINGS)]

    def graded(case: str) -> tuple[bool, float, str]:
        ((check,),) = [t["checks"] for t in only_run(report, case)["trials"]]
        return check["passed"], round(check["score"], 6), check["message"]

    assert graded("default-threshold") == (
        True,
        0.8,
        "similarity 0.80 is at least the threshold 0.75",
    )
    assert graded("strict-threshold") == (False, 0.8, "similarity 0.80 is below the threshold 0.9")
    assert graded("any-of")[:2] == (True, 0.8)
    # not-similar scores 1 - similarity, and fails once the output is too close.
    assert graded("not-similar") == (True, 1.0, "similarity 0.00 is at most the threshold 0.75")
    assert graded("not-similar-fails")[:2] == (False, 0.2)
    # promptfoo's default embedding model, unless the assertion names its grader.
    assert models.count("text-embedding-3-small") == 1
    assert models.count("text-embedding-3-large") == 5


def test_an_endpoint_that_cannot_embed_fails_the_check_saying_so(tmp_path) -> None:
    with FakeModelServer() as server:
        server.script(agent)
        server.script(
            Reply(status=404, body={"error": {"message": "no embeddings here"}}), route=EMBEDDINGS
        )
        report = run_similarity_eval(tmp_path, server, "--case", "default-threshold")

    ((check,),) = [t["checks"] for t in only_run(report, "default-threshold")["trials"]]
    assert check["passed"] is False
    assert "/v1/embeddings answered 404" in check["message"]
    assert "no embeddings here" in check["message"]
