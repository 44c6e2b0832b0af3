"""promptfoo providers as Proctor variants.

- ``openai:chat:MODEL`` and ``openai:MODEL`` become ``variant("chat", model=MODEL,
  api="openai")``, and ``anthropic:messages:MODEL`` the same with ``api="anthropic"`` (the chat
  harness speaks Anthropic's Messages API), carrying ``apiBaseUrl`` (or ``apiHost``),
  ``apiKeyEnvar``, ``temperature``, ``max_tokens``, ``response_format`` and ``tools``. Without
  an ``apiBaseUrl`` the harness finds the endpoint as the vendor's SDK would
  (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``), else the project's ``PROCTOR_LLM_BASE_URL``.
- ``exec:COMMAND``, ``file://x.py`` / ``python:x.py`` (``call_api`` or a named function) and
  ``echo`` become command-harness variants running proctor.promptfoo_provider from a profile
  folder that is the config's own, so the script's relative paths hold.

Keys are never copied into the eval file. Every other provider (another vendor, a JavaScript
provider) is named as untranslated.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from runner.importers.handles import UniqueHandles
from runner.importers.promptfoo.files import ConfigFiles, is_reference, script_words
from runner.importers.python_source import Call, call

SIMULATED_USER = "promptfoo:simulated-user"
PLACEHOLDER_MODEL = "gpt-4.1"
CONFIG_READ = {
    "apiBaseUrl",
    "apiHost",
    "apiKey",
    "apiKeyEnvar",
    "temperature",
    "tools",
    "max_tokens",
    "response_format",
}
# What a chat variant's temperature may be (the chat harness's range).
TEMPERATURE_RANGE = (0, 2)
_PYTHON_FILE = re.compile(r"^(?P<file>.+?\.py)(?::(?P<function>[A-Za-z_][A-Za-z0-9_]*))?$")
RUN_PROVIDER = 'cd "$PROCTOR_PROFILE_DIR" && python3 -m proctor.promptfoo_provider'

# ``{{ env.NAME }}``: promptfoo's way to read a variable, the chat harness's "$NAME".
_ENV_TEMPLATE = re.compile(r"^\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
# openai:<kind>:<model> kinds that are not chat models.
OPENAI_NOT_CHAT = {
    "completion",
    "embedding",
    "embeddings",
    "assistant",
    "responses",
    "realtime",
    "image",
    "moderation",
    "transcription",
    "speech",
    "tts",
    "agents",
    "codex-sdk",
}

Skip = Callable[[str], None]


def provider_entries(skip: Skip, raw: Any, where: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(id, options) for each provider however promptfoo lets it be written."""
    items = raw if isinstance(raw, list) else [] if raw is None else [raw]
    entries: list[tuple[str, Mapping[str, Any]]] = []
    for item in items:
        if isinstance(item, str):
            entries.append((item, {}))
        elif isinstance(item, Mapping) and isinstance(item.get("id"), str):
            entries.append((item["id"], item))
        elif (
            isinstance(item, Mapping)
            and len(item) == 1
            and isinstance(next(iter(item.values())), Mapping)
        ):
            provider_id, options = next(iter(item.items()))
            entries.append((str(provider_id), options))
        else:
            skip(f"{where}: a provider without an id")
    return entries


def variants_from(
    raw: Any, files: ConfigFiles, skip: Skip, *, eval_dir: Path | None = None
) -> tuple[list[Call], Mapping[str, Any] | None]:
    """The variants, and the simulated-user config when the providers list holds one.
    ``eval_dir`` is where the eval file goes: a script provider's profile folder (the config's)
    is written relative to it."""
    variants: list[Call] = []
    simulated = None
    names = UniqueHandles()
    for provider_id, options in provider_entries(skip, raw, "providers"):
        if provider_id == SIMULATED_USER:
            simulated = options.get("config") or {}
            continue
        model = chat_model(provider_id)
        built: Call | None
        if model is not None:
            built = _chat_variant(files, skip, provider_id, options, names, model)
        else:
            built = _script_variant(files, skip, provider_id, options, names, eval_dir)
        if built is not None:
            variants.append(built)
    if not variants:
        skip(
            f"no provider translated; a placeholder variant('chat', model={PLACEHOLDER_MODEL!r}) stands in"
        )
        variants.append(call("variant", "chat", model=PLACEHOLDER_MODEL))
    return variants, simulated


