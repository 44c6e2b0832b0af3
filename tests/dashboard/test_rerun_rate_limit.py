"""Rerun requests are limited per user (PROCTOR_RERUN_RATE), across the dashboard's buttons and
the API's actions together: past the limit a request answers 429 in one sentence and starts
nothing, and another user is not affected."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.core.exceptions import ImproperlyConfigured
from factories import make_batch_with_grid, make_cast
from rest_framework.test import APIClient

from evals_app.models import Batch, Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


@pytest.fixture(autouse=True)
def queued(monkeypatch) -> list[int]:
    ids: list[int] = []
    monkeypatch.setattr("runner.batches.reruns.enqueue", lambda trial_ids: ids.extend(trial_ids))
    return ids


@pytest.fixture(autouse=True)
def three_a_minute(settings):
    settings.PROCTOR_RERUN_RATE = "3/minute"


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def batch(cast):
    return make_batch_with_grid(
        cast.acme,
        cases=2,
        variants=1,
        trials=1,
        status=lambda c, v, t: S.FAILED if c == 0 else S.PASSED,
    )


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def assert_too_many(response) -> str:
    assert response.status_code == 429, response.content
    assert int(response["Retry-After"]) >= 1
    if "text/plain" in response["Content-Type"]:
        return response.content.decode()
    return response.json()["detail"]


def test_it_refuses_a_fourth_rerun_from_the_dashboard_in_a_minute(client, cast, batch):
    run = batch.runs.order_by("id").first()
    client.force_login(cast.bob)
    for _ in range(3):
        assert client.post(f"/runs/{run.pk}/rerun/").status_code == 302
    batches = Batch.objects.count()

    sentence = assert_too_many(client.post(f"/batches/{batch.pk}/rerun/"))

    assert sentence.startswith("Too many reruns: at most 3/minute per user (PROCTOR_RERUN_RATE)")
    assert sentence.endswith(".") and ". " not in sentence
    assert Batch.objects.count() == batches  # nothing started


@pytest.mark.parametrize(
    "path",
    ["/api/batches/{batch}/rerun/", "/api/batches/{batch}/rerun-case/", "/api/runs/{run}/rerun/"],
)
def test_it_refuses_a_fourth_rerun_through_the_api(cast, batch, path):
    run = batch.runs.order_by("id").first()
    api = api_for(cast.bob)
    url = path.format(batch=batch.pk, run=run.pk)
    body = {"scope": "all", "case": run.case_version.case.slug}
    for _ in range(3):
        assert api.post(url, body, format="json").status_code == 201
    batches = Batch.objects.count()

    sentence = assert_too_many(api.post(url, body, format="json"))

    assert "PROCTOR_RERUN_RATE" in sentence and ". " not in sentence
    assert Batch.objects.count() == batches


@pytest.mark.parametrize("through", ["dashboard", "api"])
def test_retry_after_is_a_whole_second_when_the_window_ends_sooner(
    client, cast, batch, monkeypatch, through
):
    # 0.4 s before a minute's window ends: waiting "0" seconds would be refused again.
    from dashboard import throttling

    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: 60 * 28_800_000 - 0.4))
    run = batch.runs.order_by("id").first()
    client.force_login(cast.bob)
    api = api_for(cast.bob)
    post = (
        (lambda: client.post(f"/runs/{run.pk}/rerun/"))
        if through == "dashboard"
        else (lambda: api.post(f"/api/runs/{run.pk}/rerun/"))
    )
    for _ in range(3):
        assert post().status_code in (201, 302)

    response = post()

    assert response.status_code == 429
    assert response["Retry-After"] == "1"
    assert "try again in 1 second." in assert_too_many(response)


def test_the_dashboard_and_the_api_share_one_limit(client, cast, batch):
    run = batch.runs.order_by("id").first()
    client.force_login(cast.bob)
    api = api_for(cast.bob)
    assert client.post(f"/runs/{run.pk}/rerun/").status_code == 302
    assert api.post(f"/api/runs/{run.pk}/rerun/").status_code == 201
    assert client.post(f"/batches/{batch.pk}/rerun-failed/").status_code == 302

    assert_too_many(api.post(f"/api/runs/{run.pk}/rerun/"))
    assert_too_many(client.post(f"/runs/{run.pk}/rerun/"))


def test_another_user_is_not_affected(client, cast, batch):
    run = batch.runs.order_by("id").first()
    client.force_login(cast.bob)
    for _ in range(3):
        client.post(f"/runs/{run.pk}/rerun/")
    assert_too_many(client.post(f"/runs/{run.pk}/rerun/"))

    client.force_login(cast.alice)
    assert client.post(f"/runs/{run.pk}/rerun/").status_code == 302
    assert api_for(cast.alice).post(f"/api/runs/{run.pk}/rerun/").status_code == 201


def test_the_default_is_thirty_a_minute_and_a_bad_rate_stops_start_up(monkeypatch):
    from proctor.site import settings as proctor_settings

    assert proctor_settings._rate("PROCTOR_RERUN_RATE_UNSET", "30/minute") == "30/minute"
    monkeypatch.setenv("PROCTOR_RERUN_RATE", "lots")
    with pytest.raises(ImproperlyConfigured, match="PROCTOR_RERUN_RATE must be a count"):
        proctor_settings._rate("PROCTOR_RERUN_RATE", "30/minute")


# Counts reruns for one user through the throttle, in a process of its own, and prints how
# many it was allowed.
COUNTING_PROCESS = """
import os, sys
from types import SimpleNamespace
import django
django.setup()
from dashboard.throttling import RerunRateThrottle
request = SimpleNamespace(user=SimpleNamespace(pk=7, is_authenticated=True), META={})
print(sum(RerunRateThrottle().allow_request(request, None) for _ in range(20)))
"""


def test_every_web_process_counts_against_one_limit(redis_url, tmp_path):
    """Two processes (two web servers of the scaled mode) share the limit through Redis: 5 a
    day allows 5 in all, not 5 each."""
    import os
    import subprocess
    import sys

    import redis
    from conftest import proctor_env

    redis.Redis.from_url(redis_url).flushdb()
    env = proctor_env(
        tmp_path / "home",
        REDIS_URL=redis_url,
        DATABASE_URL="postgresql://postgres@127.0.0.1:5432/unused",
        PROCTOR_RERUN_RATE="5/day",
        DJANGO_SETTINGS_MODULE="proctor.site.settings",
        PYTHONPATH=os.pathsep.join(sys.path),
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", COUNTING_PROCESS], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    allowed = [int(process.communicate(timeout=120)[0].strip()) for process in processes]
    assert sum(allowed) == 5, allowed


def test_a_rerun_goes_through_when_the_limits_cache_is_down(client, cast, batch, settings, caplog):
    from conftest import free_port

    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
    client.force_login(cast.alice)

    response = client.post(f"/batches/{batch.pk}/rerun/")

    assert response.status_code == 302
    assert Batch.objects.count() == 2
    assert "the rerun limit's cache is unreachable" in caplog.text
