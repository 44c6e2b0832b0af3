"""The run page (a cell's trials and checks) and the trial page (transcript, checks, plan,
verdicts, artifacts)."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone
from factories import (
    EVAL_PATH,
    add_events,
    make_batch,
    make_case,
    make_cast,
    make_checks,
    make_definition,
    make_run,
    make_trial,
    make_trial_with_events,
    make_variant,
    make_version,
)

from evals_app.models import Consultation, Event, Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def run(cast):
    batch = make_batch(cast.acme, status="finished")
    return make_run(
        batch,
        make_version(make_case(cast.acme, "health-route")),
        make_variant(cast.acme, "careful"),
    )


def test_it_lists_a_runs_trials_with_status_duration_tokens_and_failed_checks(client, cast, run):
    passed = make_trial(run, 0, S.PASSED)
    make_checks(passed)
    failed = make_trial(run, 1, S.FAILED, duration_ms=75_000)
    make_checks(failed, validator_passed=False, validator_message="app.py has no /health route")
    errored = make_trial(
        run, 2, S.ERRORED, error="The sandbox could not start: docker is not running."
    )
    client.force_login(cast.alice)
    html = client.get(f"/runs/{run.pk}/").content.decode()

    failed_row = re.search(rf'<tr id="trial-{failed.pk}".*?</tr>', html, re.S).group(0)
    assert "status--failed" in failed_row
    assert "1 m 15 s" in failed_row
    assert "1.5k" in failed_row  # tokens
    assert "has_health_route" in failed_row and "pytest -q" not in failed_row
    assert f'href="/trials/{failed.pk}/"' in failed_row
    errored_row = re.search(rf'<tr id="trial-{errored.pk}".*?</tr>', html, re.S).group(0)
    assert "docker is not running" in errored_row
    assert "1/3 passed" in html


def test_it_shows_each_checks_captured_source_pass_rate_and_message_per_trial(client, cast, run):
    for index, ok in enumerate([True, False, True]):
        make_checks(
            make_trial(run, index, S.PASSED if ok else S.FAILED),
            validator_passed=ok,
            validator_message="" if ok else "app.py has no /health route",
        )
    client.force_login(cast.alice)
    html = client.get(f"/runs/{run.pk}/").content.decode()

    validator = re.search(r'<article id="check-1".*?</article>', html, re.S).group(0)
    assert f"{EVAL_PATH}, lines 5–8" in validator
    # Pygments output, numbered from the captured start line, escaped.
    assert 'class="highlight"' in validator
    assert re.search(r'class="linenos">\s*5<', validator)
    assert "has_health_route" in validator and "/health" in validator
    assert "2/3 · 67%" in validator
    assert "app.py has no /health route" in validator

    command = re.search(r'<article id="check-0".*?</article>', html, re.S).group(0)
    assert "shell command" in command
    # The command text from the definition, not only its name (highlighted, so tags between).
    assert "pytest -q --maxfail=1" in re.sub(r"<[^>]+>", "", command)
    assert "3/3 · 100%" in command


def test_it_says_so_when_a_versions_source_was_not_captured(client, cast):
    batch = make_batch(cast.acme)
    version = make_version(make_case(cast.acme, "no-capture"), sources={})
    run = make_run(batch, version, make_variant(cast.acme, "careful"))
    make_checks(make_trial(run))
    client.force_login(cast.alice)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "The source was not captured for this version." in html


def test_it_shows_the_transcript_turn_by_turn(client, cast, run):
    trial = make_trial_with_events(run)
    client.force_login(cast.alice)
    html = client.get(f"/trials/{trial.pk}/").content.decode()

    first_turn = html.index(f'id="turn-{trial.pk}-0"')
    second_turn = html.index(f'id="turn-{trial.pk}-1"')
    assert (
        first_turn
        < html.index("pytest -q")
        < second_turn
        < html.index("Done: /health returns 200.")
    )
    turn_two = re.search(
        rf'<section class="turn" id="turn-{trial.pk}-1">.*?</section>', html, re.S
    ).group(0)
    assert "responder" in turn_two and "plan mode" in turn_two
    assert "the agent asked for approval" in turn_two
    assert "authored" in html
    # The command with its exit code and its output in a collapsible block.
    command = re.search(rf'id="event-{trial.pk}-2".*?</details>', html, re.S).group(0)
    assert "exit 1" in command and "<details" in command and "1 failed in 0.1s" in command
    # The tool call: name, status, input and output.
    tool = re.search(rf'id="event-{trial.pk}-3".*?<time', html, re.S).group(0)
    assert "write_file" in tool and "completed" in tool and "wrote 12 lines" in tool
    assert "app.py" in tool  # the input
    assert "tests/test_health.py" in html  # the file change
    assert "900 in · 200 out" in html  # usage event
    # Usage per turn and in total, and the conversation's outcome.
    assert re.search(
        r"Trial total</th><td class=\"num\">1,200</td><td class=\"num\">300</td>", html
    )
    assert "completed" in html and "end_turn" in html


def test_it_shows_the_trials_checks_with_message_output_and_source(client, cast, run):
    trial = make_trial(run, 0, S.FAILED)
    make_checks(
        trial, command_passed=False, validator_passed=False, validator_message="no route found"
    )
    client.force_login(cast.alice)
    html = client.get(f"/trials/{trial.pk}/").content.decode()
    checks = re.search(rf'<section id="trial-checks-{trial.pk}".*?</section>', html, re.S).group(0)
    assert "no route found" in checks
    assert "1 failed, 3 passed" in checks  # command output
    assert "has_health_route" in checks and 'class="highlight"' in checks


def test_it_loads_a_long_transcript_a_page_at_a_time(client, cast, run):
    trial = make_trial(run)
    add_events(trial, 450)
    client.force_login(cast.alice)

    html = client.get(f"/trials/{trial.pk}/").content.decode()
    assert html.count('class="event event--message"') == 200
    more = re.search(r'id="transcript-more-\d+"[^>]*hx-get="([^"]+)"', html, re.S)
    assert more and 'hx-trigger="intersect once"' in html

    url = more.group(1).replace("&amp;", "&")
    second = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in second
    assert second.count('class="event event--message"') == 200
    assert "step 200<" in second and "step 399<" in second
    third = client.get(
        re.search(r'hx-get="([^"]+)"', second).group(1).replace("&amp;", "&"),
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert third.count('class="event event--message"') == 50
    assert "transcript-more" not in third

    # Without HTMX, the same link opens a page that works on its own.
    plain = client.get(url).content.decode()
    assert "<html" in plain and "step 200<" in plain and "step 199<" not in plain


def test_it_renders_plan_md_and_the_responders_and_judges_verdicts(client, cast, run, tmp_path):
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "plan.md").write_text(
        "# The plan\n\n1. Add the **route**\n2. Test it\n"
    )
    verdict_dir = tmp_path / "responder" / "turn-2"
    verdict_dir.mkdir(parents=True)
    (verdict_dir / "verdict.json").write_text(json.dumps({"verdict": "done"}))
    trial = make_trial_with_events(run, artifacts_dir=tmp_path)
    Consultation.objects.create(
        trial=trial,
        kind="responder",
        turn_index=1,
        model="small-model",
        verdict="done",
        reason="the agent reported the route works",
    )
    Consultation.objects.create(
        trial=trial,
        kind="judge",
        check_index=2,
        verdict="failed",
        reason="the answer never mentions tests",
        answer='{"passed": false}',
    )
    client.force_login(cast.alice)
    html = client.get(f"/trials/{trial.pk}/").content.decode()

    assert "<h1>The plan</h1>" in html
    assert "<strong>route</strong>" in html
    assert f'href="/trials/{trial.pk}/artifacts/outputs/plan.md"' in html
    consultations = re.search(
        r'<section class="card" id="consultations">.*?</section>', html, re.S
    ).group(0)
    assert "Responder · after turn 2" in consultations
    assert "chip--done" in consultations and "the agent reported the route works" in consultations
    assert "Judge · check 3" in consultations and "the answer never mentions tests" in consultations
    # Links to the files on disk only: the judge's folder was never written.
    assert f'href="/trials/{trial.pk}/artifacts/responder/turn-2/verdict.json"' in consultations
    assert "judges/check-3" not in consultations


def test_it_serves_artifacts_as_inert_plain_text(client, cast, run, tmp_path):
    (tmp_path / "events.jsonl").write_text('{"kind": "Started"}\n')
    (tmp_path / "page.html").write_text("<script>alert(1)</script>")
    trial = make_trial(run, artifacts_dir=str(tmp_path))
    client.force_login(cast.alice)

    response = client.get(f"/trials/{trial.pk}/artifacts/events.jsonl")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b'{"kind": "Started"}\n'
    html = client.get(f"/trials/{trial.pk}/artifacts/page.html")
    assert html["Content-Type"] == "text/plain; charset=utf-8"
    assert html["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in html["Content-Security-Policy"]


def test_it_refuses_artifact_paths_that_leave_the_trials_folder(client, cast, run, tmp_path):
    folder = tmp_path / "trial"
    folder.mkdir()
    (tmp_path / "secret.txt").write_text("not yours")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    trial = make_trial(run, artifacts_dir=str(folder))
    client.force_login(cast.alice)

    for path in [
        "../secret.txt",
        "%2e%2e/secret.txt",
        "link.txt",
        "/etc/passwd",
        "",
        "missing.txt",
    ]:
        assert client.get(f"/trials/{trial.pk}/artifacts/{path}").status_code == 404, path


def test_it_answers_404_for_another_organizations_run_trial_and_artifact(
    client, cast, run, tmp_path
):
    (tmp_path / "events.jsonl").write_text("{}")
    trial = make_trial(run, artifacts_dir=str(tmp_path))
    client.force_login(cast.charlie)
    assert client.get(f"/runs/{run.pk}/").status_code == 404
    assert client.get(f"/trials/{trial.pk}/").status_code == 404
    assert client.get(f"/trials/{trial.pk}/artifacts/events.jsonl").status_code == 404
    client.force_login(cast.bob)
    assert client.get(f"/trials/{trial.pk}/").status_code == 200


def test_the_run_page_shows_the_prompts_its_variant_ran(client):
    """A variant carrying its own prompts (issue 35) ran them, filled with the case's recorded
    variables, in place of the case's: the run page shows what was sent."""
    cast = make_cast()
    case = make_case(cast.acme, "health-route")
    definition = {
        **make_definition("api", "health-route"),
        "variables": {"route": "/health"},
    }
    version = make_version(case, definition=definition)
    variant = make_variant(cast.acme, 'command:"Add {{route}}, tersely"')
    variant.spec = {
        **variant.spec,
        "options": {
            "prompt": "Add {{route}}, tersely",
            "system_prompt": "Be brief about {{route}}.",
        },
    }
    variant.save()
    plain = make_variant(cast.acme, "command")
    batch = make_batch(cast.acme, status="finished")
    own, suites = make_run(batch, version, variant), make_run(batch, version, plain)
    client.force_login(cast.alice)

    html = client.get(f"/runs/{own.pk}/").content.decode()
    assert "Add /health, tersely" in html
    assert "Be brief about /health." in html
    html = client.get(f"/runs/{suites.pk}/").content.decode()
    assert "Add a /health route that returns 200" in html


