"""The part of promptfoo's Nunjucks templates that carries over: ``{{ name }}``.

Proctor's templates fill ``{{ name }}`` and nothing else, so filters (``{{ x | upper }}``),
tags (``{% if %}``) and comments (``{# #}``) are found here and reported as untranslated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from proctor.prompt_templates import VARIABLE, filled

_EXPRESSION = re.compile(r"{{.*?}}|{%.*?%}|{#.*?#}", re.DOTALL)


def unsupported_expressions(template: str) -> list[str]:
    """The template's expressions Proctor does not fill, as written."""
    return [
        m.group(0) for m in _EXPRESSION.finditer(template) if not VARIABLE.fullmatch(m.group(0))
    ]


def fill_variables(template: str, variables: Mapping[str, Any]) -> str:
    """``{{ name }}`` replaced by the variable's value as Nunjucks prints it; the rest stays."""
    return filled(template, variables, as_text=as_text)


def as_text(value: Any) -> str:
    """A variable as Nunjucks prints it: text as is, numbers and booleans plainly."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)
