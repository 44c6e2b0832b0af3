"""A promptfoo config as a Proctor eval file.

``translate_config`` reads the config's values (and the files it points to) and returns the
eval file's source with the list of everything it could not carry over, each named. It writes
nothing.

How promptfoo's concepts land:

- ``providers`` become variants (providers.py): OpenAI and Anthropic models on the chat
  harness, ``exec:``, Python and ``echo`` providers on the command harness;
  ``promptfoo:simulated-user`` is not a variant but the person's side of the conversation.
- ``prompts`` are resolved as promptfoo resolves them (prompts.py); one Proctor cannot fill
  as written is rendered per test into the case's ``promptfoo_prompt_N`` variable.
- Several ``prompts`` are compared as promptfoo compares them: N prompts under M providers are
  N × M variants, each carrying its prompt (``variant(..., prompt=..., prompt_name=...)``) and
  named by its provider and its prompt's label; the suite's prompt is the first one.
- ``tests`` become cases (``description`` the name, a slug of it the id, ``vars`` the
  variables, ``assert`` the weighted assertions, ``threshold`` the case's), with ``defaultTest``
  merged into each as promptfoo does. A var holding a list runs the test once per item.
- With a simulated user, promptfoo sends the prompt to the agent as its system prompt, so it
  becomes the suite's ``system_prompt``; ``vars.instructions`` is the persona,
  ``initialMessages`` the seeded conversation. It runs as promptfoo runs it
  (``simulated_user(..., persona_opens=True)``): no opening prompt, the persona writes every
  message, its first included (``vars.message`` is an ordinary var, as in promptfoo), seeded
  messages ending with the person's are answered by the agent first, and ``maxTurns`` counts
  the persona's messages. Without one, the prompt is the suite's ``prompt``. A config mixing
  both gets one suite for each.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from proctor.definitions import DEFAULT_MAX_TURNS, prompt_label
from proctor.prompt_templates import variables_in
from proctor.promptfoo_vars import DATA_VARIABLES
from proctor.rules import MAX_TAGS, MAX_TURNS_RANGE
from runner.importers import ImportFailed
from runner.importers.handles import UniqueHandles, slugify
from runner.importers.nunjucks import as_text, fill_variables, unsupported_expressions
from runner.importers.promptfoo.assertions import (
    TestOptions,
    assertions_from_short_form,
    derived_metric_assertions,
    read_options,
    scoring_function_assertion,
    translate_assertions,
)
from runner.importers.promptfoo.files import (
    STRUCTURED_SUFFIXES,
    ConfigFiles,
    is_code_reference,
    is_reference,
)
from runner.importers.promptfoo.prompts import Prompt as _Prompt
from runner.importers.promptfoo.prompts import read_prompts, render_per_test
from runner.importers.promptfoo.providers import (
    SIMULATED_USER,
    chat_model,
    provider_entries,
    variants_from,
)
from runner.importers.python_source import Call, Module, Name, Spread, call, identifier_for

# promptfoo's own default when a simulated-user provider gives no maxTurns.
PROMPTFOO_MAX_TURNS = 10
SUITE_ID_LENGTH = 60
TOP_LEVEL_READ = {
    "description",
    "prompts",
    "providers",
    "targets",
    "tests",
    "defaultTest",
    "derivedMetrics",
    "$schema",
}
TEST_READ = {
    "description",
    "vars",
    "assert",
    "threshold",
    "provider",
    "options",
    "metadata",
    "assertScoringFunction",
}
METADATA_COLUMN = "__metadata:"
# The longest tag a case may hold (proctor.rules).
MAX_TAG_CHARS = 50
SIMULATED_READ = {"instructions", "maxTurns", "initialMessages", "userProvider"}
# Vars the simulated user reads itself; the rest are the case's variables.
SIMULATION_VARS = ("instructions", "initialMessages")

ANSWERED_CHECK = '''\
def answered(ctx) -> bool:
    """A promptfoo test without assertions passes when the agent answers; so does this one."""
    return bool(ctx.answer().strip())'''


@dataclass
class PromptfooImport:
    source: str
    untranslated: list[str]
    suites: list[str]
    cases: int


@dataclass
class _Test:
    position: int
    where: str
    description: str | None
    variables: dict[str, Any]
    asserts: Any
    threshold: Any
    simulated: Mapping[str, Any] | None
    metadata: Any = None
    options: TestOptions = field(default_factory=TestOptions)
    scoring: Any = None  # assertScoringFunction, the test's or defaultTest's


@dataclass
class _Translator:
    config: Mapping[str, Any]
    files: ConfigFiles
    output_dir: Path
    untranslated: list[str] = field(default_factory=list)
    handles: UniqueHandles = field(default_factory=UniqueHandles)
    needs_answered: bool = False
    default_options: TestOptions = field(default_factory=TestOptions)
    derived: list[Call] = field(default_factory=list)

    def skip(self, item: str) -> None:
        if item not in self.untranslated:
            self.untranslated.append(item)


def translate_config(
    config: Mapping[str, Any], *, config_path: Path, output_path: Path
) -> PromptfooImport:
    """The eval file for ``config`` (read from ``config_path``; ``file://`` paths are relative to
    it), to be written at ``output_path``. Reads referenced files; raises ImportFailed when one
    cannot be read."""
    t = _Translator(config, ConfigFiles(config_path), output_path.resolve().parent)
    for key in config:
        if key not in TOP_LEVEL_READ:
            t.skip(f"top-level {key}")
    prompts = read_prompts(config.get("prompts"), t.files, t.skip)
    variants, provider_simulated = variants_from(
        config.get("providers", config.get("targets")), t.files, t.skip, eval_dir=t.output_dir
    )
    default = _default_test(t)
    t.derived = derived_metric_assertions(config.get("derivedMetrics"), t.skip)
    tests = _tests(t, default, provider_simulated)
    replayed = any(p.replays_conversation for p in prompts)
    if replayed or any(test.options.prefix or test.options.suffix for test in tests):
        # A conversation's case opens with its first test's prompt: every prompt is rendered.
        render_per_test(prompts)
    if not tests:
        raise ImportFailed(f"{config_path} has no tests to import; add at least one under tests.")
    module = Module(header=[f"Imported from {config_path.name} by `proctor import promptfoo`."])
    shared = (
        _shared_default_assertions(t, default, module)
        if all(test.options == t.default_options for test in tests)
        else None
    )
    single = [test for test in tests if test.simulated is None]
    simulated = [test for test in tests if test.simulated is not None]
    prompt = prompts[0] if prompts else None
    if single and (prompt is None or not all(p.user for p in prompts)):
        raise ImportFailed(
            f"{config_path} has tests but no prompt to send them with; add one under prompts."
        )
    base_id = _suite_id(config, config_path)
    suite_ids = []
    for group, suffix in ((single, ""), (simulated, "-multi-turn" if single else "")):
        if not group:
            continue
        suite_id = base_id + suffix
        suite_ids.append(suite_id)
        conversational = group is simulated
        if replayed and conversational:
            t.skip("_conversation with a simulated user (its persona holds the conversation)")
        earlier = (
            _earlier_turns(t, group, prompts, variants) if replayed and group is single else {}
        )
        cases = [
            _case(
                t,
                test,
                default=default,
                shared=shared,
                prompts=prompts,
                earlier=earlier.get(id(test), []),
            )
            for test in group
        ]
        # promptfoo fills the agent's prompt with each test's vars: a variant's own system
        # prompt is filled per case (the suite's is not), so a templated one goes there.
        system = (
            (_agent_system_prompt(prompt) if conversational else prompt.system) if prompt else None
        )
        templated = bool(variables_in(system or ""))
        compared = len(prompts) > 1 or templated
        module.assign(
            identifier_for(suite_id, fallback="suite"),
            _suite(
                t,
                suite_id,
                cases,
                _prompt_variants(variants, prompts, conversational=conversational)
                if compared
                else variants,
                prompt,
                conversational=conversational,
                variants_carry_prompts=compared,
            ),
        )
    if t.needs_answered:
        module.functions.append(ANSWERED_CHECK)
    if t.untranslated:
        module.notes = [
            "Not translated from the promptfoo config (edit by hand where it matters):",
            *(f"  - {item}" for item in t.untranslated),
        ]
    return PromptfooImport(
        source=module.source(),
        untranslated=list(t.untranslated),
        suites=suite_ids,
        cases=len(tests),
    )


def _suite_id(config: Mapping[str, Any], config_path: Path) -> str:
    """From the config's description, else its file's name, else its folder's name; short
    enough that ``-multi-turn`` still fits."""
    description = config.get("description")
    stem = config_path.name.split(".")[0]
    for candidate in (
        description if isinstance(description, str) else "",
        "" if stem.lower() in ("promptfooconfig", "promptfoo", "config") else stem,
        config_path.resolve().parent.name,
    ):
        slug = slugify(candidate, fallback="")[:SUITE_ID_LENGTH].rstrip("-")
        if slug:
            return slug
    return "promptfoo"


# --- tests -----------------------------------------------------------------------------------


def _default_test(t: _Translator) -> Mapping[str, Any]:
    default = t.config.get("defaultTest") or {}
    if is_reference(default):
        default = t.files.structured("defaultTest", default)
    if not isinstance(default, Mapping):
        t.skip("defaultTest (not a mapping)")
        return {}
    for key in sorted(set(default) - TEST_READ):
        t.skip(f"defaultTest: {key}")
    t.default_options = read_options(
        default.get("options"), "defaultTest", t.files, t.skip, TestOptions()
    )
    return default


def _raw_tests(t: _Translator) -> list[Any]:
    raw = t.config.get("tests")
    items = raw if isinstance(raw, list) else [] if raw is None else [raw]
    tests: list[Any] = []
    for item in items:
        if not is_reference(item):
            tests.append(item)
            continue
        for reference in t.files.matching("tests", item):
            suffix = t.files.path(reference).suffix
            if suffix == ".csv":
                tests += [
                    _test_from_row(t, row, reference)
                    for row in t.files.csv_rows("tests", reference)
                ]
            elif suffix in STRUCTURED_SUFFIXES:
                loaded = t.files.structured("tests", reference)
                tests += loaded if isinstance(loaded, list) else [loaded]
            else:
                t.skip(f"tests {reference} (only YAML, JSON and CSV test files translate)")
    return tests


def _test_from_row(t: _Translator, row: Mapping[str, str], reference: str) -> dict[str, Any]:
    """A CSV row as promptfoo reads it: columns are vars, ``__expected`` columns assertions,
    ``__metadata:NAME`` columns the test's metadata, ``__metric`` the metric of the row's
    assertions, ``__prefix`` and ``__suffix`` text around its prompt; another ``__`` column is
    named."""
    test: dict[str, Any] = {"vars": {}, "assert": [], "metadata": {}, "options": {}}
    metric = None
    for column, cell in row.items():
        if column is None or cell is None:
            continue
        if column.startswith("__expected"):
            if cell.strip():
                test["assert"].append(assertions_from_short_form(cell))
        elif column == "__description":
            test["description"] = cell
        elif column == "__threshold" and cell.strip():
            test["threshold"] = float(cell)
        elif column == "__metric":
            metric = cell.strip() or None
        elif column in ("__prefix", "__suffix"):
            test["options"][column.removeprefix("__")] = cell
        elif column.startswith(METADATA_COLUMN):
            if cell.strip():
                test["metadata"][column.removeprefix(METADATA_COLUMN)] = cell
        elif column.startswith("__"):
            t.skip(f"tests {reference}: column {column}")
        else:
            test["vars"][column] = cell
    if metric:
        # The row's metric names each of its __expected assertions, as promptfoo reads it.
        test["assert"] = [{**entry, "metric": metric} for entry in test["assert"]]
    return test


def _tests(
    t: _Translator, default: Mapping[str, Any], provider_simulated: Mapping[str, Any] | None
) -> list[_Test]:
    default_simulated = _simulated_config(t, default.get("provider"), "defaultTest")
    tests = []
    for position, raw in enumerate(_raw_tests(t), start=1):
        if not isinstance(raw, Mapping):
            t.skip(f"test #{position} (not a mapping)")
            continue
        description = raw.get("description")
        where = f"test {description!r}" if isinstance(description, str) else f"test #{position}"
        for key in sorted(set(raw) - TEST_READ):
            t.skip(f"{where}: {key}")
        options = read_options(raw.get("options"), where, t.files, t.skip, t.default_options)
        own_vars = raw.get("vars") or {}
        if is_reference(own_vars):
            own_vars = t.files.structured(f"{where}: vars", own_vars)
        variables = {
            **(default.get("vars") or {}),
            **(own_vars if isinstance(own_vars, Mapping) else {}),
        }
        variables = {str(k): _var_value(t, v, where, str(k)) for k, v in variables.items()}
        simulated = provider_simulated
        if "provider" in raw:
            simulated = _simulated_config(t, raw["provider"], where)
        elif default_simulated is not None:
            simulated = default_simulated
        threshold = raw.get("threshold", default.get("threshold"))
        for expanded in _expand(variables):
            tests.append(
                _Test(
                    position,
                    where,
                    description if isinstance(description, str) else None,
                    expanded,
                    raw.get("assert"),
                    threshold,
                    simulated,
                    _merged_metadata(default.get("metadata"), raw.get("metadata")),
                    options,
                    raw.get("assertScoringFunction", default.get("assertScoringFunction")),
                )
            )
    return tests


def _simulated_config(t: _Translator, provider: Any, where: str) -> Mapping[str, Any] | None:
    if provider is None:
        return None
    for provider_id, options in provider_entries(t.skip, provider, where):
        if provider_id == SIMULATED_USER:
            config = options.get("config") or {}
            for key in sorted(set(config) - SIMULATED_READ):
                t.skip(f"{where}: simulated-user config.{key}")
            return config
        t.skip(f"{where}: provider {provider_id} (a test runs under every variant of its suite)")
    return None


def _var_value(t: _Translator, value: Any, where: str, name: str) -> Any:
    """A var's value, with a ``file://`` text or data file read (initialMessages is kept for
    the simulated user to resolve)."""
    if name == "initialMessages" or not is_reference(value):
        return value
    if is_code_reference(value):
        t.skip(f"{where}: vars.{name} {value} (code that makes the value)")
        return value
    what = f"{where}: vars.{name}"
    matched = t.files.matching(what, value)
    if matched != [value]:
        # A glob: one value per file it matches, so the test runs once per file (promptfoo).
        return [_file_value(t, what, reference) for reference in matched]
    return _file_value(t, what, value)


def _file_value(t: _Translator, what: str, reference: str) -> Any:
    if t.files.path(reference).suffix in STRUCTURED_SUFFIXES:
        return t.files.structured(what, reference)
    return t.files.text(what, reference)


def _expand(variables: dict[str, Any]) -> list[dict[str, Any]]:
    """One set of vars per combination of list values, as promptfoo runs them."""
    listed = [
        name
        for name, value in variables.items()
        if isinstance(value, list)
        and value
        and name not in SIMULATION_VARS
        and all(isinstance(item, str | int | float | bool) for item in value)
    ]
    if not listed:
        return [variables]
    combos = itertools.product(*(variables[name] for name in listed))
    return [{**variables, **dict(zip(listed, combo, strict=True))} for combo in combos]


# --- cases and suites ------------------------------------------------------------------------


def _shared_default_assertions(
    t: _Translator, default: Mapping[str, Any], module: Module
) -> Name | None:
    """defaultTest's assertions as one list every case spreads, when they use no test vars."""
    entries = default.get("assert")
    if not entries or "{{" in json.dumps(entries, default=str):
        return None
    translated = translate_assertions(
        entries,
        where="defaultTest",
        variables=default.get("vars") or {},
        files=t.files,
        options=t.default_options,
        output_dir=t.output_dir,
    )
    for item in translated.untranslated:
        t.skip(item)
    return (
        module.assign("default_assertions", translated.assertions)
        if translated.assertions
        else None
    )


