"""promptfoo providers as Proctor variants.

``openai:chat:MODEL`` and ``openai:MODEL`` are models behind an OpenAI-compatible endpoint, which
is what the chat harness talks to: they become ``variant("chat", model=MODEL)`` with the
endpoint's ``apiBaseUrl`` and the provider's ``tools``. Keys are never copied into the eval
file. Every other provider (another vendor, a ``file://`` custom provider, a script) is named
as untranslated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from runner.importers.handles import UniqueHandles
from runner.importers.promptfoo.files import ConfigFiles, is_reference
from runner.importers.python_source import Call, call

SIMULATED_USER = "promptfoo:simulated-user"
PLACEHOLDER_MODEL = "gpt-4.1"
CONFIG_READ = {"apiBaseUrl", "apiHost", "apiKey", "apiKeyEnvar", "temperature", "tools"}
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
    raw: Any, files: ConfigFiles, skip: Skip
) -> tuple[list[Call], Mapping[str, Any] | None]:
    """The variants, and the simulated-user config when the providers list holds one."""
    variants: list[Call] = []
    simulated = None
    names = UniqueHandles()
    for provider_id, options in provider_entries(skip, raw, "providers"):
        if provider_id == SIMULATED_USER:
            simulated = options.get("config") or {}
            continue
        built = _chat_variant(files, skip, provider_id, options, names)
        if built is not None:
            variants.append(built)
    if not variants:
        skip(
            f"no provider translated; a placeholder variant('chat', model={PLACEHOLDER_MODEL!r}) stands in"
        )
        variants.append(call("variant", "chat", model=PLACEHOLDER_MODEL))
    return variants, simulated


def chat_model(provider_id: str) -> str | None:
    parts = provider_id.split(":")
    if parts[0] != "openai" or len(parts) < 2:
        return None
    if len(parts) >= 3 and parts[1] == "chat":
        return ":".join(parts[2:]) or None
    if parts[1] in OPENAI_NOT_CHAT or parts[1] == "chat":
        return None
    return ":".join(parts[1:])


def _chat_variant(
    files: ConfigFiles,
    skip: Skip,
    provider_id: str,
    options: Mapping[str, Any],
    names: UniqueHandles,
) -> Call | None:
    model = chat_model(provider_id)
    if model is None:
        kind = "custom provider" if is_reference(provider_id) else "provider"
        skip(f"{kind} {provider_id} (no Proctor harness for it)")
        return None
    where = f"provider {options.get('label') or provider_id}"
    config = options.get("config") or {}
    if not isinstance(config, Mapping):
        config = {}
    for key in sorted(set(options) - {"id", "label", "config"}):
        skip(f"{where}: {key}")
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
        base_url = f"https://{config['apiHost']}/v1"
    api_key = _api_key(config, where, skip)
    temperature = config.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not 0 <= temperature <= 2
    ):
        skip(f"{where}: config.temperature {temperature!r} (the chat harness takes 0 to 2)")
        temperature = None
    label = options.get("label")
    default_name = f"chat:{model}"
    name = names.take(str(label) if label else default_name)
    return call(
        "variant",
        "chat",
        model=model,
        name=None if name == default_name else name,
        base_url=base_url,
        api_key=api_key,
        temperature=temperature,
        tools=tools,
    )


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
