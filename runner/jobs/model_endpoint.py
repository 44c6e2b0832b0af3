"""The project's model endpoint, read from Django settings before any trial starts.

runner/llm and runner/core import nothing of Django (the import-linter contracts in
pyproject.toml), so the Django side reads ``PROCTOR_LLM_*`` here, once, and hands runner/llm the
resolved LLMConfig. ``RunnerConfig.ready()`` calls ``install()``, so every process that sets up
Django (the web server, the worker, management commands, tests) has it before the core runs.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from runner.llm.endpoints import DEFAULT_TIMEOUT_S, LLMConfig, use_project_config

SETTING_PREFIX = "PROCTOR_LLM_"


def config_from_settings() -> LLMConfig:
    """The endpoint ``PROCTOR_LLM_*`` settings name (proctor/site/settings.py validates them)."""

    def setting(name: str) -> str | None:
        value = getattr(settings, f"{SETTING_PREFIX}{name}", None)
        return str(value) if value else None

    return LLMConfig(
        base_url=setting("BASE_URL"),
        api_key=setting("API_KEY"),
        model=setting("MODEL"),
        command=setting("COMMAND"),
        timeout_s=float(setting("TIMEOUT_S") or DEFAULT_TIMEOUT_S),
    )


def install() -> LLMConfig:
    """Read the settings and make them the project's endpoint; returns what was installed.

    Settings are fixed once Django is set up, except under ``override_settings`` (and
    pytest-django's ``settings`` fixture), which announce each change: those re-read them.
    """
    config = config_from_settings()
    use_project_config(config)
    setting_changed.connect(_reread_changed_setting, dispatch_uid=__name__)
    return config


def _reread_changed_setting(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith(SETTING_PREFIX):
        use_project_config(config_from_settings())