def _case(
    t: _Translator,
    test: _Test,
    *,
    default: Mapping[str, Any],
    shared: Name | None,
    prompts: list[_Prompt],
    earlier: list[_Test],
) -> Call:
    entries: list[Any] = []
    if shared is None and isinstance(default.get("assert"), list):
        entries += default["assert"]
    if isinstance(test.asserts, list):
        entries += test.asserts
    elif test.asserts is not None:
        t.skip(f"{test.where}: assert (not a list of assertions)")
    translated = translate_assertions(
        entries,
        where=test.where,
        variables=test.variables,
        files=t.files,
        options=test.options,
        output_dir=t.output_dir,
    )
    for item in translated.untranslated:
        t.skip(item)
    validate: list[Any] = [Spread(shared)] if shared is not None else []
    validate += translated.assertions
    if entries and not validate:
        # Running it would check only that the agent answers: not what the test asks.
        raise ImportFailed(
            f"{t.files.config_path}: {test.where}: none of its assertions can be translated "
            f"({'; '.join(item.removeprefix(test.where + ': ') for item in translated.untranslated)})"
        )
    if not validate:
        t.needs_answered = True
        t.skip(f"{test.where}: no assertion translated; it checks only that the agent answers")
        validate = [Name("answered")]
    validate += t.derived
    scoring = scoring_function_assertion(test.scoring, test.where, t.files, t.output_dir, t.skip)
    if scoring is not None:
        validate.append(scoring)
    threshold = test.threshold
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, int | float)
    ):
        t.skip(f"{test.where}: threshold {threshold!r} (not a number)")
        threshold = None
    fallback = f"test-{test.position}"
    case_id = t.handles.take(
        slugify(test.description, fallback=fallback) if test.description else fallback
    )
    rendered = _rendered(prompts, test)
    replayed: Call | None = None
    user: Call | None
    if earlier:
        # Its conversation's tests so far, the agent answering each: it opens with the first
        # test's prompt, asks each later one's as a turn, and is graded on its own last answer.
        asked = [p.user.strip("{} ") for p in prompts if p.user]
        rendered |= {k: v for k, v in _rendered(prompts, earlier[0]).items() if k in asked}
        later = [_rendered(prompts, e) for e in [*earlier[1:], test]]
        replayed = call(
            "turns", *[call("turn", variables={k: each[k] for k in asked}) for each in later]
        )
    if test.simulated is not None:
        variables = {k: v for k, v in test.variables.items() if k not in SIMULATION_VARS}
        user = _simulated_user(t, test)
        # Compared prompts are the variants' system prompts, filled per case.
        templates = " ".join(_agent_system_prompt(p) or "" for p in prompts)
    else:
        variables = dict(test.variables)
        user = replayed
        templates = " ".join(p.user or "" for p in prompts)
    # A case variable is text: data read from a JSON or YAML file is kept as its JSON (the
    # prompts that use it as data were rendered with it above), and named, for the script
    # providers to give it back to promptfoo's code as data.
    data = sorted(k for k, v in variables.items() if isinstance(v, Mapping | list))
    variables = {
        k: v
        if isinstance(v, str | int | float | bool)
        else as_text(v)
        if v is None
        else json.dumps(v, ensure_ascii=False)
        for k, v in {**variables, **rendered}.items()
    }
    if data:
        variables[DATA_VARIABLES] = json.dumps(data)
    if templates:
        for name in variables_in(templates):
            if name not in variables:
                variables[name] = ""
                t.skip(
                    f"{test.where}: prompt variable {{{{{name}}}}} has no value (promptfoo leaves it empty)"
                )
    return call(
        "case",
        case_id,
        name=test.description,
        variables=variables or None,
        tags=_metadata_tags(t, test) or None,
        user=user,
        max_turns=_case_turns(user) if replayed is None else _replayed_turns(replayed),
        validate=validate,
        threshold=threshold,
    )


