"""Agent output and plan.md are untrusted: whatever they hold renders inert."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.utils import timezone
from factories import (
    make_assertion_check,
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
    # The side-by-side page shows the files it changed, by the paths the diff names.
    (tmp_path / "workspace.diff").write_text(
        f"diff --git a/{SCRIPT} b/{SCRIPT}\nnew file mode 100644\nindex 0000000..1234567\n"
        f"--- /dev/null\n+++ b/{SCRIPT}\n@@ -0,0 +1 @@\n+{IMG}\n"
    )
    trial.artifacts_dir = str(tmp_path)
    trial.save()
    other = make_trial(run, 1)
    client.force_login(cast.alice)

    for url in (
        f"/trials/{trial.pk}/",
        f"/runs/{run.pk}/",
        f"/batches/{batch.pk}/",
        f"/trials/{other.pk}/compare/",
        f"/trials/{trial.pk}/compare/{other.pk}/",
        f"/trials/{other.pk}/compare/{trial.pk}/",
    ):
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
    pair_html = client.get(f"/trials/{trial.pk}/compare/{other.pk}/").content.decode()
    assert pair_html.count("&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;") >= 3


def test_it_escapes_consultations_simulated_turns_and_metric_names(client):
    """What a model was shown and what it answered, a simulated user's words and a metric's
    name all come from outside Proctor: each renders as text."""
    cast = make_cast()
    batch = make_batch(cast.acme)
    run = make_run(
        batch, make_version(make_case(cast.acme, "persona")), make_variant(cast.acme, "v")
    )
    trial = make_trial(
        run,
        score=0.5,
        threshold=0.6,
        outside_writes=[SCRIPT],
        responder_cause=IMG,
        stop_cause="simulated_user_failed",
        conversation_outcome="stopped",
    )
    Turn.objects.create(trial=trial, index=0, prompt="hello")
    Turn.objects.create(
        trial=trial, index=1, prompt=SCRIPT, origin={"simulated_user": {"model": IMG}}
    )
    Turn.objects.create(
        trial=trial, index=2, prompt=IMG, origin={"responder": {"model": SCRIPT, "reason": IMG}}
    )
    for kind, turn_index in (("simulated_user", 0), ("responder", 1)):
        Consultation.objects.create(
            trial=trial,
            kind=kind,
            turn_index=turn_index,
            model=IMG,
            prompt=[{"role": SCRIPT, "content": f'{SCRIPT} {IMG} <a href="{LINK}">x</a>'}],
            answer=SCRIPT,
            verdict=IMG,
            reason=SCRIPT,
            cause=IMG,
        )
    Consultation.objects.create(
        trial=trial, kind="judge", check_index=0, prompt={"odd": SCRIPT}, answer=IMG
    )
    make_assertion_check(trial, 0, name=SCRIPT, metric=IMG, weight=2, passed=False, message=IMG)
    make_assertion_check(trial, 1, name=IMG, metric="", weight=0, passed=True)
    client.force_login(cast.alice)

    pages = (
        f"/trials/{trial.pk}/",
        f"/batches/{batch.pk}/metrics/",
        f"/runs/{run.pk}/",
        f"/batches/{batch.pk}/",  # the responder's cause is in the column's warnings
    )
    for url in pages:
        html = client.get(url).content.decode()
        assert_inert(html, url)
    trial_html = client.get(f"/trials/{trial.pk}/").content.decode()
    assert trial_html.count("&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;") >= 5
    grid_html = client.get(f"/batches/{batch.pk}/").content.decode().replace("<wbr>", "")
    assert "simulated_user_failed:&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in grid_html
    metrics_html = client.get(f"/batches/{batch.pk}/metrics/").content.decode()
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in metrics_html


def assert_inert(html: str, url: str) -> None:
    tags = elements(html)
    scripts = [dict(attrs).get("src") for tag, attrs in tags if tag == "script"]
    assert all(src and src.startswith("/static/vendor/") for src in scripts), (url, scripts)
    assert not [tag for tag, _ in tags if tag in ("img", "iframe")], url
    assert not [(tag, attrs) for tag, attrs in tags for name, _ in attrs if name.startswith("on")]
    assert not [
        v
        for _, attrs in tags
        for n, v in attrs
        if n == "href" and (v or "").startswith("javascript")
    ], url


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
