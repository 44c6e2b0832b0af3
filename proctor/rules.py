"""The rules an eval's definitions must follow, checked before anything runs.

Each broken rule is one Problem: the file, the suite and case, the field, and the rule in plain
words. All problems are collected, so a person fixes a file in one pass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from proctor.assertions import (
    ASSERTION_TYPES,
    BOUND_TYPES,
    CALL_TYPES,
    DERIVED_METRIC,
    LIST_VALUE_TYPES,
    MODEL_GRADED_TYPES,
    NEGATABLE_TYPES,
    SCHEMA_TYPES,
    SCORING_FUNCTION,
    SIMILARITY_TYPES,
    TEXT_VALUE_TYPES,
    Assertion,
)
from proctor.conversations import DELIVER_WHEN, Responder, SimulatedUser, Turn, Turns
from proctor.definitions import (
    CAPABILITIES,
    PROMPT_OPTIONS,
    AdaptiveTrials,
    Cache,
    Case,
    Command,
    Files,
    Profile,
    Repo,
    Suite,
    Variant,
    a_type,
    repo_kind,
)
from proctor.judges import Judge
from proctor.mock import host_problems, mock_problems
from proctor.prompt_templates import variables_in

HANDLE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
HANDLE_MAX = 100
# The longest name a suite, case or variant is shown by, and a variant's model: what the
# database keeps of each (evals_app.models reads this).
NAME_MAX = 200
MAX_TAGS = 12
MAX_CHECKS = 20
MAX_TURNS_RANGE = (1, 50)
TIMEOUT_MS_RANGE = (1_000, 3_600_000)
# The suffix of JSON eval files (evals_app.json_evals), whose validate lists may hold commands.
EVAL_JSON_SUFFIX = ".eval.json"
TRIALS_RANGE = (1, 1000)
# What a prompt variable may hold: text as given, numbers and booleans through str() (what
# proctor.prompt_templates.filled does); anything else (None, a dict, a list) is refused.
TEMPLATE_VALUE_TYPES = (str, int, float, bool)


@dataclass(frozen=True)
class Problem:
    file: str
    message: str
    suite: str | None = None
    case: str | None = None

    def __str__(self) -> str:
        where = []
        if self.suite:
            where.append(f"suite {self.suite}")
        if self.case:
            where.append(f"case {self.case}")
        return f"{self.file}: {', '.join(where) + ': ' if where else ''}{self.message}"


def text_problem(field: str, value: object, *, longest: int | None = None) -> str | None:
    """An optional text field: left out, or text that is not blank (of at most ``longest``
    characters when given)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        return f"{field} must be text, or left out (got {value!r:.80})"
    if longest is not None and len(value) > longest:
        return f"{field} {value[:20]!r}… is {len(value)} characters; the most is {longest}"
    return None


def name_problem(field: str, value: object) -> str | None:
    """A display name (or a model), as long as the database keeps."""
    return text_problem(field, value, longest=NAME_MAX)


def handle_problem(field: str, value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return (
            f"{field} is required: 1 to {HANDLE_MAX} lowercase letters, digits and single hyphens"
        )
    if len(value) > HANDLE_MAX:
        return f"{field} {value[:20]!r}… is {len(value)} characters; the most is {HANDLE_MAX}"
    if not HANDLE.match(value):
        return (
            f"{field} {value!r} must be lowercase letters, digits and single hyphens, "
            "not starting or ending with a hyphen (like health-route)"
        )
    return None


def trials_problem(trials: object) -> str | None:
    """What is wrong with a suite's ``trials``: a whole number, or ``adaptive(min, max)`` with
    1 <= min <= max within TRIALS_RANGE, a threshold strictly between 0 and 1 and a confidence
    from 0.5 to below 1."""
    if not isinstance(trials, AdaptiveTrials):
        return _in_range("trials", trials, TRIALS_RANGE)
    for name in ("min", "max"):
        if (
            message := _in_range(f"adaptive {name}", getattr(trials, name), TRIALS_RANGE)
        ) is not None:
            return message
    if trials.min > trials.max:
        return f"adaptive min ({trials.min}) must not exceed its max ({trials.max})"
    for name, low, high in (("threshold", 0.0, 1.0), ("confidence", 0.5, 1.0)):
        value = getattr(trials, name)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not (low < value < 1.0 if name == "threshold" else low <= value < high)
        ):
            shown = "strictly between 0 and 1" if name == "threshold" else "from 0.5 to below 1"
            return f"adaptive {name} must be a number {shown} (got {value!r})"
    return None