def _rendered(prompts: list[_Prompt], test: _Test) -> dict[str, str]:
    """The case variables holding the prompts rendered per test, as ``test`` renders them."""
    return {
        k: v
        for p in prompts
        for k, v in p.variables(
            test.variables, prefix=test.options.prefix, suffix=test.options.suffix
        ).items()
    }


def _earlier_turns(
    t: _Translator, tests: list[_Test], prompts: list[_Prompt], variants: list[Call]
) -> dict[int, list[_Test]]:
    """For each test (by id), the tests before it in its conversation, as promptfoo runs a
    prompt reading ``_conversation``: the tests in order, ``metadata.conversationId`` keeping
    conversations apart (each provider and prompt has its own, as each variant does)."""
    for prompt in prompts:
        if not prompt.replays_conversation:
            t.skip(
                f"{prompt.label}: asked as one more turn of the _conversation prompts' "
                "conversations (promptfoo asks it alone)"
            )
    for variant in variants:
        if variant.args[:1] == ("command",):
            t.skip(
                f"{dict(variant.kwargs).get('name')}: _conversation (the command harness keeps "
                "no earlier turns; only the chat harness does)"
            )
    earlier: dict[int, list[_Test]] = {}
    conversations: dict[Any, list[_Test]] = {}
    for test in tests:
        metadata = test.metadata if isinstance(test.metadata, Mapping) else {}
        conversation = conversations.setdefault(str(metadata.get("conversationId") or ""), [])
        earlier[id(test)] = list(conversation)
        conversation.append(test)
    return earlier


