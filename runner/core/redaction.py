"""Redaction: keeping secrets out of everything Proctor stores or prints.

Two sources of secrets: the values a case's prepare returned (a test API key it created) are
known exactly and removed wherever they appear; anything else that merely looks like a
credential (a provider key, a bearer token, ``password=...``) is removed by its shape.
"""

from __future__ import annotations

import base64
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
# For each shape, what text must hold for it to match: one of the first literals (as written:
# single characters are found fastest) and, case-folded, one of the second. A shape is scanned
# for only in text that passes: the scans are most of the cost of reading an agent's output
# (about 90 µs per 1 KB line for all of them), and plain output passes none.
_KEY_GATES: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
    (("-",), ("sk-",)),
    (("_",), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (("_",), ("github_pat_",)),
    (("A",), ("akia", "asia")),
    (("-",), ("xox",)),
    (("A",), ("aiza",)),
    (("-",), ("-----begin ",)),
    (("",), ("bearer",)),
    ((":", "="), ("key", "token", "secret", "passw")),
]
# The last shape tries its prefix at every word of a text: a whole conversation.json holding
# "input_tokens" took most of a second. It is scanned for only where, in the case-folded text,
# one of its keywords is followed by a separator and a value's first 8 characters (any match
# holds that; folding never turns a separator, a space or a quote into something else).
_GENERIC_KEY = _KEY_PATTERNS[-1]
_KEYWORDS = ("key", "token", "secret", "password", "passwd")
_AFTER_KEYWORD = re.compile(r"\b[\\\"']*\s*[:=]\s*[\\\"']*(?![$<{])[^\s\"'\\]{8}")


def _may_hold_key_value(folded: str) -> bool:
    for keyword in _KEYWORDS:
        start = folded.find(keyword)
        while start != -1:
            if _AFTER_KEYWORD.match(folded, start + len(keyword)):
                return True
            start = folded.find(keyword, start + 1)
    return False


class Redactor:
    """Replaces known secrets and key-shaped text with ``[redacted]``."""

    def __init__(self, secrets: Iterable[str] = ()):
        kept = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
        self._secrets = tuple(sorted(kept, key=lambda s: (-len(s), s)))
        forms: set[str] = set()
        for secret in self._secrets:
            forms.update(encoded_forms(secret))
        self._forms = tuple(sorted(forms, key=lambda s: (-len(s), s)))
        # One pass over the text says whether any form is in it at all (most lines hold none);
        # only then is each form's every occurrence found, overlaps included.
        self._any_form = (
            re.compile("|".join(re.escape(form) for form in self._forms)) if self._forms else None
        )

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
        folded = ""
        for pattern, (literals, folded_literals) in zip(_KEY_PATTERNS, _KEY_GATES, strict=True):
            # Plain loops, not any(): this runs for every line an agent prints.
            for literal in literals:
                if literal in text:
                    break
            else:
                continue
            folded = folded or text.casefold()  # as re.IGNORECASE folds: ſ is s, K is k
            for literal in folded_literals:
                if literal in folded:
                    break
            else:
                continue
            if pattern is _GENERIC_KEY and not _may_hold_key_value(folded):
                continue
            group = "value" if "value" in pattern.groupindex else 0
            spans.extend(match.span(group) for match in pattern.finditer(text))
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
