"""Long agent values on the trial page: each is clipped at 10,000 characters with how much is
left out and links to the artifacts that hold it whole, so a trial of 64 KiB values stays small."""

from __future__ import annotations

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

from evals_app.models import Event

pytestmark = pytest.mark.django_db


def test_it_clips_long_values_with_a_link_to_the_full_artifact(client):
    cast = make_cast()
    batch = make_batch(cast.acme)
    run = make_run(batch, make_version(make_case(cast.acme, "long")), make_variant(cast.acme, "v"))
    trial = make_trial(run)
    long_text = "<b>" + "x" * 60_000
    payloads = [
        ("Message", {"role": "assistant", "text": long_text, "usage": None}),
        ("Command", {"command": "cat", "exit_code": 0, "output": long_text, "origin": "agent"}),
        ("ProtocolError", {"line": long_text, "error": "Message: bad"}),
        ("Log", {"stream": "proctor", "text": "short and whole"}),
    ]
    Event.objects.bulk_create(
        [
            Event(trial=trial, seq=seq, kind=kind, at=timezone.now(), data=data)
            for seq, (kind, data) in enumerate(payloads)
        ]
    )
    client.force_login(cast.alice)

    html = client.get(f"/trials/{trial.pk}/").content.decode()

    assert len(html) < 100_000
    assert html.count("… [clipped: 50,003 more characters; in full in") == 3
    assert html.count(f'href="/trials/{trial.pk}/artifacts/events.jsonl"') == 3
    assert html.count(f'href="/trials/{trial.pk}/artifacts/output.log"') == 3
    assert "&lt;b&gt;" + "x" * 9_997 + "<span" in html
    assert "short and whole" in html