def _replayed_turns(turns: Call) -> int | None:
    """The case's own turn limit when its conversation's follow-ups exceed the default."""
    return len(turns.args) if len(turns.args) > DEFAULT_MAX_TURNS else None


def _merged_metadata(default: Any, own: Any) -> Any:
    """A test's metadata over defaultTest's, as promptfoo merges them (a value that is no
    mapping is kept for _metadata_tags to name)."""
    if isinstance(default, Mapping) and isinstance(own, Mapping):
        return {**default, **own}
    return own if own is not None else default


def _metadata_tags(t: _Translator, test: _Test) -> list[str]:
    """promptfoo's test metadata (``metadata:``, CSV ``__metadata:NAME`` columns) as the case's
    tags, ``name:value``, which the grid filters by; what a tag cannot hold is named."""
    metadata = test.metadata or {}
    if not isinstance(metadata, Mapping):
        t.skip(f"{test.where}: metadata (not a mapping)")
        return []
    tags: list[str] = []
    for key, value in metadata.items():
        tag = f"{key}:{value}"
        if len(tag) > MAX_TAG_CHARS or len(tags) == MAX_TAGS:
            t.skip(
                f"{test.where}: metadata {key} (a tag holds {MAX_TAG_CHARS} characters, a case {MAX_TAGS} tags)"
            )
            continue
        tags.append(tag)
    return tags