def chat_model(provider_id: str) -> str | None:
    """The model of an OpenAI or Anthropic chat provider, None for any other provider."""
    return _chat_api_and_model(provider_id)[1]


def _chat_api_and_model(provider_id: str) -> tuple[str, str | None]:
    parts = provider_id.split(":")
    if parts[0] == "anthropic" and len(parts) >= 2:
        if parts[1] == "messages":
            return "anthropic", ":".join(parts[2:]) or None
        # ``anthropic:claude-...`` is the Messages API too; completion and agent SDKs are not.
        return "anthropic", ":".join(parts[1:]) if parts[1].startswith("claude") else None
    if parts[0] != "openai" or len(parts) < 2:
        return "", None
    if len(parts) >= 3 and parts[1] == "chat":
        return "openai", ":".join(parts[2:]) or None
    if parts[1] in OPENAI_NOT_CHAT or parts[1] == "chat":
        return "openai", None
    return "openai", ":".join(parts[1:])


def _chat_variant(
    files: ConfigFiles,
    skip: Skip,
    provider_id: str,
    options: Mapping[str, Any],
    names: UniqueHandles,
    model: str,
) -> Call:
    api, _ = _chat_api_and_model(provider_id)
    where = f"provider {options.get('label') or provider_id}"
    config = _config(options, where, skip)
    callbacks = config.get("functionToolCallbacks")
    callbacks = callbacks if isinstance(callbacks, Mapping) else {}
    for key in sorted(set(config) - CONFIG_READ - {"functionToolCallbacks"}):
        skip(f"{where}: config.{key}")
    tools = _tools(files, skip, config.get("tools"), where, callbacks)
    for name in callbacks:
        if name not in {tool.args[0] for tool in tools or ()}:
            skip(f"{where}: functionToolCallbacks.{name} (no tool of that name)")
    base_url = _endpoint_setting(config.get("apiBaseUrl"))
    if base_url is None and isinstance(config.get("apiHost"), str):
        # promptfoo's apiHost is the host alone; OpenAI's API lives under /v1 there.
        host = config["apiHost"].strip().removeprefix("https://").rstrip("/")
        base_url = f"https://{host}" + ("/v1" if api == "openai" else "")
    api_key = _api_key(config, where, skip)
    low, high = TEMPERATURE_RANGE
    temperature = config.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not low <= temperature <= high
    ):
        skip(
            f"{where}: config.temperature {temperature!r} (the chat harness takes {low} to {high})"
        )
        temperature = None
    max_tokens = config.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        skip(f"{where}: config.max_tokens {max_tokens!r} (not a whole number above 0)")
        max_tokens = None
    response_format = config.get("response_format")
    if is_reference(response_format):
        response_format = files.structured(f"{where}: config.response_format", response_format)
    if response_format is not None and (
        api != "openai" or not isinstance(response_format, Mapping)
    ):
        skip(f"{where}: config.response_format (an OpenAI endpoint's JSON object)")
        response_format = None
    label = options.get("label")
    default_name = f"chat:{model}"
    name = names.take(str(label) if label else default_name)
    return call(
        "variant",
        "chat",
        model=model,
        name=None if name == default_name else name,
        api=api,
        base_url=base_url,
        api_key=api_key,
        temperature=temperature,
        max_tokens=max_tokens,
        response_format=dict(response_format) if response_format else None,
        tools=tools,
    )


def _config(options: Mapping[str, Any], where: str, skip: Skip) -> Mapping[str, Any]:
    for key in sorted(set(options) - {"id", "label", "config"}):
        skip(f"{where}: {key}")
    config = options.get("config") or {}
    return config if isinstance(config, Mapping) else {}


