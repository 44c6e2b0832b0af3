"""Agent output and plan.md are untrusted: whatever they hold renders inert."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.utils import timezone
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from dashboard.markdown import render_markdown
from evals_app.models import Check, Consultation, Event, Turn

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('pwned')</script>"
IMG = '<img src=x onerror="alert(1)">'
LINK = "javascript:alert(document.cookie)"


def test_it_escapes_html_in_every_part_of_a_transcript(client, tmp_path):
    cast = make_cast()
    batch = make_batch(cast.acme)
    case = make_case(cast.acme, "hostile", tags=[SCRIPT])
    run = make_run(batch, make_version(case), make_variant(cast.acme, f"variant {IMG}"))
    trial = make_trial(run, error=SCRIPT, finish_reason=IMG, stop_cause=SCRIPT)
    Turn.objects.create(trial=trial, index=0, prompt=SCRIPT, origin={"responder": {"reason": IMG}})
    payloads = [
        (
            "Message",
            {"role": "assistant", "text": f'{SCRIPT} {IMG} <a href="{LINK}">x</a>', "usage": None},
        ),
        ("Command", {"command": SCRIPT, "exit_code": 0, "output": IMG, "origin": "agent"}),
        (
            "ToolCall",
            {
                "call_id": SCRIPT,
                "name": IMG,
                "input": SCRIPT,
                "output": IMG,
                "error": SCRIPT,
                "status": IMG,
            },
        ),
        ("FileChange", {"paths": [SCRIPT]}),
        ("Finished", {"reason": IMG}),
        ("ProtocolError", {"line": SCRIPT, "error": IMG}),
        ("Log", {"stream": SCRIPT, "text": IMG}),
    ]
    Event.objects.bulk_create(
        [
            Event(trial=trial, seq=seq, kind=kind, at=timezone.now(), data=data)
            for seq, (kind, data) in enumerate(payloads)
        ]
    )
    Check.objects.create(
        trial=trial,
        index=0,
        name=SCRIPT,
        kind="validator",
        passed=False,
        message=IMG,
        output=SCRIPT,
    )
    Consultation.objects.create(
        trial=trial, kind="responder", turn_index=0, verdict=SCRIPT, reason=IMG, answer=SCRIPT
    )
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "plan.md").write_text(
        f"# Plan\n\n{SCRIPT}\n\n{IMG}\n\n[click]({LINK})\n"
    )
    trial.artifacts_dir = str(tmp_path)
    trial.save()
    client.force_login(cast.alice)

    for url in (f"/trials/{trial.pk}/", f"/runs/{run.pk}/", f"/batches/{batch.pk}/"):
        html = client.get(url).content.decode()
        tags = elements(html)
        # The page's own scripts are the two vendored htmx files; nothing else runs.
        scripts = [dict(attrs).get("src") for tag, attrs in tags if tag == "script"]
        assert all(src and src.startswith("/static/vendor/") for src in scripts), (url, scripts)
        assert not [tag for tag, _ in tags if tag in ("img", "iframe")], url
        assert not [
            (tag, attrs) for tag, attrs in tags for name, _ in attrs if name.startswith("on")
        ], url
        assert not [
            v
            for _, attrs in tags
            for n, v in attrs
            if n == "href" and (v or "").startswith("javascript")
        ], url
    trial_html = client.get(f"/trials/{trial.pk}/").content.decode()
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in trial_html


@pytest.mark.parametrize(
    "markdown",
    [
        SCRIPT,
        IMG,
        f"[click]({LINK})",
        f'<a href="{LINK}">click</a>',
        "[click](JaVaScRiPt:alert(1))",
        "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        '<iframe src="https://evil.example"></iframe>',
        "![x](https://evil.example/x.png)",
        "<svg onload=alert(1)>",
    ],
)
def test_it_renders_plan_markdown_without_anything_that_runs(markdown):
    tags = elements(str(render_markdown(markdown)))
    for tag, attributes in tags:
        assert tag not in ("script", "img", "iframe", "svg", "object", "embed"), tags
        assert not any(name.startswith("on") for name, _ in attributes), tags
        for name, value in attributes:
            if name in ("href", "src"):
                assert (value or "").startswith(("http://", "https://", "mailto:")), tags


def elements(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every element the browser would build from ``html``: (tag, attributes)."""
    found: list[tuple[str, list[tuple[str, str | None]]]] = []

    class Collector(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, attrs))

    Collector().feed(html)
    return found


def test_it_keeps_ordinary_markdown():
    html = str(render_markdown("# Plan\n\n- step **one**\n- [docs](https://example.com)\n"))
    assert "<h1>Plan</h1>" in html
    assert "<strong>one</strong>" in html
    assert '<a href="https://example.com" rel="noopener noreferrer nofollow">docs</a>' in html
