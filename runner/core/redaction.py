"""Redaction: keeping secrets out of everything Proctor stores or prints.

Two sources of secrets: the values a case's prepare returned (a test API key it created) are
known exactly and removed wherever they appear; anything else that merely looks like a
credential (a provider key, a bearer token, ``password=...``) is removed by its shape.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"

# Shorter values are too likely to be ordinary words or numbers to remove everywhere.
MIN_SECRET_LENGTH = 4
# A number returned by prepare is a secret only when it is long enough to be a token:
# a port (4173) or a count stays readable.
MIN_NUMERIC_SECRET_LENGTH = 6
# A piece of a longer base64 text is matched only from this many characters (48 bits), so
# ordinary base64 is never cut by chance.
MIN_BASE64_CORE_LENGTH = 8

# Each pattern either matches the credential itself or marks it with a group named "value";
# text around that group (a header name, "Bearer ") stays, so the log still says what it was.
_KEY_SHAPES = [
    # OpenAI and Anthropic (sk-..., sk-proj-..., sk-ant-...): random text holding a digit.
    r"\bsk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}",
    # GitHub personal, OAuth, app and refresh tokens; fine-grained tokens.
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    # AWS access key ids.
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    # Slack bot, user, app and workspace tokens.
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    # Google API keys.
    r"\bAIza[0-9A-Za-z_-]{30,}",
    # PEM private keys, whole.
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    # Authorization: Bearer <token>
    r"(?i:\bbearer)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})",
    # api_key=..., "token": "...", X-Api-Key: ..., DB_PASSWORD=... (quotes may be JSON-escaped)
    # A value that is a reference rather than a credential stays as written: a shell expansion
    # (`worker-secret=${X:-absent}`), a template (`{{ token }}`, `<your key>`).
    r"(?i:\b(?:[a-z0-9]+[_.-]){0,6}(?:api[_-]?key|key|token|secret|password|passwd))\b"
    r"[\\\"']*\s*[:=]\s*[\\\"']*(?P<value>(?![$<{])[^\s\"'\\]{8,})",
]
_KEY_PATTERNS = [re.compile(shape) for shape in _KEY_SHAPES]
# What text must hold for each shape to match: for the shapes that match case, one of these
# literals as written (``gh`` for GitHub's five gh?_ kinds); for bearer, "bearer" in the
# case-folded text; for the last shape, what _may_hold_key_value finds. A shape is scanned for
# only in text that holds its hint: the scans were most of the cost of reading an agent's
# output, and plain output holds no hint at all.
_CASED_SHAPES = _KEY_PATTERNS[:7]
_CASED_SHAPE_HINTS: tuple[tuple[str, ...], ...] = (
    ("sk-",),
    ("gh",),
    ("github_pat_",),
    ("AKIA", "ASIA"),
    ("xox",),
    ("AIza",),
    ("-----BEGIN ",),
)
_BEARER = _KEY_PATTERNS[7]
# The last shape tries its prefix at every word of a text: a whole conversation.json holding
# "input_tokens" took most of a second. It is scanned for only where, in the case-folded text,
# one of its keywords is followed by a separator and a value's first 8 characters (any match
# holds that; folding never turns a separator, a space or a quote into something else).
_GENERIC_KEY = _KEY_PATTERNS[-1]
_KEYWORDS = ("key", "token", "secret", "password", "passwd")
_AFTER_KEYWORD = re.compile(r"\b[\\\"']*\s*[:=]\s*[\\\"']*(?![$<{])[^\s\"'\\]{8}")
# A line (up to this long) holding no hint at all is let go after one pass over all of them,
# done in C; a longer text (an artifact) nearly always holds one, and is not given that pass.
HINTED_TEXT_CHARS = 4096
_ANY_CASED_HINT = tuple(hint for hints in _CASED_SHAPE_HINTS for hint in hints)
_ANY_FOLDED_HINT = ("bearer", "key", "token", "secret", "passw")


def _may_hold_key_value(folded: str) -> bool:
    for keyword in _KEYWORDS:
        start = folded.find(keyword)
        while start != -1:
            if _AFTER_KEYWORD.match(folded, start + len(keyword)):
                return True
            start = folded.find(keyword, start + 1)
    return False


@functools.lru_cache(maxsize=256)
def _forms_of(secrets: tuple[str, ...]) -> tuple[tuple[str, ...], re.Pattern[str] | None]:
    """The encoded forms of ``secrets``, longest first, and one pattern that finds any of them.
    Every trial of a worker starts with the same secrets (its environment's, the harness's),
    so they are worked out once."""
    forms: set[str] = set()
    for secret in secrets:
        forms.update(encoded_forms(secret))
    ordered = tuple(sorted(forms, key=lambda s: (-len(s), s)))
    # One pass over the text says whether any form is in it at all (most lines hold none);
    # only then is each form's every occurrence found, overlaps included.
    any_form = re.compile("|".join(re.escape(form) for form in ordered)) if ordered else None
    return ordered, any_form


class Redactor:
    """Replaces known secrets and key-shaped text with ``[redacted]``."""

    def __init__(self, secrets: Iterable[str] = ()):
        kept = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
        self._secrets = tuple(sorted(kept, key=lambda s: (-len(s), s)))
        self._forms, self._any_form = _forms_of(self._secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets

    def with_secrets(self, values: Iterable[str]) -> Redactor:
        """A new redactor that also removes ``values``; this one is left as it was."""
        return Redactor([*self._secrets, *values])

    def redact(self, text: str) -> str:
        """``text`` with every secret and key-shaped value replaced by ``[redacted]``.

        All spans to hide are found in the original text first and merged, so overlapping
        secrets are hidden whole and no leftover piece of one survives the other's removal.
        """
        if not text:
            return text
        spans: list[tuple[int, int]] = []
        if self._any_form is not None and self._any_form.search(text):
            for form in self._forms:
                start = text.find(form)
                while start != -1:
                    spans.append((start, start + len(form)))
                    start = text.find(form, start + 1)
        spans.extend(_shape_spans(text))
        if not spans:
            return text
        return _replace_spans(text, spans)

    def redact_obj(self, obj: Any) -> Any:
        """A copy of ``obj`` with every string inside dicts, lists and tuples redacted; dict
        keys and non-string values are kept as they are."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {key: self.redact_obj(value) for key, value in obj.items()}
        if isinstance(obj, list):
            return [self.redact_obj(value) for value in obj]
        if isinstance(obj, tuple):
            return tuple(self.redact_obj(value) for value in obj)
        return obj


