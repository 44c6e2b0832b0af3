"""The files a trial changed, named relative to its workspace on every page that lists them
(the trial page, its later transcript pages, the API's events): ``calc.py``, never the
sandbox's temp folder, though the record keeps them as the agent wrote them (absolute)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.utils import timezone
from e2e.running import write_eval
from factories import make_batch, make_case, make_cast, make_run, make_variant, make_version
from test_bundle_isolation import proctor_folders  # noqa: F401 (a fixture)

from evals_app.models import Event, Trial
from runner.batches.planning import Selection, load_suites, plan_batch, record_locally
from runner.batches.submission import build_submission
from runner.jobs.execution import run_trial_by_id

# Fixes calc.py and reports it by its absolute path, as agents do; writes docs/usage.md with
# the shell and reports nothing (the session finds it by comparing the workspace).
AGENT = """#!/usr/bin/env bash
printf 'def add(a, b):\\n    return a + b\\n' > "$SPHYNX_WORKSPACE/calc.py"
echo '{"_tag":"FileChange","paths":["'"$SPHYNX_WORKSPACE"'/calc.py"]}'
mkdir -p docs && echo 'add(2, 3) is 5' > docs/usage.md
echo '{"_tag":"Message","role":"assistant","text":"Fixed add in calc.py."}'
"""

EVAL = """
import os

from proctor import Verdict, case, files, profile, suite, variant


def lists_the_changes(ctx):
    # Validators read the paths as the agent wrote them: absolute, in the trial's workspace.
    changed = [os.path.relpath(path, ctx.workspace) for turn in ctx.turns() for path in turn.file_changes]
    return Verdict(changed == ["calc.py", "docs/usage.md"], "changed: " + ", ".join(changed))


calc = suite(
    "calc",
    prompt="Fix add in calc.py",
    source=files({{"calc.py": "def add(a, b):\\n    return a - b\\n"}}),
    cases=[case("fix-add", validate=lists_the_changes)],
    variants=[variant("command", profile=profile("fixer", dir={agent_dir!r}, run="bash fix.sh"))],
)
"""

# A trial's workspace as the sandbox names it, in any tag or attribute of a page.
TEMP_WORKSPACE = re.compile(r"proctor-trial-[^\s\"'<>]*/workspace")


@pytest.mark.usefixtures("transactional_db", "proctor_folders")
def test_a_trial_run_now_names_the_files_it_changed_relative_to_the_workspace(
    client, tmp_path: Path
):
    cast = make_cast()
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "fix.sh").write_text(AGENT)
    eval_file = write_eval(
        tmp_path / "evals", "calc.eval.py", EVAL.format(agent_dir=str(agent_dir))
    )
    planned = plan_batch(load_suites([str(eval_file)]), Selection())
    submission = build_submission(planned, {"paths": [str(eval_file)]}, max_bytes=10 * 1024 * 1024)
    _, (trial_id,), _ = record_locally(cast.acme, submission)

    assert run_trial_by_id(trial_id) == "passed", Trial.objects.get(pk=trial_id).error

    client.force_login(cast.alice)
    page = client.get(f"/trials/{trial_id}/").content.decode()
    later_page = client.get(
        f"/trials/{trial_id}/?after=-1&upto=9999", HTTP_HX_REQUEST="true"
    ).content.decode()
    events = client.get(f"/api/trials/{trial_id}/events/?kind=FileChange").json()["results"]
    for html in (page, later_page):
        assert '<code class="path">calc.py</code>' in html
        assert '<code class="path">docs/usage.md</code>' in html
        assert TEMP_WORKSPACE.search(html) is None, TEMP_WORKSPACE.search(html)
    # What the validator was given, in its check's message.
    assert "changed: calc.py, docs/usage.md" in page
    assert [event["data"]["paths"] for event in events] == [["calc.py"], ["docs/usage.md"]]


@pytest.mark.django_db
def test_a_stored_absolute_path_in_the_workspace_shows_relative(client):
    cast = make_cast()
    run = make_run(
        make_batch(cast.acme, status="finished"),
        make_version(make_case(cast.acme, "fix-add")),
        make_variant(cast.acme, "fixer"),
    )
    trial = Trial.objects.create(run=run, index=0, status=Trial.Status.PASSED)
    root = "/tmp/proctor-trial-4242-1788300005-ab12cd"
    Event.objects.create(
        trial=trial,
        turn_index=0,
        seq=0,
        kind=Event.Kind.FILE_CHANGE,
        at=timezone.now(),
        data={"paths": [f"{root}/workspace/calc.py", f"{root}/home/.bashrc", "README.md"]},
    )
    client.force_login(cast.alice)

    page = client.get(f"/trials/{trial.pk}/").content.decode()
    (event,) = client.get(f"/api/trials/{trial.pk}/events/").json()["results"]

    # The home is outside the workspace: named in full, as the place the agent wrote to.
    assert re.findall(r'<code class="path">([^<]*)</code>', page) == [
        "calc.py",
        f"{root}/home/.bashrc",
        "README.md",
    ]
    assert event["data"]["paths"] == ["calc.py", f"{root}/home/.bashrc", "README.md"]