def _script_variant(
    files: ConfigFiles,
    skip: Skip,
    provider_id: str,
    options: Mapping[str, Any],
    names: UniqueHandles,
    eval_dir: Path | None,
) -> Call | None:
    """An ``exec:``, Python or ``echo`` provider as a command-harness variant, or None (named
    as untranslated) for any other provider."""
    label = options.get("label")
    where = f"provider {label or provider_id}"
    config = dict(_config(options, where, skip))
    if "apiKey" in config:
        config.pop("apiKey")
        skip(f"{where}: config.apiKey (a key is not copied into an eval file)")
    given = json.dumps({"id": provider_id, "config": config}, ensure_ascii=False)
    python = _python_provider(provider_id)
    if provider_id == "echo":
        run = f"{RUN_PROVIDER} echo"
    elif provider_id.startswith("exec:"):
        words = script_words(provider_id.removeprefix("exec:"))
        if not words:
            skip(f"{where}: an exec: provider without a command")
            return None
        run = f"{RUN_PROVIDER} exec {shlex.quote(given)} -- {shlex.join(words)}"
    elif python is not None:
        file, function = python
        files.text(where, "file://" + file)  # a missing file is named now, not at the run
        run = f"{RUN_PROVIDER} python {shlex.quote(given)} {shlex.join([file, *function])}"
    else:
        kind = "custom provider" if is_reference(provider_id) else "provider"
        skip(f"{kind} {provider_id} (no Proctor harness for it)")
        return None
    shown = names.take(str(label) if label else provider_id)
    folder = files.base
    if eval_dir is not None:
        folder = Path(os.path.relpath(folder, eval_dir))
    return call(
        "variant",
        "command",
        name=f"command:{shown}",
        profile=call("profile", shown, dir=folder.as_posix(), run=run),
    )


def _python_provider(provider_id: str) -> tuple[str, list[str]] | None:
    """(file, [function]) of ``file://x.py[:fn]`` or ``python:x.py[:fn]``."""
    for prefix in ("file://", "python:"):
        if provider_id.startswith(prefix):
            match = _PYTHON_FILE.match(provider_id.removeprefix(prefix))
            if match:
                return match.group("file"), [match.group("function")] if match.group(
                    "function"
                ) else []
    return None


def _endpoint_setting(value: Any) -> str | None:
    """Text as is, ``{{ env.NAME }}`` as the chat harness's ``$NAME``."""
    if not isinstance(value, str) or not value.strip():
        return None
    match = _ENV_TEMPLATE.match(value.strip())
    return f"${match.group(1)}" if match else value


def _api_key(config: Mapping[str, Any], where: str, skip: Skip) -> str | None:
    """Only a reference to a variable carries over: a key itself is never written to a file."""
    if isinstance(config.get("apiKeyEnvar"), str) and config["apiKeyEnvar"].strip():
        return f"${config['apiKeyEnvar'].strip()}"
    key = config.get("apiKey")
    if key is None:
        return None
    match = _ENV_TEMPLATE.match(key.strip()) if isinstance(key, str) else None
    if match:
        return f"${match.group(1)}"
    skip(
        f"{where}: config.apiKey (a key is not copied into an eval file; "
        "set api_key='$VARIABLE' naming the worker's variable)"
    )
    return None


def _tools(
    files: ConfigFiles, skip: Skip, raw: Any, where: str, callbacks: Mapping[str, Any]
) -> list[Call] | None:
    """The provider's tool definitions (OpenAI or Anthropic shape), each still to be given a
    Python stub: promptfoo's callbacks are JavaScript."""
    if raw is None:
        return None
    if is_reference(raw):
        raw = files.structured(f"{where}: tools", raw)
    if not isinstance(raw, list):
        skip(f"{where}: tools (not a list of tool definitions)")
        return None
    items: list[Any] = []
    for item in raw:
        # A list may name files (``tools: [file://a.json, ...]``), each holding one tool
        # definition or a list of them, as promptfoo reads it.
        if is_reference(item):
            loaded = files.structured(f"{where}: tools", item)
            items.extend(loaded if isinstance(loaded, list) else [loaded])
        else:
            items.append(item)
    tools = []
    for item in items:
        spec = item.get("function", item) if isinstance(item, Mapping) else None
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            skip(f"{where}: a tool without a name")
            continue
        parameters = spec.get("parameters", spec.get("input_schema"))
        tools.append(
            call(
                "tool",
                spec["name"],
                description=spec.get("description") or None,
                parameters=dict(parameters) if isinstance(parameters, Mapping) else None,
            )
        )
        written = " (functionToolCallbacks is JavaScript)" if spec["name"] in callbacks else ""
        skip(f"{where}: tool {spec['name']} needs a Python stub=...{written}")
    return tools or None
