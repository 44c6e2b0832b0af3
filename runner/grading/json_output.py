"""``is-json`` and ``contains-json``: the output is JSON, or holds a JSON object or array
somewhere in its text, optionally matching a JSON schema (the assertion's value), as promptfoo
reads them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


def json_verdict(kind: str, schema: Mapping[str, Any] | None, output: str) -> tuple[bool, str]:
    if kind == "is-json":
        try:
            candidates = [json.loads(output)]
        except json.JSONDecodeError as exc:
            return False, f"the output is not JSON ({exc.msg})"
        found = "the output is JSON"
    else:
        candidates = list(json_values_in(output))
        if not candidates:
            return False, "the output holds no JSON object or array"
        found = f"the output holds {len(candidates)} JSON value(s)"
    if schema is None:
        return True, found
    problems = [schema_problem(schema, candidate) for candidate in candidates]
    if any(problem is None for problem in problems):
        return True, f"{found} matching the schema"
    return False, f"{found}, none matching the schema: {problems[0]}"


def schema_problem(schema: Mapping[str, Any], value: Any) -> str | None:
    """Why ``value`` does not match ``schema`` (the first reason), or None when it does."""
    import jsonschema  # with the first schema checked

    error = jsonschema.exceptions.best_match(
        jsonschema.validators.validator_for(schema)(schema).iter_errors(value)
    )
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


def json_values_in(text: str) -> Iterator[Any]:
    """Each JSON object or array in ``text``, left to right; one inside another is not
    counted again."""
    decoder = json.JSONDecoder()
    position = 0
    while True:
        starts = [i for i in (text.find("{", position), text.find("[", position)) if i >= 0]
        if not starts:
            return
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        yield value
        position = end