def _in_range(field: str, value: object, bounds: tuple[int, int], unit: str = "") -> str | None:
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return f"{field} must be a whole number from {low:,} to {high:,}{unit} (got {value!r})"
    return None


def _check_problems(
    case: Case, is_check: Callable[[object], bool], *, commands_in_lists: bool
) -> list[str]:
    validate = case.validate
    if validate is None and case.task is not None:
        return []  # graded by its task's verifier
    if validate is None:
        return [
            "validate is required: a command(), a validator, a judge, or a list of validators and judges"
        ]
    if isinstance(validate, list | tuple):
        problems = []
        if not validate:
            problems.append("validate is an empty list; give at least one check")
        if len(validate) > MAX_CHECKS:
            problems.append(f"validate holds {len(validate)} checks; the most is {MAX_CHECKS}")
        for position, check in enumerate(validate, start=1):
            if isinstance(check, Command) and commands_in_lists:
                problems.extend(f"validate[{position}]: {p}" for p in _command_problems(check))
            elif isinstance(check, Command):
                problems.append(
                    f"validate[{position}] is a command(), which cannot go in a list; "
                    "use it alone, or run it from a validator with ctx.exec()"
                )
            elif not is_check(check):
                problems.append(
                    f"validate[{position}] is {a_type(check)}, not a validator or judge"
                )
        return problems
    if isinstance(validate, Command):
        return _command_problems(validate)
    if not is_check(validate):
        return [f"validate is {a_type(validate)}, not a command(), validator or judge"]
    return []


def _command_problems(check: Command) -> list[str]:
    """What the trial could not run of a ``command()`` (before, a trial errored on it)."""
    problems = []
    if not isinstance(check.command, str) or not check.command.strip():
        problems.append(
            "command() needs the shell command to run, as text, like command('pytest -q') "
            f"(got {check.command!r})"
        )
    if check.name is not None and (not isinstance(check.name, str) or not check.name.strip()):
        problems.append(f"command() name must be text, or left out (got {check.name!r})")
    if message := _in_range(
        "command() timeout_ms", check.timeout_ms, TIMEOUT_MS_RANGE, " milliseconds"
    ):
        problems.append(message)
    return problems


def _judge_problems(check: Judge) -> list[str]:
    """What a model could not grade by, of a ``judge()``."""
    if not isinstance(check.rubric, str) or not check.rubric.strip():
        return [
            "judge() needs a rubric, the text the model grades by, like judge('The answer "
            f"names the root cause') (got {check.rubric!r})"
        ]
    where = f"judge {check.label!r}"
    problems = []
    if isinstance(check.threshold, bool) or not (
        isinstance(check.threshold, int | float) and 0 <= check.threshold <= 1
    ):
        problems.append(
            f"{where}: threshold must be a number from 0 to 1 (got {check.threshold!r})"
        )
    for field in ("model", "name"):
        value = getattr(check, field)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            problems.append(f"{where}: {field} must be text, or left out (got {value!r})")
    return problems


def _cache_problem(cache: object) -> str | None:
    if cache is None:
        return None
    if not isinstance(cache, Cache) or not cache.key or not cache.path:
        return "cache needs a key and a path, like {'key': 'deps-v1', 'path': 'node_modules'}"
    path = PurePosixPath(cache.path)
    if path.is_absolute() or ".." in path.parts or str(path) in (".", ""):
        return (
            f"cache path {cache.path!r} must stay inside the workspace (a relative folder, no '..')"
        )
    return None