def _case_turns(user: Call | None) -> int | None:
    """The case's own turn limit, raised to the simulated user's budget when that is larger:
    a conversation stops at the smaller of the two."""
    turns = dict(user.kwargs).get("max_turns") if user is not None else None
    return turns if isinstance(turns, int) and turns > DEFAULT_MAX_TURNS else None


def _simulated_user(t: _Translator, test: _Test) -> Call:
    config = test.simulated or {}
    variables = test.variables
    template = config.get("instructions")
    if not isinstance(template, str):
        template = "{{instructions}}"  # promptfoo's default: the test's vars.instructions
    instructions = fill_variables(template, variables).strip()
    for expression in unsupported_expressions(instructions):
        t.skip(f"{test.where}: simulated-user instructions expression {expression}")
    if not instructions or instructions == "{{instructions}}":
        t.skip(f"{test.where}: the simulated user has no instructions (vars.instructions)")
        instructions = "Play a person talking to the agent; answer what it asks."
    max_turns = config.get("maxTurns", PROMPTFOO_MAX_TURNS)
    if isinstance(max_turns, bool) or not isinstance(max_turns, int):
        t.skip(f"{test.where}: maxTurns {max_turns!r} (not a whole number)")
        max_turns = PROMPTFOO_MAX_TURNS
    low, high = MAX_TURNS_RANGE
    if not low <= max_turns <= high:
        t.skip(
            f"{test.where}: maxTurns {max_turns} (Proctor allows {low} to {high}; {min(max(max_turns, low), high)} used)"
        )
        max_turns = min(max(max_turns, low), high)
    seeded = variables.get("initialMessages", config.get("initialMessages"))
    return call(
        "simulated_user",
        instructions,
        max_turns=max_turns,
        model=_user_model(t, config.get("userProvider"), test.where),
        initial_messages=_initial_messages(t, seeded, test),
        persona_opens=True,
    )