def test_it_marks_what_came_from_the_agents_telemetry_and_lists_its_exports(
    client, cast, run, tmp_path
):
    (tmp_path / "otlp").mkdir()
    (tmp_path / "otlp" / "logs.jsonl").write_text('{"signal": "logs"}\n')
    trial = make_trial(run, 0, S.TIMED_OUT, artifacts_dir=str(tmp_path))
    usage = {"input_tokens": 130, "output_tokens": 15, "cache_read_tokens": 20}
    usage |= {"cache_write_tokens": 10, "total_tokens": 145, "cost_usd": 0.0009475}
    events = [
        ("Usage", {**usage, "source": "otlp"}),
        ("Log", {"stream": "otlp", "text": "telemetry: 1 model request, 42 ms", "source": "otlp"}),
        ("Usage", {**usage, "cost_usd": 0.5}),  # the stream's own: no mark
    ]
    add_kinds = [
        Event(trial=trial, turn_index=0, seq=seq, kind=kind, at=timezone.now(), data=data)
        for seq, (kind, data) in enumerate(events)
    ]
    Event.objects.bulk_create(add_kinds)
    client.force_login(cast.alice)
    html = client.get(f"/trials/{trial.pk}/").content.decode()

    folded = re.search(rf'id="event-{trial.pk}-0".*?<time', html, re.S).group(0)
    assert "130 in · 15 out" in folded and "$0.0009" in folded and "from OTLP" in folded
    note = re.search(rf'id="event-{trial.pk}-1".*?<time', html, re.S).group(0)
    assert "telemetry" in note and "1 model request, 42 ms" in note
    own = re.search(rf'id="event-{trial.pk}-2".*?<time', html, re.S).group(0)
    assert "$0.5000" in own and "from OTLP" not in own
    assert f"/trials/{trial.pk}/artifacts/otlp/logs.jsonl" in html
