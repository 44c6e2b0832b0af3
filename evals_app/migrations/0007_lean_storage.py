"""Schema changes for issue 10 (lean storage) and issue 11."""

import hashlib

from django.db import migrations, models

import evals_app.source_texts


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def sources_to_source_files(apps, schema_editor):
    """Each version's captured texts move to one SourceFile per distinct text; the column
    keeps path -> digest. Runs while ``sources`` is still a plain JSON field."""
    CaseVersion = apps.get_model("evals_app", "CaseVersion")
    SourceFile = apps.get_model("evals_app", "SourceFile")
    stored: set[str] = set()
    rows = CaseVersion.objects.exclude(sources={}).values_list("pk", "sources")
    for pk, texts in rows.iterator(chunk_size=200):
        digests = {}
        for path, text in (texts or {}).items():
            digest = _digest(text)
            digests[path] = digest
            if digest not in stored:
                SourceFile.objects.get_or_create(
                    digest=digest, defaults={"size": len(text), "text": text}
                )
                stored.add(digest)
        CaseVersion.objects.filter(pk=pk).update(sources=digests)


def source_files_to_sources(apps, schema_editor):
    CaseVersion = apps.get_model("evals_app", "CaseVersion")
    SourceFile = apps.get_model("evals_app", "SourceFile")
    rows = CaseVersion.objects.exclude(sources={}).values_list("pk", "sources")
    for pk, digests in rows.iterator(chunk_size=200):
        texts = dict(
            SourceFile.objects.filter(digest__in=set(digests.values())).values_list(
                "digest", "text"
            )
        )
        CaseVersion.objects.filter(pk=pk).update(
            sources={path: texts[d] for path, d in digests.items() if d in texts}
        )


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0006_mocks")]

    operations = [
        # Captured sources stored once (evals_app.source_texts).
        migrations.CreateModel(
            name="SourceFile",
            fields=[
                ("digest", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("size", models.PositiveIntegerField(default=0)),
                ("text", models.TextField()),
            ],
        ),
        migrations.RunPython(sources_to_source_files, source_files_to_sources, elidable=False),
        migrations.AlterField(
            model_name="caseversion",
            name="sources",
            field=evals_app.source_texts.SourceTextsField(blank=True, default=dict),
        ),
        migrations.AddIndex(
            model_name="trial",
            index=models.Index(fields=["run", "status"], name="lean_trial_status_in_run"),
        ),
    ]
