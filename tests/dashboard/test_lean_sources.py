"""Captured sources are stored once per distinct file, and every page still shows each version's
exact source."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from factories import (
    EVAL_PATH,
    EVAL_SOURCE,
    make_batch,
    make_case,
    make_cast,
    make_checks,
    make_definition,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from evals_app.models import CaseVersion, SourceFile
from evals_app.source_texts import text_digest

pytestmark = pytest.mark.django_db

EDITED_SOURCE = EVAL_SOURCE.replace('"/health" in text', '"/healthz" in text')


def _stored_columns() -> list[dict]:
    """What the case version rows hold in the database, read past the model."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT sources FROM evals_app_caseversion ORDER BY id")
        return [row[0] for row in cursor.fetchall()]


def test_two_cases_of_one_file_store_its_text_once():
    cast = make_cast()
    first = make_version(make_case(cast.acme, "health-route"))
    second = make_version(make_case(cast.acme, "mentions-tests"))

    assert SourceFile.objects.count() == 1
    assert SourceFile.objects.get().text == EVAL_SOURCE
    # The rows name the text by digest; the text itself is not repeated in them.
    for column in _stored_columns():
        assert EVAL_SOURCE not in str(column) and text_digest(EVAL_SOURCE) in str(column)
    for version in (first, second):
        assert dict(CaseVersion.objects.get(pk=version.pk).sources) == {EVAL_PATH: EVAL_SOURCE}


def test_an_edited_file_adds_one_text_and_the_case_page_diffs_the_exact_sources(client):
    cast = make_cast()
    case = make_case(cast.acme, "health-route")
    make_version(case)
    changed = make_definition("api", "health-route", prompt="Add a /health route, tested")
    make_version(case, definition=changed, sources={EVAL_PATH: EDITED_SOURCE})
    make_version(make_case(cast.acme, "other"), sources={EVAL_PATH: EDITED_SOURCE})

    assert sorted(SourceFile.objects.values_list("text", flat=True)) == sorted(
        [EVAL_SOURCE, EDITED_SOURCE]
    )
    client.force_login(cast.alice)
    html = client.get(f"/cases/{case.pk}/").content.decode()
    version_two = re.search(r'id="version-2".*?</li>\s*<li', html, re.S).group(0)
    assert "/healthz" in version_two


def test_the_run_page_shows_the_validators_source_from_the_shared_text(client):
    cast = make_cast()
    version = make_version(make_case(cast.acme, "health-route"))
    make_version(make_case(cast.acme, "twin"))  # same file, same stored text
    run = make_run(make_batch(cast.acme, status="finished"), version, make_variant(cast.acme, "v"))
    make_checks(make_trial(run, 0))
    client.force_login(cast.alice)
    html = client.get(f"/runs/{run.pk}/").content.decode()

    validator = re.search(r'<article id="check-1".*?</article>', html, re.S).group(0)
    assert f"{EVAL_PATH}, lines 5–8" in validator
    assert "has_health_route" in validator and "/health" in validator


def test_the_api_shows_a_versions_sources_in_full(client):
    cast = make_cast()
    version = make_version(make_case(cast.acme, "health-route"))
    client.force_login(cast.alice)
    shown = client.get(f"/api/case-versions/{version.pk}/").json()
    assert shown["sources"] == {EVAL_PATH: EVAL_SOURCE}


def test_the_migration_moves_texts_out_of_existing_rows():
    """Rows written before 0007 hold their texts inline; the data migration leaves one
    SourceFile per distinct text and digests in the rows."""
    import importlib

    lean = importlib.import_module("evals_app.migrations.0007_lean_storage")
    cast = make_cast()
    versions = [make_version(make_case(cast.acme, slug)) for slug in ("one", "two")]
    SourceFile.objects.all().delete()
    with connection.cursor() as cursor:  # as 0006 left them: the text in every row
        for version in versions:
            cursor.execute(
                "UPDATE evals_app_caseversion SET sources = %s WHERE id = %s",
                [json.dumps({EVAL_PATH: EVAL_SOURCE}), version.pk],
            )
    before = MigrationExecutor(connection).loader.project_state(("evals_app", "0006_mocks")).apps

    class StateApps:
        """0006's CaseVersion (sources a plain JSON column) beside 0007's SourceFile."""

        @staticmethod
        def get_model(app: str, name: str):
            return SourceFile if name == "SourceFile" else before.get_model(app, name)

    lean.sources_to_source_files(StateApps, None)

    assert list(SourceFile.objects.values_list("text", flat=True)) == [EVAL_SOURCE]
    for version in versions:
        assert dict(CaseVersion.objects.get(pk=version.pk).sources) == {EVAL_PATH: EVAL_SOURCE}
