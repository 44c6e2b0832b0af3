"""Markdown written by an agent (plan.md), rendered to HTML that cannot run anything.

Two layers, because the text is untrusted: markdown-it renders with raw HTML off (tags in the
source come out as text) and refuses ``javascript:`` and similar link targets; nh3 then keeps
only an allow-list of tags, attributes and URL schemes, so whatever slips past the first layer
is dropped by the second.
"""

from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_renderer = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
    ["table", "strikethrough"]
)

_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "del",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "strong",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
_ATTRIBUTES = {"a": {"href", "title"}, "th": {"style"}, "td": {"style"}, "ol": {"start"}}


def render_markdown(text: str) -> SafeString:
    """``text`` as sanitized HTML: links open nothing but http(s) and mail addresses."""
    html = _renderer.render(text)
    clean = nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )
    return mark_safe(clean)  # noqa: S308 - sanitized by nh3 just above