def _source_problem(field: str, source: object) -> str | None:
    if source is None:
        return None
    if isinstance(source, Repo):
        return _repo_problem(field, source)
    if isinstance(source, Files):
        return _files_problem(field, source.files)
    return f"{field} must be files(...), repo(...) or left out, not {type(source).__name__}"


def _repo_problem(field: str, source: Repo) -> str | None:
    if not isinstance(source.url, str) or repo_kind(source.url) is None:
        return (
            f"{field} repo({source.url!r}) names no repository: give owner/name (with @ref), "
            "a clone URL or a local path"
        )
    if source.ref is not None and (not isinstance(source.ref, str) or not source.ref.strip()):
        return f"{field} repo ref must be a branch, tag or commit, or left out (got {source.ref!r})"
    return None


def _files_problem(field: str, contents: object) -> str | None:
    """Every file a workspace can be made of: a relative path inside it, of text, and no file
    where another one needs a folder (``a`` and ``a/b``)."""
    if not isinstance(contents, Mapping):
        return (
            f"{field} files() takes a mapping of paths to text, like "
            f"files({{'src/app.py': '...'}}) (got {a_type(contents)})"
        )
    paths = set()
    for path, text in contents.items():
        if not isinstance(path, str) or not path.strip() or path.endswith("/"):
            return f"{field} file {path!r} must be a file's relative path, like 'src/app.py'"
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts:
            return f"{field} file {path!r} must stay inside the workspace"
        if not isinstance(text, str):
            return f"{field} file {path!r} must hold text (got {a_type(text)})"
        paths.add(pure)
    for pure in sorted(paths):
        if folder := next((parent for parent in pure.parents if parent in paths), None):
            return f"{field} file {str(folder)!r} is also the folder of {str(pure)!r}"
    return None


def _diff_ignore_problem(patterns: object) -> str | None:
    """``diff_ignore`` extends the workspace diff's ignore list with glob patterns, read as the
    lines of a ``.gitignore``."""
    # Imported here, not at the top: only a suite with diff_ignore pays its ~20 ms.
    import pathspec

    if not isinstance(patterns, tuple | list):
        return "diff_ignore must be a list of glob patterns, like ['dist/', '*.log']"
    for position, pattern in enumerate(patterns, start=1):
        if not isinstance(pattern, str) or not pattern.strip():
            return (
                f"diff_ignore[{position}] must be a non-empty glob pattern like '*.log' "
                f"(got {pattern!r})"
            )
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern.strip()])
        except ValueError:  # pathspec's GitIgnorePatternError: "!" alone, a trailing "\\"
            return (
                f"diff_ignore[{position}] must be a pattern git reads in a .gitignore, like "
                f"'dist/' or '!keep.log' (got {pattern!r})"
            )
    return None


def is_check(value: object) -> bool:
    """A validator (any callable), a model judge or a weighted assertion."""
    return isinstance(value, Judge | Assertion) or callable(value)


