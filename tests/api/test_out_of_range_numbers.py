"""Numbers no database column can hold: every integer query parameter of the API and the
dashboard answers 400 with one sentence, every id in a path beyond 64 bits answers 404, never a
500 (SQLite raises OverflowError for them, PostgreSQL "bigint out of range")."""

from __future__ import annotations

import pytest

TOO_LARGE = ["99999999999999999999999", "9223372036854775808", "-9223372036854775809"]
HUGE = "99999999999999999999999"

# (path, parameter): {trial} is one of acme's trials.
API_PARAMETERS = [
    ("/api/runs/", "batch"),
    ("/api/runs/", "variant"),
    ("/api/trials/", "run"),
    ("/api/trials/", "batch"),
    ("/api/trials/{trial}/events/", "after"),
]
# upto and turn are read with after (a later page of a transcript).
DASHBOARD_PARAMETERS = [
    ("/", "batch"),
    ("/", "offset"),
    ("/trials/{trial}/", "after"),
    ("/trials/{trial}/?after=0", "upto"),
    ("/trials/{trial}/?after=0", "turn"),
]
API_PATHS = [
    f"/api/{endpoint}/{HUGE}/"
    for endpoint in ["suites", "cases", "case-versions", "variants", "batches", "runs", "trials"]
] + [f"/api/trials/{HUGE}/events/", f"/api/batches/{HUGE}/report/"]
API_POSTS = [
    f"/api/batches/{HUGE}/rerun/",
    f"/api/batches/{HUGE}/rerun-case/",
    f"/api/runs/{HUGE}/rerun/",
]
DASHBOARD_PATHS = [
    f"/batches/{HUGE}/",
    f"/batches/{HUGE}/metrics/",
    f"/runs/{HUGE}/",
    f"/trials/{HUGE}/",
    f"/trials/{HUGE}/artifacts/output.log",
    f"/cases/{HUGE}/",
]
DASHBOARD_POSTS = [
    f"/batches/{HUGE}/rerun/",
    f"/batches/{HUGE}/rerun-failed/",
    f"/batches/{HUGE}/cases/{HUGE}/rerun/",
    f"/runs/{HUGE}/rerun/",
]


@pytest.fixture
def trial(acme_world):
    return acme_world.runs[0].trials.first()


def one_sentence(text: str) -> bool:
    return text.endswith(".") and text.count(". ") == 0 and "Traceback" not in text


@pytest.mark.django_db
@pytest.mark.parametrize("value", TOO_LARGE)
@pytest.mark.parametrize(("path", "name"), API_PARAMETERS)
def test_an_api_filter_beyond_64_bits_is_a_400(api_as, alice, trial, path, name, value):
    response = api_as(alice).get(path.format(trial=trial.pk), {name: value})
    assert response.status_code == 400, response.content
    message = response.json()[name]
    assert isinstance(message, str) and one_sentence(message) and name in message


@pytest.mark.django_db
@pytest.mark.parametrize("value", TOO_LARGE)
@pytest.mark.parametrize(("path", "name"), DASHBOARD_PARAMETERS)
def test_a_dashboard_number_beyond_64_bits_is_a_400(client, alice, trial, path, name, value):
    client.force_login(alice)
    response = client.get(
        f"{path.format(trial=trial.pk)}{'&' if '?' in path else '?'}{name}={value}"
    )
    assert response.status_code == 400, response.content
    text = response.content.decode()
    assert one_sentence(text) and name in text


@pytest.mark.django_db
@pytest.mark.parametrize("path", API_PATHS + DASHBOARD_PATHS)
def test_an_id_beyond_64_bits_in_a_path_is_not_found(client, alice, acme_world, path):
    client.force_login(alice)
    assert client.get(path).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("path", API_POSTS + DASHBOARD_POSTS)
def test_a_rerun_of_an_id_beyond_64_bits_is_not_found(client, alice, acme_world, path):
    client.force_login(alice)
    assert client.post(path, {"case": "health-route"}).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["page", "page_size"])
def test_a_page_number_beyond_64_bits_is_never_a_500(api_as, alice, trial, name):
    response = api_as(alice).get(f"/api/trials/{trial.pk}/events/", {name: HUGE})
    assert response.status_code in (200, 404)