def _user_model(t: _Translator, provider: Any, where: str) -> str | None:
    if provider is None:
        return None
    for provider_id, _options in provider_entries(t.skip, provider, where):
        model = chat_model(provider_id)
        if model is not None:
            return model
        t.skip(f"{where}: simulated-user userProvider {provider_id}")
    return None


def _initial_messages(t: _Translator, seeded: Any, test: _Test) -> Any:
    """Inline messages as a list; a JSON file as a ``file://`` path relative to the eval file
    (the SDK reads it there); a YAML file read now, since the SDK reads JSON only."""
    if seeded is None or seeded == "" or seeded == []:
        return None
    what = f"{test.where}: initialMessages"
    if isinstance(seeded, str) and seeded.lstrip().startswith("["):
        with contextlib.suppress(ValueError):
            seeded = json.loads(seeded)
    if is_reference(seeded):
        path = t.files.path(seeded)
        loaded = t.files.structured(what, seeded)
        messages = loaded.get("messages") if isinstance(loaded, Mapping) else loaded
        if not _is_message_list(messages):
            raise t.files.fail(
                what, seeded, f"{path} must hold a list of {{role, content}} messages"
            )
        as_file = path.suffix == ".json" and "{{" not in json.dumps(messages)
        if as_file and all(m["role"] != "system" for m in messages):
            return "file://" + Path(os.path.relpath(path.resolve(), t.output_dir)).as_posix()
        seeded = messages
    if not _is_message_list(seeded):
        t.skip(f"{what} (not a list of {{role, content}} messages)")
        return None
    if any(m["role"] == "system" for m in seeded):
        t.skip(
            f"{what}: system messages (a conversation is seeded with user and assistant messages)"
        )
    return [
        {"role": str(m["role"]), "content": fill_variables(str(m["content"]), test.variables)}
        for m in seeded
        if m["role"] != "system"
    ] or None


