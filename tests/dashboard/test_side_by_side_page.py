"""Two trials of one case side by side: reached from the trial page through a picker of the
case's other trials, the first divergence marked, the checks and the workspace changes
compared, another organization's trial a 404, and a 10,000-event pair drawn a window at a
time for the queries of a one-turn pair."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_checks,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from dashboard.trial_alignment import WINDOW_ROWS
from evals_app.models import Event, Trial, Turn, Variant

pytestmark = pytest.mark.django_db

S = Trial.Status


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def case(cast):
    return make_case(cast.acme, "health-route")


def _trial(cast, case, variant_name: str, *, status=S.PASSED, batch=None, **fields) -> Trial:
    batch = batch or make_batch(cast.acme, status="finished")
    version = case.versions.first() or make_version(case)
    org = batch.organization
    variant = Variant.objects.filter(organization=org, name=variant_name).first()
    run = make_run(batch, version, variant or make_variant(org, variant_name))
    return make_trial(run, 0, status, **fields)


def _record(trial: Trial, steps: list[tuple[int, str, dict]], prompts=("Add a /health route",)):
    for index, prompt in enumerate(prompts):
        Turn.objects.create(trial=trial, index=index, prompt=prompt)
    Event.objects.bulk_create(
        Event(trial=trial, turn_index=turn, seq=seq, kind=kind, at=trial.started_at, data=data)
        for seq, (turn, kind, data) in enumerate(steps)
    )


STARTED = (0, "Started", {"session_id": "s", "model": "m"})
LOOK = (0, "Message", {"role": "assistant", "text": "I'll read app.py first."})
READ = (0, "Command", {"command": "cat app.py", "exit_code": 0, "output": "app = Flask()"})
ROUTE = (0, "FileChange", {"paths": ["app.py"]})
TESTS = (0, "Command", {"command": "pytest -q", "exit_code": 0, "output": "3 passed"})
GIVE_UP = (0, "Message", {"role": "assistant", "text": "I could not find the app."})
DONE = (0, "Finished", {"reason": "end_turn"})


@pytest.fixture
def pair(cast, case):
    careful = _trial(cast, case, "careful")
    make_checks(careful)
    _record(careful, [STARTED, LOOK, READ, ROUTE, TESTS, DONE])
    hasty = _trial(cast, case, "hasty", status=S.FAILED)
    make_checks(hasty, validator_passed=False, validator_message="app.py has no /health route")
    _record(hasty, [STARTED, LOOK, READ, GIVE_UP, DONE])
    return careful, hasty


def _page(client, a: Trial, b: Trial, query: str = "", **headers) -> str:
    response = client.get(f"/trials/{a.pk}/compare/{b.pk}/{query}", **headers)
    assert response.status_code == 200
    return response.content.decode()


def test_the_trial_page_offers_the_other_trials_of_its_case(client, cast, case, pair):
    careful, hasty = pair
    later = _trial(cast, case, "careful")  # another batch, the same variant
    other_case = _trial(cast, make_case(cast.acme, "login-form"), "careful")
    client.force_login(cast.alice)

    trial_page = client.get(f"/trials/{careful.pk}/").content.decode()
    assert f'href="/trials/{careful.pk}/compare/"' in trial_page

    picker = client.get(f"/trials/{careful.pk}/compare/").content.decode()
    for other in (hasty, later):
        assert f'href="/trials/{careful.pk}/compare/{other.pk}/"' in picker
    assert f"/compare/{other_case.pk}/" not in picker
    assert f'id="candidate-{careful.pk}"' not in picker


def test_it_marks_the_first_divergence_and_links_to_it(client, cast, pair):
    careful, hasty = pair
    client.force_login(cast.alice)

    html = _page(client, careful, hasty)

    # The first two steps are the same; the third is where they part (usage and the session
    # start are not aligned, so the rows start at the message).
    summary = re.search(r'id="divergence-summary">(.*?)</p>', html, re.S).group(1)
    assert 'href="#divergence"' in summary
    assert "turn 1, row 3" in summary
    assert "A changed app.py" in summary
    assert "B said “I could not find the app.”" in summary
    row = re.search(r'<div class="pair-row pair-row--(\w+)" id="pair-0-2" data-divergence', html)
    assert row and row.group(1) == "changed"
    assert html.count('id="divergence"') == 1
    # Each side's own events, with their trial's ids.
    assert f'id="event-{careful.pk}-4"' in html  # A's pytest run, which B has no match for
    assert 'class="pair-row pair-row--only_a"' in html


def test_it_shows_each_checks_result_in_both(client, cast, pair):
    careful, hasty = pair
    client.force_login(cast.alice)

    html = _page(client, careful, hasty)

    rows = dict(re.findall(r'<tr class="check-pair([^"]*)" id="check-pair-\d+">\s*<td>(\S+)', html))
    assert rows == {"": "pytest", " check-pair--differs": "has_health_route"}
    differing = re.search(r'check-pair--differs".*?</tr>', html, re.S).group(0)
    assert differing.index("status--passed") < differing.index("status--failed")
    assert "app.py has no /health route" in differing


DIFF_CAREFUL = """\
diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,2 +1,5 @@
 from flask import Flask
 app = Flask(__name__)
