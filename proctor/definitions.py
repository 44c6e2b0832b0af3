"""The values an eval file builds: suites, cases, variants, profiles, sources and checks.

Everything here is plain, immutable Python and imports nothing of Django, so an eval file can be
imported (and its definitions validated) without a configured project.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MAX_TURNS = 8
DEFAULT_TIMEOUT_MS = 15 * 60 * 1000


class DefinitionError(ValueError):
    """An SDK call given arguments it cannot build a value from at all. Most mistakes are kept
    and reported with the rest when the eval is validated (``proctor.rules``); this is for
    the few a constructor must read to go on (a file it loads, a list it unpacks). The message
    is one sentence for the eval's author, shown with the file and line of the call."""


def a_type(value: object) -> str:
    """``value``'s type with its article, for messages: "a str", "an int"."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


# --- sources ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Files:
    """A workspace made of the given files (relative path -> text)."""

    files: Mapping[str, str]


@dataclass(frozen=True)
class Repo:
    """A workspace cloned from a git repository at a ref (None: the default branch's head).

    ``url`` is a clone URL, an absolute local path, or ``owner/name`` (resolved against the
    configured git host when the trial runs, so the definition stays host-independent).
    """

    url: str
    ref: str | None = None


Source = Files | Repo


def files(contents: Mapping[str, str]) -> Files:
    """A workspace holding exactly these files: ``files({"src/add.py": "..."})``."""
    # Anything but a mapping is kept as given, for the rules to name.
    return Files(dict(contents) if isinstance(contents, Mapping) else contents)


def repo(spec: str, *, ref: str | None = None) -> Repo:
    """A workspace cloned from ``owner/name``, ``owner/name@ref``, a clone URL or a local path.

    A relative local path (``./fixtures/calc``) is taken relative to the file that calls
    ``repo()``, so an eval file works from any current folder.
    """
    if not isinstance(spec, str):
        return Repo(url=spec, ref=ref)  # named by the rules
    url, parsed_ref = _split_ref(spec)
    if ref is None:
        ref = parsed_ref
    if _looks_local(url):
        caller = sys._getframe(1).f_globals.get("__file__")
        base = Path(caller).resolve().parent if caller else Path.cwd()
        url = str((base / os.path.expanduser(url)).resolve())
    return Repo(url=url, ref=ref)


def _split_ref(spec: str) -> tuple[str, str | None]:
    # "git@host:owner/name.git" has an "@" that is not a ref: a ref never holds ":".
    head, sep, tail = spec.rpartition("@")
    is_ref = sep and head and tail and ":" not in tail and not head.endswith(("://", ":"))
    if is_ref and ("/" not in tail or "://" not in head):
        return head, tail
    return spec, None


def _looks_local(url: str) -> bool:
    return url.startswith(("/", "./", "../", "~")) or url in (".", "..")


CLONE_URL_PREFIXES = ("https://", "http://", "ssh://", "git://", "file://")
SCP_LIKE_URL = re.compile(r"^[\w.-]+@[\w.-]+:")  # git@github.com:owner/name.git
REPO_SEGMENT = re.compile(r"^[A-Za-z0-9_.-]+$")


def repo_kind(url: str) -> str | None:
    """How a ``Repo.url`` names its repository: ``"url"`` (a clone URL), ``"path"`` (an
    absolute local path) or ``"owner/name"`` (resolved against the git host when the trial
    runs); None when it is none of these."""
    if url.startswith(CLONE_URL_PREFIXES) or SCP_LIKE_URL.match(url):
        return "url"
    if os.path.isabs(url):
        return "path"
    segments = url.split("/")
    if len(segments) == 2 and all(REPO_SEGMENT.match(s) and s not in (".", "..") for s in segments):
        return "owner/name"
    return None


# --- checks ----------------------------------------------------------------------------------


# A command() check's own time limit unless it names one: ten minutes.
DEFAULT_COMMAND_TIMEOUT_MS = 10 * 60 * 1000


@dataclass(frozen=True)
class Command:
    """A shell command run in the workspace after the agent finishes; passes on exit 0."""

    command: str
    name: str | None = None
    timeout_ms: int = DEFAULT_COMMAND_TIMEOUT_MS

    @property
    def label(self) -> str:
        return self.name or self.command


def command(
    cmd: str, *, name: str | None = None, timeout_ms: int = DEFAULT_COMMAND_TIMEOUT_MS
) -> Command:
    """``command("pytest -q")``: the trial passes this check when the command exits 0."""
    return Command(command=cmd, name=name, timeout_ms=timeout_ms)


@dataclass(frozen=True)
class Verdict:
    """What a validator may return instead of a plain bool."""

    passed: bool
    message: str = ""
    score: float | None = None


Validator = Callable[..., Any]
Check = Command | Validator


# --- preparation -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Cache:
    """One folder inside the workspace restored before prepare and saved after it."""

    key: str
    path: str


# --- variants --------------------------------------------------------------------------------


# What a profile's process can do beyond one prompt, named in ``profile(capabilities=...)``.
CONVERSATION_RESUME = "conversation-resume"
PLAN_MODE = "plan-mode"
# It can start a conversation from earlier messages, so a case can test the agent mid-way.
SEEDED_CONVERSATION = "seeded-conversation"
CAPABILITIES = (CONVERSATION_RESUME, PLAN_MODE, SEEDED_CONVERSATION)


@dataclass(frozen=True)
class Profile:
    """How a harness is configured: for the command harness, the process to run.

    ``dir`` is shipped into the sandbox; ``install`` runs once per sandbox; ``run`` runs with
    ``bash -c`` from the workspace for every turn. ``capabilities`` names what the process can
    do beyond one prompt (``conversation-resume``, ``plan-mode``).
    """

    name: str
    dir: str | None = None
    run: str | None = None
    install: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    system_prompt: str | None = None
    capabilities: tuple[str, ...] = ()
    plan_file: str | None = None


def profile(
    name: str,
    *,
    dir: str | None = None,
    run: str | None = None,
    install: str | None = None,
    env: Mapping[str, str] | None = None,
    system_prompt: str | None = None,
    capabilities: Sequence[str] = (),
    plan_file: str | None = None,
) -> Profile:
    """A harness profile. A relative ``dir`` is taken relative to the calling file."""
    if dir is not None and not os.path.isabs(os.path.expanduser(dir)):
        caller = sys._getframe(1).f_globals.get("__file__")
        base = Path(caller).resolve().parent if caller else Path.cwd()
        dir = str((base / dir).resolve())
    return Profile(
        name=name,
        dir=dir,
        run=run,
        install=install,
        # Anything else is kept as given, for the rules to name when the file is loaded.
        env=dict(env) if isinstance(env, Mapping) else env or {},
        system_prompt=system_prompt,
        # One name given alone is that name, not its letters.
        capabilities=(capabilities,) if isinstance(capabilities, str) else tuple(capabilities),
        plan_file=plan_file,
    )


# The options a variant may give whatever its harness: its own prompt and system prompt, which
# replace the suite's for this variant (templates filled with each case's variables).
PROMPT_OPTIONS = ("prompt", "system_prompt")
# How much of a prompt a variant's default name shows.
PROMPT_LABEL_CHARS = 40


@dataclass(frozen=True)
class Variant:
    """One condition to compare: a harness, a model, a profile and a sandbox, and optionally a
    prompt and a system prompt of its own (kept with the options, as they are recorded)."""

    harness: str
    model: str | None = None
    profile: Profile | None = None
    sandbox: str = "local"
    name: str = ""
    network: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def prompt(self) -> str | None:
        """The variant's own prompt template, which replaces the suite's."""
        return self.options.get("prompt")

    @property
    def system_prompt(self) -> str | None:
        """The variant's own system prompt template, which replaces the suite's."""
        return self.options.get("system_prompt")


def variant(
    harness: str,
    *,
    model: str | None = None,
    profile: Profile | None = None,
    sandbox: str = "local",
    name: str | None = None,
    network: bool = False,
    prompt: str | None = None,
    system_prompt: str | None = None,
    prompt_name: str | None = None,
    **options: Any,
) -> Variant:
    """A variant; its default name joins harness, profile, model, a non-local sandbox and, when
    it carries its own ``prompt``, which one: ``prompt_name``, else the prompt's first words. Its prompt and system prompt replace the suite's, each filled with a
    case's variables as the suite's prompt is, so prompts are compared like models."""
    if prompt is not None:
        options["prompt"] = prompt
    if system_prompt is not None:
        options["system_prompt"] = system_prompt
    if name is None:
        # str(): a part of the wrong type is named by the rules, not by a join's TypeError.
        parts = [harness, getattr(profile, "name", None), model]
        if sandbox != "local":
            parts.append(sandbox)
        parts.append(prompt_name or prompt_label(prompt))
        name = ":".join(str(p) for p in parts if p)
    return Variant(
        harness=harness,
        model=model,
        profile=profile,
        sandbox=sandbox,
        name=name,
        network=network,
        options=dict(options),
    )


def prompt_label(prompt: object) -> str | None:
    """A prompt as a variant's default name shows it: its first words, quoted, cut short. A
    system prompt alone is not shown (a chat variant's system_prompt named no variant before
    variants carried prompts): give it prompt_name."""
    if not isinstance(prompt, str) or not prompt.strip():
        return None
    words = " ".join(prompt.split())
    if len(words) > PROMPT_LABEL_CHARS:
        words = words[: PROMPT_LABEL_CHARS - 1].rstrip() + "…"
    return f'"{words}"'


# --- cases and suites ------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    validate: Check | Sequence[Check] | None
    name: str | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)
    source: Source | None = None
    prepare: Callable[..., Any] | None = None
    cache: Cache | None = None
    tags: tuple[str, ...] = ()
    user: Any = None
    max_turns: int = DEFAULT_MAX_TURNS
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    expected_output: str | None = None
    plan_mode: bool = False
    # Limits on the eval's own code: each Python validator, and prepare (None: the worker's
    # defaults, PROCTOR_CHECK_TIMEOUT_S and PROCTOR_PREPARE_TIMEOUT_S).
    check_timeout_ms: int | None = None
    prepare_timeout_ms: int | None = None
    # With weighted assertions: the weighted score a trial needs to pass (0 to 1).
    threshold: float | None = None
    # The HTTP APIs, commands and MCP servers the agent talks to (proctor.mock).
    mocks: tuple[Any, ...] = ()
    # A case read from a task folder (proctor.tasks.Task): its image, its hidden tests run as
    # the verifier after the agent, its reward.
    task: Any = None

    @property
    def label(self) -> str:
        return self.name or self.id

    @property
    def checks(self) -> list[Check]:
        """The case's checks as a list, whether ``validate`` held one or an array."""
        if self.validate is None:
            return []
        if isinstance(self.validate, list | tuple):
            return list(self.validate)
        return [self.validate]  # type: ignore[list-item]  # a single check, not a sequence


def case(
    id: str,
    *,
    validate: Check | Sequence[Check] | None = None,
    name: str | None = None,
    variables: Mapping[str, Any] | None = None,
    source: Source | None = None,
    prepare: Callable[..., Any] | None = None,
    cache: Cache | Mapping[str, str] | None = None,
    tags: Sequence[str] = (),
    user: Any = None,
    max_turns: int | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    expected_output: str | None = None,
    plan_mode: bool = False,
    threshold: float | None = None,
    check_timeout_ms: int | None = None,
    prepare_timeout_ms: int | None = None,
    mocks: Sequence[Any] = (),
    task: Any = None,
) -> Case:
    """One eval. ``validate`` is required (but for a task case, which its verifier grades:
    ``proctor.tasks``); the rules are checked when the file is loaded."""
    if isinstance(cache, Mapping):
        cache = Cache(key=str(cache.get("key", "")), path=str(cache.get("path", "")))
    if isinstance(validate, list):
        validate = tuple(validate)
    if max_turns is None:
        # Left unset, the case's limit makes room for its responder's own budget: setting only
        # ``responder(max_turns=12)`` gets 12 follow-ups, never a silent cap at the default.
        wanted = getattr(user, "max_turns", None)
        max_turns = wanted if isinstance(wanted, int) and wanted > DEFAULT_MAX_TURNS else None
        max_turns = max_turns or DEFAULT_MAX_TURNS
    return Case(
        id=id,
        validate=validate,
        name=name,
        # Anything but a mapping is kept as given, for the rules to name.
        variables=dict(variables) if isinstance(variables, Mapping) else variables or {},
        source=source,
        prepare=prepare,
        cache=cache,
        tags=(tags,) if isinstance(tags, str) else tuple(tags),
        user=user,
        max_turns=max_turns,
        timeout_ms=timeout_ms,
        expected_output=expected_output,
        plan_mode=plan_mode,
        threshold=threshold,
        check_timeout_ms=check_timeout_ms,
        prepare_timeout_ms=prepare_timeout_ms,
        mocks=_items(mocks),
        task=task,
    )


def _items(value: Any) -> tuple[Any, ...]:
    """A list field's items; a lone value given where a list is asked for is a list of one
    (``cases=case(...)``), for the rules to judge like any other item."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        return (value,)
    return tuple(value)


@dataclass(frozen=True)
class AdaptiveTrials:
    """``trials=adaptive(min=2, max=10)``: every cell (case x variant) runs ``min`` trials, then
    one more at a time while its outcome is undecided (its confidence sequence straddles
    ``threshold``, or a pair of variants on the case cannot be told apart), up to ``max``. See
    docs/compare.md, "Adaptive trials"."""

    min: int
    max: int
    # The pass rate a cell is decided against, and the confidence of the sequences.
    threshold: float = 0.5
    confidence: float = 0.95

    def to_json(self) -> dict[str, Any]:
        return {
            "min": self.min,
            "max": self.max,
            "threshold": self.threshold,
            "confidence": self.confidence,
        }


def adaptive(
    min: int = 2, max: int = 10, *, threshold: float = 0.5, confidence: float = 0.95
) -> AdaptiveTrials:
    """Adaptive trials for ``suite(trials=...)``: ``min`` trials per cell, more only where the
    outcome is undecided, ``max`` at most."""
    return AdaptiveTrials(min=min, max=max, threshold=threshold, confidence=confidence)


# A suite's prompt when it gives none: the instruction of a task case (proctor.tasks).
TASK_PROMPT = "{{instruction}}"


def _persona_opens(case: object) -> bool:
    """Whether the case is a conversation whose persona writes its first message itself."""
    return getattr(getattr(case, "user", None), "persona_opens", False) is True


@dataclass(frozen=True)
class Suite:
    id: str
    prompt: str
    cases: tuple[Case, ...]
    variants: tuple[Variant, ...]
    name: str | None = None
    system_prompt: str | None = None
    source: Source | None = None
    # A count, or adaptive(min=..., max=...).
    trials: int | AdaptiveTrials = 1
    capture_source: bool = True
    # Mocks every case of the suite gets (a case's mock of the same name replaces one).
    mocks: tuple[Any, ...] = ()
    # More paths the workspace diff and the turns' file changes leave out, after the default
    # list of generated files (runner.workspace.diff.DEFAULT_IGNORE), as .gitignore lines:
    # "build/", "*.log", "!expected.log".
    diff_ignore: tuple[str, ...] = ()
    # The most a batch running this suite may spend, in US dollars (None: no cap); see
    # `proctor eval --max-cost`.
    budget: float | None = None

    @property
    def label(self) -> str:
        return self.name or self.id


def suite(
    id: str,
    *,
    prompt: str | None = None,
    cases: Sequence[Case],
    variants: Sequence[Variant],
    name: str | None = None,
    system_prompt: str | None = None,
    source: Source | None = None,
    trials: int | AdaptiveTrials = 1,
    capture_source: bool = True,
    mocks: Sequence[Any] = (),
    diff_ignore: Sequence[str] = (),
    budget: float | None = None,
) -> Suite:
    """A prompt template with its cases and the variants to run them under. Left out, the
    prompt is a task case's instruction (``{{instruction}}``) when every case is a task case;
    otherwise it is required (the rules say so)."""
    cases = _items(cases)
    if prompt is None and cases and all(getattr(c, "task", None) is not None for c in cases):
        prompt = TASK_PROMPT
    if prompt is None and cases and all(_persona_opens(c) for c in cases):
        # No prompt is ever sent: every conversation's first message is the persona's.
        prompt = ""
    return Suite(
        id=id,
        prompt=prompt,  # type: ignore[arg-type]  # None is named by the rules
        cases=cases,
        variants=_items(variants),
        name=name,
        system_prompt=system_prompt,
        source=source,
        trials=trials,
        capture_source=capture_source,
        mocks=_items(mocks),
        diff_ignore=(diff_ignore,) if isinstance(diff_ignore, str) else tuple(diff_ignore),
        budget=budget,
    )
