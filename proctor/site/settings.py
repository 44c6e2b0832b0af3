"""Proctor's settings, read top to bottom.

Every value has a default that works on a laptop with nothing configured (SQLite under
``PROCTOR_HOME``, no Redis: the embedded mode). Setting ``DATABASE_URL`` and ``REDIS_URL``
switches to the scaled mode. A bad value stops start-up with one sentence naming the variable.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, "").strip() or default


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}.")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name, "").strip()
    return [part.strip() for part in raw.split(",") if part.strip()] if raw else default


# Where an embedded install keeps its database and artifacts: the current folder's .proctor/,
# so `proctor eval` and `proctor serve` run from the same project folder share their results.
PROCTOR_HOME = Path(env_str("PROCTOR_HOME", str(Path.cwd() / ".proctor"))).resolve()
ARTIFACTS_DIR = Path(env_str("PROCTOR_ARTIFACTS_DIR", str(PROCTOR_HOME / "artifacts"))).resolve()
CACHE_DIR = Path(env_str("PROCTOR_CACHE_DIR", str(PROCTOR_HOME / "cache"))).resolve()
# Bundles (the code a case version and a variant ran) are kept in the database unless this
# names a folder (an object store mount that every worker shares).
BUNDLE_STORE = env_str("PROCTOR_BUNDLE_STORE", "database")
# The largest bundle `proctor eval` records; a larger project folder is refused in one line
# naming its largest files (trim it with a .proctorignore).
BUNDLE_MAX_BYTES = int(float(env_str("PROCTOR_BUNDLE_MAX_MB", "50")) * 1024 * 1024)
# Each trial's final workspace is kept for re-grading (`proctor regrade`): file contents by
# sha256 in a store shared by every trial, beside the artifacts (workers of the scaled mode see
# the same folder); a workspace larger than this is not kept, and says so.
WORKSPACE_STORE = ARTIFACTS_DIR / "workspaces"
WORKSPACE_KEEP_BYTES = int(float(env_str("PROCTOR_WORKSPACE_KEEP_MB", "50")) * 1024 * 1024)
# `owner/name` sources resolve against this host.
GIT_HOST = env_str("PROCTOR_GIT_HOST", "https://github.com")

REDIS_URL = os.environ.get("REDIS_URL", "").strip()
# Celery reads a URL of another scheme, or none, as an AMQP host name and retries it for ever.
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(
        "REDIS_URL is not a Redis URL such as redis://127.0.0.1:6379/0 (it must start with "
        "redis://, rediss:// or unix://)"
    )
EMBEDDED = not REDIS_URL

# The key a laptop runs with when nothing is configured; `proctor serve` refuses to listen
# beyond loopback with it (anyone could forge sessions) and warns on loopback.
DEFAULT_SECRET_KEY = "proctor-insecure-local-key-change-me-in-production"
SECRET_KEY = env_str("DJANGO_SECRET_KEY", DEFAULT_SECRET_KEY)
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_htmx",
    "template_partials",
    "evals_app",
    "runner",
    "dashboard",
]
# What only the web side (pages, API, admin) needs. PROCTOR_WEB_APPS=false leaves these out:
# `proctor eval` sets it for itself (proctor/site/cli.py), since loading them would be a good part of
# its start-up and it shows none of them. Their tables are made by the next command that loads
# them (serve, createuser and createtoken migrate what is missing).
WEB_APPS = (
    "django.contrib.admin",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "dashboard",
)
if not env_bool("PROCTOR_WEB_APPS", True):
    INSTALLED_APPS = [app for app in INSTALLED_APPS if app not in WEB_APPS]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Pages and API lists compress 10x (a 100-row grid: 330 KB -> 30 KB). BREACH needs a secret
    # reflected next to attacker-controlled text in a compressed body: the CSRF token Django
    # puts in forms is masked afresh on every response, session and API tokens travel only in
    # headers, and Django pads each gzip body with random bytes (the "Heal the BREACH" fix).
    "django.middleware.gzip.GZipMiddleware",
    "dashboard.content_security.ContentSecurityPolicyMiddleware",
    "dashboard.nul_bytes.RefuseNulBytesInQueries",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "proctor.site.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "proctor.site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# Django's SQLite backend, making the database's folder when it first opens the database.
SQLITE_ENGINE = "proctor.site.backends.sqlite3"


def _home_problem(home: Path) -> str | None:
    """Why the folder ``home`` could never hold the database, if it could not: it, or the
    nearest of its parents that is there, is no folder, or that parent, which would hold the
    folders still to be made, is not writable."""
    there = home
    while not there.exists() and there.parent != there:
        there = there.parent
    if not there.is_dir():
        return "it is a file" if there == home else f"{there} is a file"
    if there != home and not os.access(there, os.W_OK | os.X_OK):
        return f"cannot make folders in {there}"
    return None


def _database() -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        # The folder itself is made when the database is first opened (SQLITE_ENGINE), so a
        # command that records nothing (`proctor --help`, `proctor init`) leaves none behind.
        if problem := _home_problem(PROCTOR_HOME):
            raise ImproperlyConfigured(
                f"PROCTOR_HOME ({PROCTOR_HOME}) cannot hold Proctor's database: {problem}; "
                f"point PROCTOR_HOME at a folder you can write in"
            )
        url = f"sqlite:///{PROCTOR_HOME / 'proctor.sqlite3'}"
    try:
        config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=0))
    except Exception as exc:  # the library raises several types for a malformed URL
        said = str(exc).split(". ")[0].rstrip(".")
        raise ImproperlyConfigured(
            f"DATABASE_URL is not a database URL such as postgresql://user@host:5432/name ({said})"
        ) from exc
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["ENGINE"] = SQLITE_ENGINE
        # Trials write concurrently from a thread pool: IMMEDIATE transactions take the write
        # lock up front (a read-then-write would otherwise fail with "database is locked"),
        # WAL lets the dashboard read while trials write, and the timeout waits for the lock.
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
        config["TEST"] = {"NAME": str(PROCTOR_HOME / "test.sqlite3")}
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = PROCTOR_HOME / "staticfiles"

# --- live updates ------------------------------------------------------------------------------
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # A socket timeout longer than the layer's blocking read (5 s): with redis-py 8 an
            # equal one drops every websocket that stays quiet for 5 s.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}]},
        }
    }
else:
    # In memory, plus an outbox file that `proctor serve` tails, so a batch that `proctor eval`
    # runs in another process fills in the open pages too (see proctor/site/channel_layer.py). The
    # file sits beside the SQLite database: processes that share the database share it.
    _sqlite = DATABASES["default"]["ENGINE"] == SQLITE_ENGINE
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "proctor.site.channel_layer.OutboxChannelLayer",
            "CONFIG": {
                "path": f"{DATABASES['default']['NAME']}-live"
                if _sqlite
                else str(PROCTOR_HOME / "live-updates.sqlite3")
            },
        }
    }

# --- cache ------------------------------------------------------------------------------------
# What every web process must count together (the rerun rate limit) lives in the cache: Redis in
# the scaled mode, shared by all of them; the embedded mode has one web process (`serve`).
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "proctor",
            # A dead Redis answers at once or within these, never holds a request for long.
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }

# --- background work ---------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = EMBEDDED
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker that dies mid-task (a killed thread pool's process included) hands its message back.
CELERY_TASK_REJECT_ON_WORKER_LOST = True


def _positive_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ImproperlyConfigured(f"{name} must be a whole number of 1 or more, not {raw!r}.")
    return int(raw)


# Leases (runner/jobs/leases.py): a running trial's worker renews its lease every
# PROCTOR_LEASE_S / 3 seconds; a lease PROCTOR_LEASE_S old means the worker died, and the
# reaper re-queues the trial (up to PROCTOR_MAX_ATTEMPTS runs in all) or ends it worker_lost.
PROCTOR_LEASE_S = _positive_int("PROCTOR_LEASE_S", 30)
PROCTOR_MAX_ATTEMPTS = _positive_int("PROCTOR_MAX_ATTEMPTS", 2)
# The longest a trial may take, for the broker: an unacknowledged message is handed to another
# worker only after this (plus a margin), so a long trial is never delivered twice while it runs
# (a worker that dies sooner is found by its lease, not by the broker).
PROCTOR_MAX_TRIAL_S = _positive_int("PROCTOR_MAX_TRIAL_S", 3600)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": PROCTOR_MAX_TRIAL_S + 600}

# --- API ---------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "dashboard.api.schema.ProctorAutoSchema",
    # Pages by keyset (?cursor=), never by offset: the last page costs what the first does.
    "DEFAULT_PAGINATION_CLASS": "dashboard.api.paging.KeysetPagination",
    "PAGE_SIZE": 100,
}


def _rate(name: str, default: str) -> str:
    raw = os.environ.get(name, "").strip() or default
    if not re.fullmatch(r"[1-9][0-9]*/(second|minute|hour|day|[smhd])", raw):
        raise ImproperlyConfigured(
            f"{name} must be a count per second, minute, hour or day like 30/minute, not {raw!r}."
        )
    return raw


# How many reruns (dashboard buttons and API actions together) one user may start
# (dashboard/throttling.py); more answer 429.
PROCTOR_RERUN_RATE = _rate("PROCTOR_RERUN_RATE", "30/minute")
SPECTACULAR_SETTINGS = {
    "TITLE": "Proctor API",
    "DESCRIPTION": "Suites, cases, versions, batches, runs and trials; reruns.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its docs page are behind sign-in like every other page.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # The docs page's assets come from the installed sidecar package: no CDN is ever asked.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Batches and trials both have a "status" with different choices: name each set.
    "ENUM_NAME_OVERRIDES": {
        "BatchStatusEnum": "evals_app.models.Batch.Status",
        "TrialStatusEnum": "evals_app.models.Trial.Status",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("PROCTOR_LOG_LEVEL", "WARNING")},
}

# --- model endpoint for judges and the responder (runner/llm) -----------------------------------
# Either an OpenAI-compatible Chat Completions endpoint (base URL like http://host:port/v1, a key,
# a model) or a command that reads the prompt as JSON on stdin and prints the answer. Left empty,
# a case with a judge or a responder fails its consultations with a sentence naming these.
PROCTOR_LLM_BASE_URL = os.environ.get("PROCTOR_LLM_BASE_URL", "").strip() or None
PROCTOR_LLM_API_KEY = os.environ.get("PROCTOR_LLM_API_KEY", "").strip() or None
PROCTOR_LLM_MODEL = os.environ.get("PROCTOR_LLM_MODEL", "").strip() or None
PROCTOR_LLM_COMMAND = os.environ.get("PROCTOR_LLM_COMMAND", "").strip() or None


def _llm_timeout_s() -> float:
    raw = os.environ.get("PROCTOR_LLM_TIMEOUT_S", "").strip()
    if not raw:
        return 120.0
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ImproperlyConfigured(
            f"PROCTOR_LLM_TIMEOUT_S must be a positive number of seconds, not {raw!r}."
        )
    return value


PROCTOR_LLM_TIMEOUT_S = _llm_timeout_s()
# --- end of model endpoint settings ---------------------------------------------------------------


# --- time limits on the eval's own code (runner/core/limits.py) ----------------------------------
# Each Python validator (sync or async), a case's prepare, and each call of a chat tool's stub.
# A case overrides the first two with check_timeout_ms and prepare_timeout_ms.


def _limit_s(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ImproperlyConfigured(f"{name} must be a positive number of seconds, not {raw!r}.")
    return value


PROCTOR_CHECK_TIMEOUT_S = _limit_s("PROCTOR_CHECK_TIMEOUT_S", 60.0)
PROCTOR_PREPARE_TIMEOUT_S = _limit_s("PROCTOR_PREPARE_TIMEOUT_S", 600.0)
PROCTOR_TOOL_TIMEOUT_S = _limit_s("PROCTOR_TOOL_TIMEOUT_S", 60.0)


# --- caps on what a trial stores (runner/jobs/database_recorder.py) ----------------------------------------
# Each text field of an event, the trial's raw output.log, and the events a trial keeps; past a cap
# the value, log or event list ends with "… [truncated: N bytes]" or a note of how many were dropped.


def _cap(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < minimum:
        raise ImproperlyConfigured(
            f"{name} must be a whole number of at least {minimum}, not {raw!r}."
        )
    return int(raw)


PROCTOR_MAX_EVENT_FIELD_BYTES = _cap("PROCTOR_MAX_EVENT_FIELD_BYTES", 64 * 1024, 1024)
PROCTOR_MAX_OUTPUT_LOG_BYTES = _cap("PROCTOR_MAX_OUTPUT_LOG_BYTES", 100 * 1024 * 1024, 1024)
PROCTOR_MAX_TRIAL_EVENTS = _cap("PROCTOR_MAX_TRIAL_EVENTS", 100_000, 1)


# --- compare, CI and cost (issue 12) -----------------------------------------------------------
# Where the dashboard answers, for the links `proctor eval --json` and JUnit reports print.
PROCTOR_DASHBOARD_URL = env_str("PROCTOR_DASHBOARD_URL", "http://127.0.0.1:8000").rstrip("/")

# --- OpenTelemetry export (issue 33) ----------------------------------------------------------
# runner/jobs/trace_export.py sends every trial as a trace once an OTLP endpoint is set; the SDK
# reads the other OTEL_* variables itself. The exporter Proctor ships speaks OTLP/HTTP with
# protobuf only: another protocol fails here, once, rather than in every worker.
OTLP_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def _otlp_protocol() -> str:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name, "").strip()
        if not value:
            continue
        exporting = any(os.environ.get(v, "").strip() for v in OTLP_ENDPOINT_VARIABLES)
        if value != "http/protobuf" and exporting:
            raise ImproperlyConfigured(
                f"{name} is {value!r}, but Proctor sends traces as http/protobuf only: unset it "
                "and point OTEL_EXPORTER_OTLP_ENDPOINT at the receiver's OTLP/HTTP port "
                "(usually 4318)"
            )
        return value
    return "http/protobuf"


OTLP_PROTOCOL = _otlp_protocol()

PRICE_KEYS = ("input_per_mtok", "output_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok")


def _prices() -> dict[str, dict[str, float]]:
    """PROCTOR_PRICES: JSON {model: {"input_per_mtok": USD, "output_per_mtok": USD, ...}}, the
    price table a trial's cost is computed from when neither its variant's ``prices`` nor its
    harness gave one (evals_app/cost.py)."""
    raw = os.environ.get("PROCTOR_PRICES", "").strip()
    if not raw:
        return {}
    try:
        table = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"PROCTOR_PRICES is not JSON: {exc}") from exc
    if not isinstance(table, dict):
        raise ImproperlyConfigured("PROCTOR_PRICES must be a JSON object of model -> prices.")
    for model, prices in table.items():
        if not isinstance(prices, dict) or not prices or set(prices) - set(PRICE_KEYS):
            raise ImproperlyConfigured(
                f"PROCTOR_PRICES[{model!r}] must be an object with some of {', '.join(PRICE_KEYS)}."
            )
        for key, value in prices.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ImproperlyConfigured(
                    f"PROCTOR_PRICES[{model!r}][{key!r}] must be a number of USD >= 0."
                )
    return {model: {k: float(v) for k, v in prices.items()} for model, prices in table.items()}


PROCTOR_PRICES = _prices()