+@app.get("/health")
+def health():
+    return "ok", 200
diff --git a/README.md b/README.md
index 3333333..4444444 100644
--- a/README.md
+++ b/README.md
@@ -1 +1 @@
-# App
+# App with health
diff --git a/tests/test_health.py b/tests/test_health.py
new file mode 100644
index 0000000..5555555
--- /dev/null
+++ b/tests/test_health.py
@@ -0,0 +1 @@
+def test_health(): ...
"""

DIFF_HASTY = """\
diff --git a/app.py b/app.py
index 1111111..6666666 100644
--- a/app.py
+++ b/app.py
@@ -1,2 +1,3 @@
 from flask import Flask
 app = Flask(__name__)
+# TODO: health
diff --git a/README.md b/README.md
index 3333333..4444444 100644
--- a/README.md
+++ b/README.md
@@ -1 +1 @@
-# App
+# App with health
"""


def test_it_shows_what_differs_between_the_final_workspaces(client, cast, pair, tmp_path: Path):
    careful, hasty = pair
    for trial, diff in ((careful, DIFF_CAREFUL), (hasty, DIFF_HASTY)):
        folder = tmp_path / str(trial.pk)
        folder.mkdir()
        (folder / "workspace.diff").write_text(diff)
        Trial.objects.filter(pk=trial.pk).update(artifacts_dir=str(folder))
    client.force_login(cast.alice)

    html = _page(client, careful, hasty)

    files = re.findall(
        r'<li class="changed-file changed-file--(\w+)"[^>]*>\s*<code class="path">([^<]+)', html
    )
    assert files == [
        ("different", "app.py"),
        ("only_a", "tests/test_health.py"),
        ("same", "README.md"),
    ]
    different = re.search(r"changed-file--different.*?</li>", html, re.S).group(0)
    text = unescape(re.sub(r"<[^>]+>", "", different))
    assert '-@app.get("/health")' in text
    assert "+# TODO: health" in text
    assert "2 files differ" in html


def test_a_trial_of_another_organization_is_a_404(client, cast, case, pair):
    careful, hasty = pair
    theirs = _trial(
        cast, make_case(cast.globex, "health-route"), "globex-agent", batch=make_batch(cast.globex)
    )
    client.force_login(cast.charlie)
    assert client.get(f"/trials/{careful.pk}/compare/{hasty.pk}/").status_code == 404
    assert client.get(f"/trials/{careful.pk}/compare/").status_code == 404
    assert client.get(f"/trials/{theirs.pk}/compare/{careful.pk}/").status_code == 404

    client.force_login(cast.bob)
    assert client.get(f"/trials/{careful.pk}/compare/{hasty.pk}/").status_code == 200
    assert client.get(f"/trials/{careful.pk}/compare/{theirs.pk}/").status_code == 404


def test_two_trials_of_different_cases_are_not_compared(client, cast, pair):
    careful, _hasty = pair
    elsewhere = _trial(cast, make_case(cast.acme, "login-form"), "careful")
    client.force_login(cast.alice)

    assert client.get(f"/trials/{careful.pk}/compare/{elsewhere.pk}/").status_code == 404


def _long_trial(cast, case, variant_name: str, *, events: int, last: str) -> Trial:
    trial = _trial(cast, case, variant_name)
    Turn.objects.create(trial=trial, index=0, prompt="Work through the list.")
    Event.objects.bulk_create(
        Event(
            trial=trial,
            turn_index=0,
            seq=seq,
            kind="Message",
            at=trial.started_at,
            data={"role": "assistant", "text": f"step {seq}" if seq < events - 1 else last},
        )
        for seq in range(events)
    )
    return trial


def _queries(client, url: str, **headers) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **headers)
    assert response.status_code == 200
    return len(queries), response.content.decode()


def test_a_ten_thousand_event_pair_draws_a_window_for_the_queries_of_a_small_pair(
    client, cast, case
):
    client.force_login(cast.alice)
    small_a = _long_trial(cast, case, "small-a", events=3, last="done")
    small_b = _long_trial(cast, case, "small-b", events=3, last="gave up")
    client.get(f"/trials/{small_a.pk}/compare/{small_b.pk}/")  # warm caches
    from django.core.cache import cache

    cache.clear()
    small_queries, _ = _queries(client, f"/trials/{small_a.pk}/compare/{small_b.pk}/")

    big_a = _long_trial(cast, case, "big-a", events=10_000, last="done")
    big_b = _long_trial(cast, case, "big-b", events=10_000, last="gave up")
    big_url = f"/trials/{big_a.pk}/compare/{big_b.pk}/"
    big_queries, html = _queries(client, big_url)

    assert big_queries == small_queries
    # The 9,996 equal steps before the last fold into one item; the divergence is on screen.
    assert html.count('id="event-') <= 2 * WINDOW_ROWS
    assert 'id="fold-0-0"' in html and "9,996 events the same in both" in html
    assert 'id="divergence"' in html
    assert f'id="event-{big_b.pk}-9999"' in html

    # The folded steps come a window at a time, on demand.
    fragment = client.get(
        f"{big_url}?turn=0&start=0&stop=9996&fold=0", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert fragment.count(f'id="event-{big_a.pk}-') == WINDOW_ROWS
    assert "<html" not in fragment
    assert f"start={WINDOW_ROWS}&amp;stop=9996&amp;fold=0" in fragment


def test_commands_only_the_shell_trace_saw_do_not_make_a_divergence(client, cast, case):
    plain = _trial(cast, case, "careful")
    _record(plain, [LOOK, READ, DONE])
    traced = _trial(cast, case, "hasty")
    seen = (0, "Command", {"command": "ls -la", "exit_code": 0, "origin": "trace"})
    _record(traced, [LOOK, seen, READ, seen, DONE])
    client.force_login(cast.alice)

    html = _page(client, plain, traced)

    assert "The two conversations match event by event." in html
    assert 'id="divergence"' not in html


def test_a_pair_of_many_turns_draws_fifty_and_loads_the_rest(client, cast, case):
    prompts = [f"Step {n} of the plan." for n in range(60)]
    steps = [(n, "Message", {"role": "assistant", "text": f"did {n}"}) for n in range(60)]
    a = _trial(cast, case, "careful")
    _record(a, steps, prompts=prompts)
    b = _trial(cast, case, "hasty")
    _record(b, [*steps[:59], (59, "Message", {"role": "assistant", "text": "skipped"})], prompts)
    client.force_login(cast.alice)

    # The divergence is in turn 60, past the first fifty: the page starts at it, with a link
    # to the turns before.
    html = _page(client, a, b)
    assert _turns(html) == ["59"]
    assert 'id="divergence"' in html
    assert "?turns_from=0" in html

    first = _page(client, a, b, "?turns_from=0")
    assert _turns(first) == [str(n) for n in range(50)]
    assert "?turns_from=50" in first
    more = _page(client, a, b, "?turns_from=50", HTTP_HX_REQUEST="true")
    assert _turns(more) == [str(n) for n in range(50, 60)] and "<html" not in more


def _turns(html: str) -> list[str]:
    return re.findall(r'<section class="pair-turn[^"]*" id="pair-turn-(\d+)"', html)


def test_the_divergence_link_opens_its_turn_from_a_page_showing_another(client, cast, case):
    a = _trial(cast, case, "careful")
    _record(a, [LOOK, (1, *GIVE_UP[1:])], prompts=("First part.", "Second part."))
    b = _trial(cast, case, "hasty")
    _record(b, [LOOK, (1, *DONE[1:])], prompts=("First part.", "Second part."))
    client.force_login(cast.alice)

    at_divergence = _page(client, a, b)
    assert 'id="divergence-link">' in at_divergence
    assert 'href="#divergence" id="divergence-link"' in at_divergence

    elsewhere = _page(client, a, b, "?turn=0")
    assert 'id="divergence"' not in elsewhere
    link = f'href="/trials/{a.pk}/compare/{b.pk}/?turn=1#divergence" id="divergence-link"'
    assert link in elsewhere
