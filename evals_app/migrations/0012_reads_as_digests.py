"""What a validator, prepare or mock handler reads was recorded by value before record format 2,
so a token read from the environment sat in ``CaseVersion.definition`` as text. Keep only its
digest, as new records do (numbers, booleans, names of modules and classes, project paths and
callables' hashes stay; they hold no text).

The version's hash is left as it was: it names the definition that was run. The next
`proctor eval` of the same file records its reads the new way, a new version.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import migrations

# Descriptions that hold no user text: kept as they are.
_KEPT_SHAPES = ({"path"}, {"module"}, {"class"}, {"sha256"}, {"callable", "sha256"})


def _digest(text: str) -> dict[str, str]:
    # The same digest as evals_app.resolution.text_digest, written out: a migration keeps the
    # code it ran with.
    return {"sha256": hashlib.sha256(("proctor-read:" + text).encode()).hexdigest()[:16]}


def _without_text(value: Any) -> Any:
    if isinstance(value, str):
        return _digest(value)
    if isinstance(value, list):
        return [_without_text(item) for item in value]
    if isinstance(value, dict):
        if set(value) in _KEPT_SHAPES:
            return value
        if set(value) == {"repr"}:
            return _digest(str(value["repr"]))
        return {key: _without_text(item) for key, item in value.items()}
    return value


def _scrubbed(entry: Any) -> Any:
    """``entry`` (a definition or any part of it) with every ``reads`` made text-free."""
    if isinstance(entry, list):
        return [_scrubbed(item) for item in entry]
    if not isinstance(entry, dict):
        return entry
    return {
        key: {name: _without_text(v) for name, v in value.items()}
        if key == "reads" and isinstance(value, dict)
        else _scrubbed(value)
        for key, value in entry.items()
    }


def reads_as_digests(apps, schema_editor) -> None:
    CaseVersion = apps.get_model("evals_app", "CaseVersion")
    for version in CaseVersion.objects.only("pk", "definition").iterator():
        scrubbed = _scrubbed(version.definition)
        if scrubbed != version.definition:
            CaseVersion.objects.filter(pk=version.pk).update(definition=scrubbed)


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0011_no_redundant_trial_indexes")]

    operations = [migrations.RunPython(reads_as_digests, migrations.RunPython.noop)]
