"""The trial page shows the code that graded a promptfoo-style assertion: a JavaScript file's
text (captured when the version was made, not read again), and the transform its output went
through first."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest
from factories import (
    assertion_spec,
    make_assertion_check,
    make_batch,
    make_case,
    make_cast,
    make_definition,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from proctor.assertions import assertion, assertion_extras

pytestmark = pytest.mark.django_db

TONE_JS = "module.exports.politeness = (output) => ({pass: !/sorry/i.test(output), score: 0.5});\n"


def recorded(item) -> dict:
    """The assertion as a case version records it."""
    spec = assertion_spec(item.type, item.value, name=item.label, metric=item.metric)
    return {**spec, **assertion_extras(item)}


def test_the_page_shows_the_javascript_and_the_transform_that_graded(
    client, tmp_path: Path
) -> None:
    checks_js = tmp_path / "tone.js"
    checks_js.write_text(TONE_JS)
    graded_by = assertion(
        "javascript",
        f"file://{checks_js}:politeness",
        metric="tone",
        transform="output.trim()",
    )
    inline = assertion("python", "'ships' in output.lower()")
    checks_js.write_text("// edited after the run\n")  # the page shows what graded
    cast = make_cast()
    version = make_version(
        make_case(cast.acme, "order-status"),
        definition=make_definition(
            "orders", "order-status", checks=[recorded(graded_by), recorded(inline)]
        ),
    )
    trial = make_trial(make_run(make_batch(cast.acme), version, make_variant(cast.acme, "a")))
    make_assertion_check(trial, 0, name=graded_by.label, metric="tone", score=0.5)
    make_assertion_check(trial, 1, name=inline.label, metric="python")

    client.force_login(cast.alice)
    html = client.get(f"/trials/{trial.pk}/").content.decode()

    def check(index: int) -> str:
        found = re.search(rf'<article id="check-{index}".*?</article>', html, re.S).group(0)
        return html_lib.unescape(re.sub(r"<[^>]+>", "", found))

    tone = check(0)
    assert "transform inline JavaScript, then JavaScript file://" in tone
    assert "tone.js:politeness" in tone
    assert "output.trim()" in tone
    assert "module.exports.politeness" in tone and "edited after the run" not in tone
    assert "inline Python" in check(1)
    assert "'ships' in output.lower()" in check(1)
