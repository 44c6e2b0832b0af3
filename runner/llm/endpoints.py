"""Which model endpoint a consultation goes to, and how that choice is layered.

Settings (``PROCTOR_LLM_*``) give the default; a suite or variant may name its own endpoint;
the ``model=`` of a judge or responder, or ``--judge-model`` / ``--responder-model``, picks the
model last. The key travels in the config but is never part of how it describes itself.

Nothing here imports Django: runner/core, which consults models through this package, must run
from values alone (the import-linter contracts in pyproject.toml). The Django side reads the
settings once, before any trial starts, and installs the result with ``use_project_config``
(runner/jobs/model_endpoint.py, from ``RunnerConfig.ready()``). A plain script that never set up
Django gets the same ``PROCTOR_LLM_*`` variables from the environment.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 3

KIND_HTTP = "http"
KIND_COMMAND = "command"
KIND_UNCONFIGURED = "unconfigured"

# The wire APIs an HTTP endpoint may speak: OpenAI's Chat Completions (what the project's
# endpoint, judges and responders use) or Anthropic's Messages (a chat agent under test).
API_OPENAI = "openai"
API_ANTHROPIC = "anthropic"
APIS = (API_OPENAI, API_ANTHROPIC)


@dataclass(frozen=True)
class LLMConfig:
    base_url: str | None = None
    api_key: str | None = dataclasses.field(default=None, repr=False)
    model: str | None = None
    command: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES
    api: str = API_OPENAI

    @property
    def kind(self) -> str:
        if self.base_url:
            return KIND_HTTP
        if self.command:
            return KIND_COMMAND
        return KIND_UNCONFIGURED

    def describe(self) -> str:
        """Where consultations go, for logs and the terminal; never the key."""
        model = f" model {self.model}" if self.model else " (endpoint's default model)"
        if self.kind == KIND_HTTP:
            text = f"{self.base_url}{model}"
        elif self.kind == KIND_COMMAND:
            text = f"command `{self.command}`{model}"
        else:
            text = "no model endpoint configured"
        return scrub_key(text, self.api_key)


def scrub_key(text: str, api_key: str | None) -> str:
    """``text`` with the key replaced: servers sometimes quote the key they refused."""
    if api_key and api_key in text:
        return text.replace(api_key, "[redacted]")
    return text


# The project's endpoint as the Django side resolved it at start-up. A module-level value,
# not a parameter of every caller, because the callers that need it (the chat harness's option
# checks, planning, the management commands) run long after start-up and far from it; passing
# ``project=`` to ``resolve_config`` overrides it where a caller has the value at hand.
_project_config: LLMConfig | None = None


def use_project_config(config: LLMConfig | None) -> None:
    """Make ``config`` the project's endpoint (None goes back to reading the environment).
    Called by the Django side at start-up and whenever a ``PROCTOR_LLM_*`` setting changes."""
    global _project_config
    _project_config = config


def project_config() -> LLMConfig:
    """The project's endpoint: the one installed at start-up, else the environment's."""
    if _project_config is not None:
        return _project_config
    return environment_config()


def environment_config() -> LLMConfig:
    """The endpoint the ``PROCTOR_LLM_*`` environment variables name (a consultation run from a
    plain script, with no Django settings to read)."""

    def variable(name: str) -> str | None:
        return os.environ.get(f"PROCTOR_LLM_{name}", "").strip() or None

    return LLMConfig(
        base_url=variable("BASE_URL"),
        api_key=variable("API_KEY"),
        model=variable("MODEL"),
        command=variable("COMMAND"),
        timeout_s=float(variable("TIMEOUT_S") or DEFAULT_TIMEOUT_S),
    )


def overlay(under: LLMConfig, over: LLMConfig) -> LLMConfig:
    """``under`` with every field ``over`` sets.

    Naming an endpoint replaces the endpoint: an overlay with only a command drops the base
    URL beneath it (and the other way round), so a suite that says "use this command" gets it
    even where settings name an HTTP endpoint. ``timeout_s`` and ``max_retries`` count as set
    when they differ from their defaults, since they cannot be None.
    """
    base_url = over.base_url or under.base_url
    command = over.command or under.command
    if over.command and not over.base_url:
        base_url = None
    if over.base_url and not over.command:
        command = None
    return LLMConfig(
        base_url=base_url,
        api_key=over.api_key or under.api_key,
        model=over.model or under.model,
        command=command,
        timeout_s=over.timeout_s if over.timeout_s != DEFAULT_TIMEOUT_S else under.timeout_s,
        max_retries=over.max_retries
        if over.max_retries != DEFAULT_MAX_RETRIES
        else under.max_retries,
        # The API goes with the endpoint that speaks it.
        api=over.api if over.base_url else under.api if base_url else API_OPENAI,
    )


def resolve_config(
    *,
    model_override: str | None = None,
    base: LLMConfig | None = None,
    project: LLMConfig | None = None,
) -> LLMConfig:
    """The project's endpoint (``project``, else ``project_config()``), then the suite's or
    variant's endpoint (``base``), then ``model_override``."""
    config = project if project is not None else project_config()
    if base is not None:
        config = overlay(config, base)
    if model_override:
        config = dataclasses.replace(config, model=model_override)
    return config


# Where each vendor's own tools look for its endpoint and key, and its public endpoint.
_VENDOR_BASE_URLS = {
    API_OPENAI: ("OPENAI_BASE_URL", "OPENAI_API_BASE_URL"),
    API_ANTHROPIC: ("ANTHROPIC_BASE_URL",),
}
_VENDOR_KEYS = {API_OPENAI: "OPENAI_API_KEY", API_ANTHROPIC: "ANTHROPIC_API_KEY"}
_VENDOR_PUBLIC_URLS = {
    API_OPENAI: "https://api.openai.com/v1",
    API_ANTHROPIC: "https://api.anthropic.com",
}


def vendor_config(api: str, environ: Mapping[str, str] | None = None) -> LLMConfig | None:
    """The endpoint a vendor's own SDK would use from the environment: its base URL variable
    (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``) with its key variable, or its public endpoint
    when only the key is set; None when neither is set (the project's endpoint applies)."""
    source = os.environ if environ is None else environ

    def variable(name: str) -> str | None:
        return source.get(name, "").strip() or None

    base_url = next((value for name in _VENDOR_BASE_URLS[api] if (value := variable(name))), None)
    api_key = variable(_VENDOR_KEYS[api])
    if base_url is None and api_key is None:
        return None
    return LLMConfig(base_url=base_url or _VENDOR_PUBLIC_URLS[api], api_key=api_key, api=api)