def _assertion_problem(item: Assertion, mock_names: set[str]) -> str | None:
    for field in ("metric", "name"):
        if message := text_problem(field, getattr(item, field)):
            return f"assertion ({item.type}): {message}"
    where = f"assertion {item.label!r}"
    if item.type not in ASSERTION_TYPES:
        return f"{where}: unknown type {item.type!r} (known: {', '.join(ASSERTION_TYPES)})"
    if (
        isinstance(item.weight, bool)
        or not isinstance(item.weight, int | float)
        or not math.isfinite(item.weight)
        or item.weight < 0
    ):
        return f"{where}: weight must be a finite number, 0 or more (0 is information only)"
    if item.type == "python" and not callable(item.value) and item.script is None:
        return (
            f"{where}: a python assertion's value is a function f(ctx), or promptfoo's form: "
            "code as text or 'file://check.py[:function]'"
        )
    if item.type in ("javascript", SCORING_FUNCTION) and item.script is None:
        return f"{where}: a javascript assertion's value is code as text or 'file://check.js[:function]'"
    if item.threshold is not None and (
        isinstance(item.threshold, bool)
        or not isinstance(item.threshold, int | float)
        or not math.isfinite(item.threshold)
    ):
        return f"{where}: threshold must be a finite number (got {item.threshold!r})"
    if item.type in SIMILARITY_TYPES and not (
        (isinstance(item.value, str) and item.value.strip())
        or (
            isinstance(item.value, list | tuple)
            and item.value
            and all(isinstance(text, str) for text in item.value)
        )
    ):
        return f"{where}: value is the text to compare with, or a non-empty list of texts"
    if item.type in SCHEMA_TYPES and item.value is not None and not isinstance(item.value, dict):
        return f"{where}: value, when given, is a JSON schema (a dict)"
    if item.type == DERIVED_METRIC and not (
        isinstance(item.value, str) and item.value.strip() and item.metric
    ):
        return f"{where}: a derived metric needs metric= (its name) and an expression as value"
    if item.type in BOUND_TYPES and (
        isinstance(item.value, bool)
        or not isinstance(item.value, int | float)
        or not math.isfinite(item.value)
        or item.value < 0
    ):
        return (
            f"{where}: a {item.type} assertion's value is a finite number, 0 or more "
            f"(the most allowed; got {item.value!r})"
        )
    if item.type in LIST_VALUE_TYPES and not (
        isinstance(item.value, list | tuple)
        and item.value
        and all(isinstance(text, str) for text in item.value)
    ):
        return f"{where}: value must be a non-empty list of strings"
    if item.type == "llm-rubric" and isinstance(item.value, str) and not item.value.strip():
        return f"{where}: the value is the rubric the model grades by, and it is blank"
    if item.type in TEXT_VALUE_TYPES and not isinstance(item.value, str):
        return f"{where}: value must be a string"
    if item.type in ("regex", "not-regex"):
        try:
            re.compile(item.value)
        except re.error as exc:
            return f"{where}: not a valid regex ({exc})"
    if item.type in CALL_TYPES:
        return _call_assertion_problem(item, where, mock_names)
    return _promptfoo_option_problem(item, where)


def _promptfoo_option_problem(item: Assertion, where: str) -> str | None:
    """The ``not-`` prefix, rubric_prompt and config, on the types that read them."""
    if item.inverse and item.type not in NEGATABLE_TYPES:
        return f"{where}: only {', '.join(NEGATABLE_TYPES)} take the not- prefix"
    if item.inverse and callable(item.value):
        return f"{where}: not-python takes code as text; a function f(ctx) negates its own answer"
    if item.rubric_prompt is not None and item.type not in MODEL_GRADED_TYPES:
        return f"{where}: rubric_prompt is for {' and '.join(MODEL_GRADED_TYPES)} only"
    if item.rubric_prompt is not None and (
        not isinstance(item.rubric_prompt, str) or not item.rubric_prompt.strip()
    ):
        return f"{where}: rubric_prompt is the grading prompt as text (got {item.rubric_prompt!r})"
    if item.config is not None and not isinstance(item.config, dict):
        return f"{where}: config is a dict (code reads it as context.config)"
    return None


def _call_assertion_problem(item: Assertion, where: str, mock_names: set[str]) -> str | None:
    call = item.value.get("call") if isinstance(item.value, dict) else item.value
    if not isinstance(call, str) or not call.split():
        return f"{where}: value names a mock and its call, like 'billing POST /refunds'"
    if call.split()[0] not in mock_names:
        known = ", ".join(sorted(mock_names)) or "none"
        return f"{where}: no mock named {call.split()[0]!r} in this case (its mocks: {known})"
    if item.type == "call-count":
        bounds = (
            {k: v for k, v in item.value.items() if k != "call"}
            if isinstance(item.value, dict)
            else {}
        )
        if not bounds or any(
            k not in ("count", "min", "max") or isinstance(v, bool) or not isinstance(v, int)
            for k, v in bounds.items()
        ):
            return f"{where}: a call-count value is {{'call': '...', 'count': n}} (or 'min'/'max')"
    return None


