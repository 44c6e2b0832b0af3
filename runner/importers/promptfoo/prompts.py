"""A promptfoo config's prompts, resolved as promptfoo resolves them.

An entry is inline text, a chat prompt (JSON ``[{role, content}]``), or a file: ``file://``
paths, bare paths (``prompt.txt``, ``prompts/*.txt``: what promptfoo takes for a path, when
the file is there), text files holding several prompts split by a ``---`` line, JSON or YAML
chat files (a list of messages or ``{messages: [...]}``), Jinja2 files, Python prompt
functions (``file://prompts.py:make_prompt``) and ``exec:`` commands that print the prompt.

A prompt Proctor can fill as written (``{{ name }}`` only) keeps its text: the suite's or a
variant's prompt. Any other is rendered per test, as promptfoo renders it: Nunjucks templates
with Jinja2 (the two agree on the forms prompts use; ``dump`` is JSON as in Nunjucks), chat
prompts rendered and then parsed, prompt functions called with ``{vars, provider}``, commands
run with that context as their last argument. The rendered text is the case's variable
``promptfoo_prompt_N`` (and ``promptfoo_system_N``), which the prompt then names.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runner.importers import ImportFailed
from runner.importers.nunjucks import as_text, unsupported_expressions
from runner.importers.promptfoo.files import (
    FILE_PREFIX,
    STRUCTURED_SUFFIXES,
    ConfigFiles,
    is_code_reference,
    is_reference,
    script_words,
)

Skip = Callable[[str], None]
# (user, system) as one test renders them.
Rendered = tuple[str | None, str | None]
# What promptfoo takes for a path rather than text (its maybeFilePath), when the file exists.
_LOOKS_LIKE_PATH = re.compile(
    r"^(?:[^\n]*[/\\*][^\n]*|[^\n]*\.[A-Za-z0-9]{1,6}(?::[A-Za-z_][A-Za-z0-9_]*)?)$"
)
TEMPLATE_SUFFIXES = (".j2", ".jinja", ".jinja2", ".njk")
COMMAND_TIMEOUT_S = 60
# promptfoo's var holding the earlier {input, output} turns of the test's conversation.
CONVERSATION = "_conversation"
_PYTHON_FUNCTION = re.compile(r"\.py(?::[A-Za-z_][A-Za-z0-9_]*)?$")


@dataclass
class Prompt:
    label: str
    user: str | None
    system: str | None
    # How a variant's name shows it: the prompt's own label or file; None for an inline prompt
    # without one, which the variant's default name shows by its first words.
    name: str | None = None
    # Set for a prompt rendered per test; its user and system texts then name the case
    # variables ``variables()`` fills.
    render: Callable[[Mapping[str, Any]], Rendered] | None = None
    # It reads ``_conversation``: each test is one more turn of a conversation (the importer
    # replays the earlier tests' turns before it).
    replays_conversation: bool = False

    def variables(
        self, test_vars: Mapping[str, Any], *, prefix: str = "", suffix: str = ""
    ) -> dict[str, str]:
        """The case variables holding this prompt as one test renders it, with the test's
        prefix and suffix around it (none for a prompt Proctor fills itself)."""
        if self.render is None:
            return {}
        # Rendered without earlier turns: the conversation replays them as turns of its own.
        user, system = self.render({**test_vars, CONVERSATION: []})
        if user is not None:
            user = prefix + user + suffix
        names = {"user": self.user, "system": self.system}
        filled = {}
        for part, text in (("user", user), ("system", system)):
            name = names[part]
            if name is not None:
                filled[name.strip("{} ")] = text or ""
        return filled


def read_prompts(raw: Any, files: ConfigFiles, skip: Skip) -> list[Prompt]:
    items = raw if isinstance(raw, list) else [] if raw is None else [raw]
    prompts: list[Prompt] = []
    for position, item in enumerate(items, start=1):
        label = f"prompt #{position}"
        name = None
        if isinstance(item, Mapping):
            name = item.get("label") or item.get("id")
            label = str(name or label)
            item = item.get("raw", item.get("id"))
        if not isinstance(item, str):
            skip(f"{label} (not text)")
            continue
        found = _prompt_texts(files, skip, item, label)
        if isinstance(name, str) and name.strip():
            for prompt in found:
                prompt.name = name if len(found) == 1 else prompt.name or name
        prompts.extend(found)
    for prompt in prompts:
        prompt.replays_conversation = any(
            CONVERSATION in (text or "") for text in (prompt.user, prompt.system)
        )
    render_per_test(
        [
            p
            for p in prompts
            if p.render is not None or p.replays_conversation or _needs_rendering(p)
        ],
        prompts,
    )
    return prompts


def render_per_test(chosen: list[Prompt], prompts: list[Prompt] | None = None) -> None:
    """Make each of ``chosen`` a prompt rendered per test: its text is kept in its renderer
    and replaced by the case variables that will hold it (numbered by its place in
    ``prompts``, default ``chosen``)."""
    numbered = prompts if prompts is not None else chosen
    for prompt in chosen:
        if prompt.user is not None and prompt.user.startswith("{{promptfoo_prompt_"):
            continue  # already rendered per test
        number = numbered.index(prompt) + 1
        if prompt.render is None:
            prompt.render = _template_renderer(prompt.user, prompt.system, prompt.label)
        # A chat prompt (or code's) may carry a system message in some tests only.
        chat = prompt.system is not None or (prompt.user or "").lstrip()[:1] in ("", "[", "{")
        prompt.name = prompt.name or prompt.label
        prompt.user = f"{{{{promptfoo_prompt_{number}}}}}"
        prompt.system = f"{{{{promptfoo_system_{number}}}}}" if chat else None


def _needs_rendering(prompt: Prompt) -> bool:
    return any(unsupported_expressions(text or "") for text in (prompt.user, prompt.system))


def _prompt_texts(files: ConfigFiles, skip: Skip, item: str, label: str) -> list[Prompt]:
    if item.startswith("exec:"):
        return [_command_prompt(files, item.removeprefix("exec:"), label)]
    reference = item if is_reference(item) else _bare_path(files, item)
    if reference is None:
        return [_chat_or_text(skip, item, label)]
    if is_code_reference(reference):
        if _PYTHON_FUNCTION.search(reference):
            return [_python_prompt(files, reference, label)]
        skip(f"{label}: {item} (a JavaScript prompt function)")
        return []
    found = []
    for match in files.matching("prompt", reference):
        path = files.path(match)
        shown = match.removeprefix(FILE_PREFIX)
        if path.suffix == ".json" and unsupported_expressions(files.text("prompt", match)):
            # promptfoo renders a JSON prompt file as text, then parses it.
            text = files.text("prompt", match)
            found.append(Prompt(match, text, None, shown, _template_renderer(text, None, match)))
        elif path.suffix in STRUCTURED_SUFFIXES:
            chat = _chat_prompt(skip, files.structured("prompt", match), match)
            chat.name = shown
            found.append(chat)
        elif path.suffix in TEMPLATE_SUFFIXES:
            text = files.text("prompt", match)
            found.append(Prompt(match, text, None, shown, _template_renderer(text, None, match)))
        else:
            # A text file may hold several prompts separated by a line of three hyphens.
            parts = [part.strip() for part in files.text("prompt", match).split("\n---\n")]
            found += [
                Prompt(
                    match if len(parts) == 1 else f"{match} #{n}",
                    part,
                    None,
                    shown if len(parts) == 1 else f"{shown} #{n}",
                )
                for n, part in enumerate(parts, start=1)
                if part
            ]
    return [p for p in found if p.user is not None or p.system is not None or p.render]


def _bare_path(files: ConfigFiles, item: str) -> str | None:
    """``item`` as a ``file://`` reference when promptfoo would take it for a path and it names
    a file (or a glob matching one); else None (it is the prompt's text)."""
    if not _LOOKS_LIKE_PATH.match(item.strip()):
        return None
    reference = FILE_PREFIX + item.strip()
    try:
        matched = files.matching("prompt", reference)
    except ImportFailed:
        return None
    file = re.sub(r":[A-Za-z_][A-Za-z0-9_]*$", "", matched[0])
    return reference if files.path(file).is_file() else None


def _chat_or_text(skip: Skip, text: str, label: str) -> Prompt:
    if text.lstrip().startswith("["):
        try:
            return _chat_prompt(skip, json.loads(text), label)
        except ValueError:
            # Not JSON as written: a chat prompt with template tags is JSON once rendered.
            return Prompt(label, text, None, render=_template_renderer(text, None, label))
    return Prompt(label, text, None)


def _chat_prompt(skip: Skip, messages: Any, label: str) -> Prompt:
    """A chat-format prompt: its system messages are the system prompt, its last user message
    the prompt."""
    if isinstance(messages, Mapping) and "messages" in messages:
        messages = messages["messages"]
    if isinstance(messages, str):
        return Prompt(label, messages, None)
    if not isinstance(messages, list) or not all(
        isinstance(m, Mapping) and "content" in m for m in messages
    ):
        skip(f"{label} (not a list of chat messages)")
        return Prompt(label, None, None)
    user, system = _chat_parts(messages)
    users = [m for m in messages if m.get("role") == "user"]
    if len(messages) - (1 if system else 0) > len(users[-1:]):
        skip(f"{label}: chat messages before the last user message")
    return Prompt(label, user, system)


def _chat_parts(messages: list[Mapping[str, Any]]) -> Rendered:
    system = "\n\n".join(str(m["content"]) for m in messages if m.get("role") == "system") or None
    users = [m for m in messages if m.get("role") == "user"]
    return (str(users[-1]["content"]) if users else None), system


def _as_prompt(value: Any, label: str) -> Rendered:
    """A rendered prompt: chat JSON (a list of messages, or ``{messages}``) or plain text."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            value = json.loads(value)
        except ValueError:
            return value, None
    if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, Mapping) and isinstance(value.get("prompt"), str | list):
        return _as_prompt(value["prompt"], label)
    if isinstance(value, list) and all(isinstance(m, Mapping) and "content" in m for m in value):
        return _chat_parts(value)
    return (value if isinstance(value, str) else json.dumps(value)), None


# --- rendering per test ----------------------------------------------------------------------


def _template_renderer(
    user: str | None, system: str | None, label: str
) -> Callable[[Mapping[str, Any]], Rendered]:
    """Nunjucks templates rendered with Jinja2; a chat prompt is parsed once rendered."""
    import jinja2  # only for configs whose prompts need it

    environment = jinja2.Environment(  # noqa: S701  # prompts are text, not HTML
        keep_trailing_newline=True, finalize=as_text, undefined=jinja2.Undefined
    )
    environment.filters["dump"] = _dump
    try:
        templates = [
            environment.from_string(text) if text is not None else None for text in (user, system)
        ]
    except jinja2.TemplateSyntaxError as error:
        raise ImportFailed(
            f"{label}: line {error.lineno} of the template: {error.message}."
        ) from None

    def render(variables: Mapping[str, Any]) -> Rendered:
        try:
            texts = [t.render(**variables) if t is not None else None for t in templates]
        except jinja2.TemplateError as error:
            raise ImportFailed(f"{label}: rendering failed: {error}.") from None
        rendered_user, rendered_system = texts
        if system is None and rendered_user is not None:
            return _as_prompt(rendered_user, label)
        return rendered_user, rendered_system

    return render


def _dump(value: Any, indent: int | None = None) -> str:
    """Nunjucks' ``dump``: the value as JSON."""
    return json.dumps(value, indent=indent, ensure_ascii=False)


def _python_prompt(files: ConfigFiles, reference: str, label: str) -> Prompt:
    """``file://prompts.py:fn``: fn({vars, provider}) returns the prompt (text or messages)."""
    path_part, _, function = reference.removeprefix(FILE_PREFIX).partition(".py")
    path = files.path(FILE_PREFIX + path_part + ".py")
    function = function.removeprefix(":") or "get_prompt"
    files.text("prompt", FILE_PREFIX + path_part + ".py")  # a missing file is named here
    spec = importlib.util.spec_from_file_location(f"promptfoo_prompt_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the config's own code: its failure is the user's news
        raise ImportFailed(
            f"{label}: {path} failed to load: {type(error).__name__}: {error}."
        ) from None
    call = getattr(module, function, None)
    if not callable(call):
        raise ImportFailed(f"{label}: {path} has no function {function}(context).")

    def render(variables: Mapping[str, Any]) -> Rendered:
        try:
            value = call({"vars": dict(variables), "provider": {"id": "", "label": ""}})
            if inspect.iscoroutine(value):
                import asyncio

                value = asyncio.run(value)
        except Exception as error:  # as above
            raise ImportFailed(
                f"{label}: {function} failed: {type(error).__name__}: {error}."
            ) from None
        return _as_prompt(value, label)

    return Prompt(label, "", None, reference.removeprefix(FILE_PREFIX), render)


def _command_prompt(files: ConfigFiles, command: str, label: str) -> Prompt:
    """``exec:script.sh``: the command prints the prompt, given ``{vars, provider}`` as JSON in
    its last argument, run from the config's folder."""
    words = script_words(command)
    if not words:
        raise ImportFailed(f"{label}: exec: names no command.")

    def render(variables: Mapping[str, Any]) -> Rendered:
        context = {"vars": dict(variables), "provider": {"id": "", "label": ""}, "config": {}}
        try:
            done = subprocess.run(
                [*words, json.dumps(context, default=str)],
                cwd=files.base,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ImportFailed(f"{label}: cannot run {words[0]}: {error}.") from None
        if done.returncode != 0 or (done.stderr.strip() and not done.stdout.strip()):
            tail = " ".join(done.stderr.split())[-300:] or f"exit status {done.returncode}"
            raise ImportFailed(f"{label}: {command.strip()} failed: {tail}.")
        return _as_prompt(done.stdout.strip(), label)

    return Prompt(label, "", None, f"exec:{command.strip()}", render)
