"""Reading a promptfoo config and the files it points to with ``file://``.

promptfoo resolves ``file://`` paths against the config's folder. Anything that cannot be read
is an ImportFailed whose sentence names the config, the reference and the file. YAML is read
with the YAML 1.2 core schema promptfoo's parser uses (``Yes`` is text, not True).
"""

from __future__ import annotations

import csv
import glob
import io
import json
import re
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from runner.importers import ImportFailed

FILE_PREFIX = "file://"
STRUCTURED_SUFFIXES = (".json", ".yaml", ".yml")
CODE_SUFFIXES = (".js", ".cjs", ".mjs", ".ts", ".py")
# How promptfoo splits an ``exec:`` command into words: quotes group, no shell.
_SCRIPT_PARTS = re.compile(r"""[^\s"']+|"([^"]*)"|'([^']*)'""")
# A code file, optionally naming the function to call in it (``agent.js:handler``).
_CODE_FILE = re.compile(r"\.(?:js|cjs|mjs|ts|py)(?::[^/\\]*)?$")


class _CoreSchemaLoader(yaml.SafeLoader):
    """YAML as promptfoo reads it (js-yaml, the YAML 1.2 core schema): only ``true`` and
    ``false`` are booleans, so ``body: Yes`` or ``answer: no`` stay the text written, where
    PyYAML's YAML 1.1 would read True and False."""


_CoreSchemaLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_CoreSchemaLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def read_yaml(text: str) -> Any:
    """A YAML document's value, scalars as promptfoo reads them (see _CoreSchemaLoader)."""
    return yaml.load(text, Loader=_CoreSchemaLoader)  # noqa: S506  # a SafeLoader subclass


def load_config(path: Path) -> dict[str, Any]:
    """The config as a dict (YAML or JSON)."""
    if path.suffix in CODE_SUFFIXES:
        raise ImportFailed(
            f"{path} is code; Proctor imports promptfoo configs written in YAML or JSON."
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ImportFailed(f"{path} does not exist.") from None
    except IsADirectoryError:
        raise ImportFailed(f"{path} is a folder; give the promptfoo config file itself.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFailed(f"cannot read {path}: {exc}.") from None
    try:
        data = read_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "it is not valid YAML"
        raise ImportFailed(f"{path} is not valid YAML{where}: {problem}.") from None
    if not isinstance(data, dict):
        raise ImportFailed(
            f"{path} must hold a promptfoo config (a mapping with prompts, providers and tests), "
            f"not {_kind(data)}."
        )
    return data


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {"list": "a list", "str": "a single string"}.get(
        type(value).__name__, f"a {type(value).__name__}"
    )


def script_words(command: str) -> list[str]:
    """An ``exec:`` command's words as promptfoo passes them to the program (no shell)."""
    return [m.group(1) or m.group(2) or m.group(0) for m in _SCRIPT_PARTS.finditer(command)]


def is_reference(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and value.startswith(FILE_PREFIX)


def is_code_reference(value: Any) -> TypeGuard[str]:
    """``file://x.py``, ``file://providers/agent.js:handler`` and the like: code to run."""
    return is_reference(value) and bool(_CODE_FILE.search(value))


class ConfigFiles:
    """The files a config refers to, resolved against its folder."""

    def __init__(self, config_path: Path) -> None:
        self.config_path = config_path
        self.base = config_path.resolve().parent

    def path(self, reference: str) -> Path:
        """The file a ``file://`` reference names (a ``:function`` suffix is not part of it)."""
        raw = reference.removeprefix(FILE_PREFIX)
        path = Path(raw)
        return path if path.is_absolute() else self.base / path

    def fail(self, what: str, reference: str, problem: str) -> ImportFailed:
        return ImportFailed(f"{self.config_path}: {what} {reference}: {problem}.")

    def text(self, what: str, reference: str) -> str:
        path = self.path(reference)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise self.fail(what, reference, f"{path} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise self.fail(what, reference, f"cannot read {path} ({exc})") from None

    def structured(self, what: str, reference: str) -> Any:
        """A JSON or YAML file's value."""
        text = self.text(what, reference)
        try:
            return json.loads(text) if self.path(reference).suffix == ".json" else read_yaml(text)
        except (ValueError, yaml.YAMLError):
            raise self.fail(
                what, reference, f"{self.path(reference)} is not valid JSON or YAML"
            ) from None

    def matching(self, what: str, reference: str) -> list[str]:
        """The references a glob pattern stands for (itself when it is no pattern)."""
        raw = reference.removeprefix(FILE_PREFIX)
        if not glob.has_magic(raw):
            return [reference]
        pattern = raw if Path(raw).is_absolute() else str(self.base / raw)
        found = sorted(glob.glob(pattern, recursive=True))
        if not found:
            raise self.fail(what, reference, "matches no file")
        return [FILE_PREFIX + path for path in found]

    def csv_rows(self, what: str, reference: str) -> list[dict[str, str]]:
        text = self.text(what, reference)
        try:
            return [dict(row) for row in csv.DictReader(io.StringIO(text, newline=""))]
        except csv.Error as exc:
            raise self.fail(
                what, reference, f"{self.path(reference)} is not valid CSV ({exc})"
            ) from None
