"""The Celery application. With REDIS_URL unset it never talks to a broker (embedded mode)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proctor.site.settings")

app = Celery("proctor")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["runner.jobs"])