def _prompt_again_problems(item: Turn, position: int, case: Case) -> list[str]:
    """A turn asking the case's prompt again: its variables are text by name, and it has no
    prompt of its own."""
    variables = item.variables
    if item.prompt is not None:
        return [f"turn {position} gives both a prompt and variables; it asks one or the other"]
    if not isinstance(variables, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in variables.items()
    ):
        return [f"turn {position}'s variables must map names to text (got {variables!r:.80})"]
    return []


def _conversation_problems(case: Case) -> list[str]:
    user = case.user
    problems = []
    if user is not None and not isinstance(user, Turns | Responder | SimulatedUser):
        problems.append(
            f"user must be turns(...), responder(...) or simulated_user(...), not {type(user).__name__}"
        )
    if isinstance(user, Turns):
        if not user.turns:
            problems.append("user=turns() holds no turn")
        for position, item in enumerate(user.turns, start=1):
            if item.variables is not None:
                problems += _prompt_again_problems(item, position, case)
            elif not isinstance(item.prompt, str):
                problems.append(f"turn {position}'s prompt must be text (got {item.prompt!r:.80})")
            elif not item.prompt.strip():
                problems.append(f"turn {position} has an empty prompt")
            if item.deliver_when not in DELIVER_WHEN:
                problems.append(
                    f"turn {position}: deliver_when must be one of {', '.join(DELIVER_WHEN)}, not {item.deliver_when!r}"
                )
            if item.agent_response_matches is not None:
                try:
                    re.compile(item.agent_response_matches)
                except TypeError:
                    problems.append(
                        f"turn {position}: agent_response_matches must be a regex's text "
                        f"(got {item.agent_response_matches!r:.80})"
                    )
                except re.error as exc:
                    problems.append(
                        f"turn {position}: agent_response_matches is not a valid regex ({exc})"
                    )
    if isinstance(user, Responder | SimulatedUser):
        kind = "responder" if isinstance(user, Responder) else "simulated_user"
        if message := text_problem(f"{kind} model", user.model):
            problems.append(message)
        # A blank first message is left to mean none: the case's prompt opens.
        opening = getattr(user, "first_message", None)
        if opening is not None and not isinstance(opening, str):
            problems.append(f"simulated_user first_message must be text (got {opening!r})")
    if isinstance(user, Responder) and (
        message := _in_range("responder max_turns", user.max_turns, MAX_TURNS_RANGE)
    ):
        problems.append(message)
    elif (
        isinstance(user, Responder)
        and isinstance(case.max_turns, int)
        and case.max_turns < user.max_turns
    ):
        # Both bound the same follow-ups: the smaller one would cut the responder short.
        problems.append(
            f"max_turns {case.max_turns} leaves the responder's max_turns {user.max_turns} "
            f"unreachable (both count follow-ups); give the case max_turns={user.max_turns} "
            "or more, or lower the responder's"
        )
    if isinstance(user, SimulatedUser):
        if not isinstance(user.instructions, str) or not user.instructions.strip():
            problems.append("simulated_user needs instructions describing the persona")
        if message := _in_range("simulated_user max_turns", user.max_turns, MAX_TURNS_RANGE):
            problems.append(message)
        for role, _content in user.initial_messages:
            if role not in ("user", "assistant"):
                problems.append(f"initial_messages role must be user or assistant, not {role!r}")
                break
        if not isinstance(user.persona_opens, bool):
            problems.append(
                f"simulated_user persona_opens must be True or False (got {user.persona_opens!r})"
            )
        elif user.persona_opens and isinstance(user.first_message, str):
            problems.append(
                "simulated_user has a first_message and persona_opens=True; the persona writes "
                "the first message itself, so give one or the other"
            )
    if not isinstance(case.plan_mode, bool):
        problems.append(
            f"plan_mode must be True or False (true or false in JSON; got {case.plan_mode!r})"
        )
    return problems