def _is_message_list(value: Any) -> TypeGuard[list[Mapping[str, Any]]]:
    return isinstance(value, list) and all(
        isinstance(m, Mapping)
        and m.get("role") in ("user", "assistant", "system")
        and "content" in m
        for m in value
    )


def _prompt_variants(
    variants: list[Call], prompts: list[_Prompt], *, conversational: bool
) -> list[Call]:
    """Each provider's variant once per prompt, carrying it (a simulated-user suite's agent
    gets its prompt as the system prompt), named by the provider and the prompt's label: the
    variant's default name, ``chat:MODEL:LABEL``, or the provider's label and the prompt's."""
    if len(prompts) == 1:
        # One prompt compares nothing: the variants keep their names and carry it.
        (only,) = prompts
        text = (
            {"system_prompt": _agent_system_prompt(only)}
            if conversational
            else {"prompt": only.user, "system_prompt": only.system}
        )
        return [call("variant", *v.args, **dict(v.kwargs), **text) for v in variants]
    names = UniqueHandles()
    compared = []
    for prompt in prompts:
        if conversational:
            text = {"system_prompt": _agent_system_prompt(prompt)}
        else:
            text = {"prompt": prompt.user, "system_prompt": prompt.system}
        shown = prompt.name or prompt_label(prompt.user or prompt.system) or prompt.label
        for variant in variants:
            kwargs = dict(variant.kwargs)
            provider = kwargs.pop("name", None)
            default = f"{provider or 'chat:' + str(kwargs.get('model'))}:{shown}"
            name = names.take(default)
            compared.append(
                call(
                    "variant",
                    *variant.args,
                    **kwargs,
                    name=None if name == default and provider is None else name,
                    prompt_name=shown if name == default and provider is None else None,
                    **text,
                )
            )
    return compared


def _agent_system_prompt(prompt: _Prompt) -> str | None:
    """What promptfoo shows a simulated user's agent as its system message: the prompt."""
    return "\n\n".join(p for p in (prompt.system, prompt.user) if p) or None


def _suite(
    t: _Translator,
    suite_id: str,
    cases: list[Call],
    variants: list[Call],
    prompt: _Prompt | None,
    *,
    conversational: bool,
    variants_carry_prompts: bool,
) -> Call:
    description = t.config.get("description")
    name = description if isinstance(description, str) and description.strip() else None
    if conversational:
        # promptfoo shows the agent its prompt as the system message of every turn.
        system = _agent_system_prompt(prompt) if prompt else None
        # A variant's own system prompt is filled per case; the suite's is not.
        if system and variables_in(system) and not variants_carry_prompts:
            t.skip(
                f"{prompt.label if prompt else 'prompt'}: variables in the agent's system prompt "
                "(Proctor does not fill a system prompt per case)"
            )
        # No prompt: every conversation opens with the persona's own message.
        return call(
            "suite",
            suite_id,
            name=name,
            system_prompt=system or None,
            variants=variants,
            cases=cases,
        )
    assert prompt is not None and prompt.user, (
        "translate_config refuses single-turn tests without a prompt"
    )
    return call(
        "suite",
        suite_id,
        name=name,
        prompt=prompt.user,
        system_prompt=prompt.system,
        variants=variants,
        cases=cases,
    )
