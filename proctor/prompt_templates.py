"""Prompt templates: ``{{ name }}`` filled from a case's variables, and nothing else.

One pattern for the rules that check a suite's prompt (``proctor.rules``), the catalog that
fills it (``evals_app.resolution``) and the promptfoo importer that carries Nunjucks templates
over (``runner.importers.nunjucks``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

VARIABLE = re.compile(r"{{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*}}")


def variables_in(template: str) -> list[str]:
    """The names the template fills, each once, in the order they first appear."""
    return list(dict.fromkeys(VARIABLE.findall(template)))


def filled(
    template: str, variables: Mapping[str, Any], *, as_text: Callable[[Any], str] = str
) -> str:
    """``{{ name }}`` replaced by its value through ``as_text``; a name with no value stays as
    written (the rules name it)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        return as_text(variables[name]) if name in variables else match.group(0)

    return VARIABLE.sub(value, template)