def _shape_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds a key-shaped value, each shape scanned for only where its hint is."""
    spans: list[tuple[int, int]] = []
    if len(text) <= HINTED_TEXT_CHARS and not any(map(text.__contains__, _ANY_CASED_HINT)):
        folded = text.casefold()  # as re.IGNORECASE folds: ſ is s, K is k
        if not any(map(folded.__contains__, _ANY_FOLDED_HINT)):
            return spans
    else:
        for pattern, hints in zip(_CASED_SHAPES, _CASED_SHAPE_HINTS, strict=True):
            for hint in hints:  # plain loops, not any(): the hints are few
                if hint in text:
                    spans.extend(match.span() for match in pattern.finditer(text))
                    break
        folded = text.casefold()
    if "bearer" in folded:
        spans.extend(match.span("value") for match in _BEARER.finditer(text))
    if _may_hold_key_value(folded):
        spans.extend(match.span("value") for match in _GENERIC_KEY.finditer(text))
    return spans


def encoded_forms(secret: str) -> set[str]:
    """``secret`` and the ways an agent or a tool commonly re-encodes it: JSON-escaped (also
    twice, and with ``\\/``), percent-encoded (Python's quote and quote_plus, JavaScript's
    encodeURIComponent, upper- and lower-case hex) and base64 (standard and URL-safe, with and
    without padding, and the part that stays the same wherever the secret sits inside a longer
    base64 text)."""
    forms = {secret}
    # A secret inside JSON text (a logged payload, an event line) appears escaped.
    for ensure_ascii in (True, False):
        escaped = json.dumps(secret, ensure_ascii=ensure_ascii)[1:-1]
        forms.update((escaped, escaped.replace("/", "\\/"), json.dumps(escaped)[1:-1]))
    for safe in ("", "/", "!*'()"):
        forms.add(urllib.parse.quote(secret, safe=safe, errors="surrogatepass"))
    forms.add(urllib.parse.quote_plus(secret, errors="surrogatepass"))
    forms.update(re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), form) for form in set(forms))
    raw = secret.encode("utf-8", "surrogatepass")
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        forms.update((whole, whole.rstrip("=")))
        # Inside a longer text the secret starts at any of 3 byte offsets of a base64 group;
        # the characters made only of the secret's bits are the same whatever surrounds it.
        for offset in range(3):
            text = encode(b"\0" * offset + raw).decode("ascii")
            core = text[-(-8 * offset // 6) : (8 * (offset + len(raw))) // 6]
            if len(core) >= MIN_BASE64_CORE_LENGTH:
                forms.add(core)
    return forms


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    pieces: list[str] = []
    position = 0
    for start, stop in merged:
        pieces.append(text[position:start])
        pieces.append(REDACTED)
        position = stop
    pieces.append(text[position:])
    return "".join(pieces)


def secret_values(obj: Any) -> list[str]:
    """The values in what prepare returned that must never be shown: every string of 4+
    characters and every number whose text has 6+, found at any depth. Dict keys are names,
    not secrets, and are not returned."""
    found: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, str):
            if len(value) >= MIN_SECRET_LENGTH:
                found.append(value)
        elif isinstance(value, bool):
            return
        elif isinstance(value, int | float):
            if len(str(value)) >= MIN_NUMERIC_SECRET_LENGTH:
                found.append(str(value))
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, list | tuple):
            for item in value:
                collect(item)

    collect(obj)
    return list(dict.fromkeys(found))