def case_problems(
    suite: Suite,
    case: Case,
    *,
    is_check: Callable[[object], bool] = is_check,
    commands_in_lists: bool = False,
) -> list[str]:
    """Every rule ``case`` breaks, one sentence each. ``commands_in_lists``: its ``validate``
    list may hold command() checks (a JSON eval file's, which has no validator to run one
    from; a Python file runs one from a validator with ctx.exec())."""
    problems = []
    for message in (
        handle_problem("id", case.id),
        _in_range("max_turns", case.max_turns, MAX_TURNS_RANGE),
        _in_range("timeout_ms", case.timeout_ms, TIMEOUT_MS_RANGE, " milliseconds"),
        *(
            _in_range(field, value, TIMEOUT_MS_RANGE, " milliseconds")
            for field, value in (
                ("check_timeout_ms", case.check_timeout_ms),
                ("prepare_timeout_ms", case.prepare_timeout_ms),
            )
            if value is not None
        ),
        _cache_problem(case.cache),
        _source_problem("source", case.source),
    ):
        if message:
            problems.append(message)
    if len(case.tags) > MAX_TAGS:
        problems.append(f"tags holds {len(case.tags)} labels; the most is {MAX_TAGS}")
    for tag in case.tags:
        if not isinstance(tag, str) or not tag.strip() or len(tag) > 50:
            problems.append(f"tag {tag!r} must be a label of 1 to 50 characters")
    if message := name_problem("name", case.name):
        problems.append(message)
    if message := text_problem("expected_output", case.expected_output):
        problems.append(message)
    if case.prepare is not None and not callable(case.prepare):
        problems.append("prepare must be a function that receives the prepare helpers")
    problems.extend(_check_problems(case, is_check, commands_in_lists=commands_in_lists))
    problems.extend(_conversation_problems(case))
    if case.threshold is not None and (
        isinstance(case.threshold, bool)
        or not isinstance(case.threshold, int | float)
        or not math.isfinite(case.threshold)
        or not 0 <= case.threshold <= 1
    ):
        problems.append(f"threshold must be a number from 0 to 1 (got {case.threshold!r})")
    problems.extend(mock_problems(list(case.mocks)))
    problems.extend(host_problems(suite.mocks, case.mocks, suite.variants))
    mock_names = {getattr(m, "name", "") for m in (*suite.mocks, *case.mocks)}
    for check in case.checks:
        if isinstance(check, Assertion) and (message := _assertion_problem(check, mock_names)):
            problems.append(message)
        if isinstance(check, Judge):
            problems.extend(_judge_problems(check))
    if not isinstance(case.variables, Mapping):
        problems.append(
            "variables must map each {{name}} of the prompt to its value, like "
            f"{{'task': 'Add a route'}} (got {a_type(case.variables)})"
        )
        return problems
    for name, value in case.variables.items():
        if not isinstance(value, TEMPLATE_VALUE_TYPES):
            problems.append(
                f"variable {name} is a {type(value).__name__}; a prompt variable is text, or a "
                "number or True/False written with str() (pass json.dumps(...) for structured data)"
            )
    if isinstance(suite.prompt, str):
        missing = [name for name in variables_in(suite.prompt) if name not in case.variables]
        for name in missing:
            problems.append(f"prompt variable {{{{{name}}}}} has no value in variables")
    for variant in suite.variants:
        if not isinstance(variant, Variant):
            continue
        for field in PROMPT_OPTIONS:
            template = variant.options.get(field)
            if not isinstance(template, str):
                continue
            for name in variables_in(template):
                if name not in case.variables:
                    problems.append(
                        f"variable {{{{{name}}}}} of variant {variant.name}'s "
                        f"{field.replace('_', ' ')} has no value in variables"
                    )
    return problems


