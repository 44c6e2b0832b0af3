"""Every page carries a Content-Security-Policy that runs no script but our own files: agent
text that slipped past escaping as markup still could not run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from factories import make_batch_with_grid, make_cast

from evals_app.models import Trial

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
DIRECTIVES = {
    "default-src": {"'self'"},
    "script-src": {"'self'"},
    "img-src": {"'self'", "data:"},
    "connect-src": {"'self'", "ws:", "wss:"},
    "object-src": {"'none'"},
    "base-uri": {"'none'"},
    "frame-ancestors": {"'none'"},
}


def policy_of(response) -> dict[str, set[str]]:
    header = response.headers.get("Content-Security-Policy")
    assert header, f"no Content-Security-Policy on {response.request['PATH_INFO']}"
    directives = {}
    for part in header.split(";"):
        name, *sources = part.split()
        directives[name] = set(sources)
    return directives


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def pages(cast) -> list[str]:
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1, trials=1)
    run = batch.runs.get()
    trial = Trial.objects.get(run=run)
    case = run.case_version.case
    return [
        "/",
        f"/batches/{batch.pk}/",
        f"/batches/{batch.pk}/metrics/",
        f"/runs/{run.pk}/",
        f"/trials/{trial.pk}/",
        f"/cases/{case.pk}/",
        "/api/",
        "/api/runs/",
        "/api/docs/",
        "/api/docs/?script",
        "/runs/987654/",  # a 404
        "/?offset=99999999999999999999999",  # a 400
        "/admin/",
    ]


def test_every_page_carries_the_policy(client, cast, pages):
    client.force_login(cast.alice)
    cast.alice.is_staff = cast.alice.is_superuser = True
    cast.alice.save()
    for path in pages:
        response = client.get(path, follow=True)
        directives = policy_of(response)
        for name, sources in DIRECTIVES.items():
            assert directives.get(name) == sources, (path, name, directives.get(name))
        # Inline style attributes may stay; inline script never.
        assert "'unsafe-inline'" not in directives["script-src"]
        assert "'unsafe-eval'" not in directives.get("script-src", set())


def test_the_sign_in_page_carries_the_policy(client):
    assert policy_of(client.get("/login/"))["script-src"] == {"'self'"}


def test_an_artifact_keeps_its_stricter_sandbox_policy(client, cast, pages, tmp_path):
    trial = Trial.objects.get()
    (tmp_path / "output.log").write_text("<script>alert(1)</script>")
    trial.artifacts_dir = str(tmp_path)
    trial.save()
    client.force_login(cast.alice)

    response = client.get(f"/trials/{trial.pk}/artifacts/output.log")

    assert response.status_code == 200
    assert response["Content-Security-Policy"] == "sandbox; default-src 'none'"


def test_no_template_holds_an_inline_script_or_event_handler():
    inline = []
    for template in TEMPLATES.rglob("*.html"):
        text = template.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            if "src=" not in tag:
                inline.append(f"{template.name}: {tag}")
        inline += [f"{template.name}: {m}" for m in re.findall(r"\son[a-z]+\s*=", text)]
        inline += [f"{template.name}: {m}" for m in re.findall(r"javascript:", text)]
    assert inline == []


def test_the_api_docs_page_loads_its_init_script_from_a_url(client, cast):
    client.force_login(cast.alice)

    page = client.get("/api/docs/").content.decode()
    script = client.get("/api/docs/?script")

    tags = re.findall(r"<script\b[^>]*>", page)
    assert tags and all("src=" in tag for tag in tags)
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in script.content.decode()
