"""Server-side syntax highlighting with Pygments: one formatter, one stylesheet.

Pages embed the HTML these functions return; the colours come from ``static/pygments.css``,
which ``python -m dashboard.highlighting > static/pygments.css`` regenerates.
"""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import (
    BashLexer,
    DiffLexer,
    JavascriptLexer,
    JsonLexer,
    PythonLexer,
    TextLexer,
)

STYLE = "friendly"
CSS_CLASS = "highlight"

_LEXERS: dict[str, type[Lexer]] = {
    "python": PythonLexer,
    "javascript": JavascriptLexer,
    "shell": BashLexer,
    "diff": DiffLexer,
    "json": JsonLexer,
    "text": TextLexer,
}


def highlight_code(
    code: str, language: str = "python", *, first_line: int | None = None
) -> SafeString:
    """``code`` as highlighted HTML; with ``first_line`` the lines are numbered from it.

    Pygments escapes the text it is given, so untrusted code renders inert.
    """
    formatter = HtmlFormatter(
        cssclass=CSS_CLASS,
        linenos="inline" if first_line is not None else False,
        linenostart=first_line or 1,
        wrapcode=True,
    )
    lexer = _LEXERS.get(language, TextLexer)(stripnl=False, ensurenl=True)
    return mark_safe(highlight(code, lexer, formatter))  # noqa: S308 - Pygments escapes


def source_lines(text: str, start: int, end: int) -> str:
    """Lines ``start``..``end`` (1-based, inclusive) of ``text``."""
    lines = text.splitlines()
    return "\n".join(lines[max(start, 1) - 1 : max(end, start)])


def stylesheet() -> str:
    return HtmlFormatter(style=STYLE, cssclass=CSS_CLASS).get_style_defs(f".{CSS_CLASS}")


if __name__ == "__main__":
    print(stylesheet())