def _profile_problems(profile: Profile) -> list[str]:
    """What of a ``profile()`` no harness could use: each field of its own type, the
    capabilities known ones (an unknown one was ignored without a word)."""
    if not isinstance(profile, Profile):
        return [f"profile must be built with profile(...), not {type(profile).__name__}"]
    problems = []
    if not isinstance(profile.name, str) or not profile.name.strip():
        problems.append(f"profile needs a name (got {profile.name!r})")
    for field in ("run", "install", "system_prompt", "plan_file"):
        value = getattr(profile, field)
        if value is not None and not isinstance(value, str):
            problems.append(f"profile {field} must be text (got {a_type(value)})")
    env = profile.env
    if not isinstance(env, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in env.items()
    ):
        problems.append(
            "profile env must map variable names to text, like {'API_KEY': '$API_KEY'} "
            f"(got {env!r})"
        )
    unknown = [c for c in profile.capabilities if c not in CAPABILITIES]
    if unknown:
        problems.append(
            f"profile capabilities: unknown {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(CAPABILITIES)})"
        )
    return problems


def _variant_problems(
    variants: Sequence[Variant],
    known_harnesses: Iterable[str] | None,
    known_sandboxes: Iterable[str] | None,
) -> list[str]:
    problems = []
    harnesses = set(known_harnesses) if known_harnesses is not None else None
    sandboxes = set(known_sandboxes) if known_sandboxes is not None else None
    seen: set[str] = set()
    for variant in variants:
        if not isinstance(variant, Variant):
            problems.append(
                f"variants must be built with variant(...), not {type(variant).__name__}"
            )
            continue
        if not isinstance(variant.harness, str) or not isinstance(variant.sandbox, str):
            problems.append(
                f"variant {variant.name}: the harness and the sandbox are names, like "
                f"variant('claude-code', sandbox='docker') (got {variant.harness!r}, "
                f"{variant.sandbox!r})"
            )
            continue
        for field in ("model", "name"):
            if message := name_problem(field, getattr(variant, field)):
                shown = variant.name if len(str(variant.name)) <= 60 else f"{variant.name:.57}..."
                problems.append(f"variant {shown}: {message}")
        if variant.name in seen:
            problems.append(
                f"variant name {variant.name!r} is used twice; give one of them name=..."
            )
        seen.add(variant.name)
        if harnesses is not None and variant.harness not in harnesses:
            problems.append(
                f"variant {variant.name}: unknown harness {variant.harness!r} (known: {', '.join(sorted(harnesses))})"
            )
        if sandboxes is not None and variant.sandbox not in sandboxes:
            problems.append(
                f"variant {variant.name}: unknown sandbox {variant.sandbox!r} (known: {', '.join(sorted(sandboxes))})"
            )
        if not isinstance(variant.network, bool):
            problems.append(
                f"variant {variant.name}: network must be true or false (got {variant.network!r})"
            )
        for field in PROMPT_OPTIONS:
            if message := text_problem(field, variant.options.get(field)):
                problems.append(f"variant {variant.name}: {message}")
        if variant.profile is not None:
            problems.extend(
                f"variant {variant.name}: {problem}"
                for problem in _profile_problems(variant.profile)
            )
        if variant.harness == "command" and (variant.profile is None or not variant.profile.run):
            problems.append(
                f"variant {variant.name}: the command harness needs profile(..., run='...')"
            )
    return problems


def suite_problems(
    suite: Suite,
    file: str,
    *,
    known_harnesses: Iterable[str] | None = None,
    known_sandboxes: Iterable[str] | None = None,
    is_check: Callable[[object], bool] = is_check,
) -> list[Problem]:
    """Every rule ``suite`` and its cases break, one Problem each."""
    problems: list[Problem] = []
    sid = suite.id if isinstance(suite.id, str) else None

    def add(message: str, case: str | None = None) -> None:
        problems.append(Problem(file=file, suite=sid, case=case, message=message))

    if (message := handle_problem("id", suite.id)) is not None:
        add(message)
    persona_opened = bool(suite.cases) and all(
        getattr(getattr(c, "user", None), "persona_opens", False) is True for c in suite.cases
    )
    if not isinstance(suite.prompt, str) or not (suite.prompt.strip() or persona_opened):
        add("prompt is required: the template each case fills in, like '{{task}}'")
    if (message := trials_problem(suite.trials)) is not None:
        add(message)
    if (message := budget_problem(suite.budget)) is not None:
        add(message)
    if message := name_problem("name", suite.name):
        add(message)
    if message := text_problem("system_prompt", suite.system_prompt):
        add(message)
    if (message := _source_problem("source", suite.source)) is not None:
        add(message)
    if (message := _diff_ignore_problem(suite.diff_ignore)) is not None:
        add(message)
    for message in mock_problems(list(suite.mocks)):
        add(message)
    if not suite.cases:
        add("cases is empty; a suite needs at least one case")
    if not suite.variants:
        add("variants is empty; a suite needs at least one variant to run under")
    for message in _variant_problems(suite.variants, known_harnesses, known_sandboxes):
        add(message)
    for case in suite.cases:
        if not isinstance(case, Case):
            add(f"cases must be built with case(...), not {type(case).__name__}")
            continue
        for message in case_problems(
            suite, case, is_check=is_check, commands_in_lists=file.endswith(EVAL_JSON_SUFFIX)
        ):
            add(message, case.id if isinstance(case.id, str) else None)
    for message in _task_variant_problems(suite.cases, suite.variants):
        add(message)
    return problems


# The sandboxes that run a task case in its own image, and the harness that runs only those.
IMAGE_SANDBOXES = ("docker",)
ORACLE_HARNESS = "oracle"


def _task_variant_problems(cases: Sequence[Case], variants: Sequence[Variant]) -> list[str]:
    """A task case runs in its image, so only under a sandbox that can hold one; the oracle
    runs a task's solution, so only task cases. One line per variant."""
    problems = []
    real = [c for c in cases if isinstance(c, Case)]
    task_cases = [c.id for c in real if c.task is not None]
    other_cases = [c.id for c in real if c.task is None]
    for variant in variants:
        if not isinstance(variant, Variant):
            continue
        if task_cases and variant.sandbox not in IMAGE_SANDBOXES:
            problems.append(
                f"variant {variant.name}: task cases run in their task's image, which the "
                f'{variant.sandbox} sandbox cannot hold; give the variant sandbox="docker"'
            )
        if other_cases and variant.harness == ORACLE_HARNESS:
            problems.append(
                f"variant {variant.name}: the oracle runs a task's solution, and case "
                f"{other_cases[0]} is not a task case (read task cases with tasks(path))"
            )
    return problems


def duplicate_problems(suites: Sequence[tuple[str, Suite]]) -> list[Problem]:
    """Suite ids and case ids used twice across the loaded files (a case id is unique within an
    organization, whatever suite holds it)."""
    problems = []
    suite_files: dict[str, str] = {}
    case_owners: dict[str, tuple[str, str]] = {}
    for file, suite in suites:
        if suite.id in suite_files:
            problems.append(
                Problem(
                    file=file,
                    suite=suite.id,
                    message=f"suite id is already used in {suite_files[suite.id]}",
                )
            )
        suite_files.setdefault(suite.id, file)
        for case in suite.cases:
            if not isinstance(case, Case):
                continue
            if case.id in case_owners:
                other_file, other_suite = case_owners[case.id]
                problems.append(
                    Problem(
                        file=file,
                        suite=suite.id,
                        case=case.id,
                        message=f"id is already used by suite {other_suite} in {other_file}; case ids are unique within an organization",
                    )
                )
            else:
                case_owners[case.id] = (file, suite.id)
    return problems


def budget_problem(budget: object) -> str | None:
    """What is wrong with a suite's ``budget=`` (US dollars, above 0), or None."""
    if budget is None:
        return None
    if (
        isinstance(budget, bool)
        or not isinstance(budget, int | float)
        or not 0 < budget < float("inf")
    ):
        return f"budget must be an amount of US dollars above 0, like 2.50, not {budget!r:.40}"
    return None
