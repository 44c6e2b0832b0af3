"""Redaction: secrets never reach logs, the terminal or stored evidence."""

from __future__ import annotations

import base64
import json
import urllib.parse

import pytest

from runner.core.redaction import Redactor, secret_values

# Built from pieces so this file itself never holds a whole key-shaped string.
OPENAI_KEY = "sk-" + "proj-" + "Xy7" * 10
ANTHROPIC_KEY = "sk-" + "ant-api03-" + "Q9z" * 10
GITHUB_TOKEN = "ghp" + "_" + "A1b2C3d4" * 5
GITHUB_OAUTH = "gho" + "_" + "Z9y8X7w6" * 5
GITHUB_PAT = "github" + "_pat_" + "11ABCDEFG0" + "_xYz" * 6
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
SLACK_TOKEN = "xoxb" + "-1234567890-0987654321-" + "aBcDeFgHiJ"
GOOGLE_KEY = "AIza" + "SyD-" + "abc123XYZ_" * 4


@pytest.mark.parametrize(
    "key",
    [
        OPENAI_KEY,
        ANTHROPIC_KEY,
        GITHUB_TOKEN,
        GITHUB_OAUTH,
        GITHUB_PAT,
        AWS_KEY,
        SLACK_TOKEN,
        GOOGLE_KEY,
    ],
    ids=["openai", "anthropic", "github", "github-oauth", "github-pat", "aws", "slack", "google"],
)
def test_it_hides_keys_by_their_shape(key):
    text = f"calling the API with {key} now"

    assert Redactor().redact(text) == "calling the API with [redacted] now"


def test_it_hides_a_bearer_token_but_keeps_the_header():
    text = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.signature"

    assert Redactor().redact(text) == "Authorization: Bearer [redacted]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("OPENAI_API_KEY=abcd1234efgh", "OPENAI_API_KEY=[redacted]"),
        ("db password: correct-horse-battery", "db password: [redacted]"),
        ('{"access_token": "tok_98765432"}', '{"access_token": "[redacted]"}'),
        ("X-Api-Key: 0123456789abcdef", "X-Api-Key: [redacted]"),
        ("client_secret = s3cr3t-value!", "client_secret = [redacted]"),
    ],
)
def test_it_hides_the_value_of_a_named_credential_and_keeps_its_name(text, expected):
    assert Redactor().redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "listening on http://localhost:4173",
        "token: short",
        "monkey: bananasplit",
        "the task-force-planning-meeting-notes are in docs/",
        "install scikit-learn and sk-learn-compatible-estimators",
        "3 passed, 0 failed in 1.42s",
    ],
)
def test_it_leaves_ordinary_text_alone(text):
    assert Redactor(["hunter22"]).redact(text) == text


def test_it_hides_every_occurrence_of_a_known_secret():
    redactor = Redactor(["prep-4f9a"])

    redacted = redactor.redact("created prep-4f9a; export KEY_ID=prep-4f9a")

    assert redacted == "created [redacted]; export KEY_ID=[redacted]"


def test_it_hides_the_longer_of_two_secrets_whole():
    redactor = Redactor(["abcd", "abcdefgh"])

    assert redactor.redact("value abcdefgh end") == "value [redacted] end"


def test_it_hides_overlapping_secrets_without_leaving_a_piece():
    redactor = Redactor(["alpha-beta", "beta-gamma"])

    assert redactor.redact("x alpha-beta-gamma y") == "x [redacted] y"


def test_it_ignores_secrets_shorter_than_four_characters():
    redactor = Redactor(["abc", "", "on"])

    assert redactor.redact("abc on") == "abc on"


def test_it_hides_a_secret_inside_json_text():
    secret = 'pa"ss\\w\u00e9rd'
    redactor = Redactor([secret])

    for encoded in (json.dumps({"key": secret}), json.dumps({"key": secret}, ensure_ascii=False)):
        redacted = redactor.redact(encoded)
        assert redacted == '{"key": "[redacted]"}'


def test_it_redacts_every_string_in_a_nested_object():
    redactor = Redactor(["s3cret-token"])
    event = {
        "s3cret-token": ["echo s3cret-token", ("ok", {"note": f"used {GITHUB_TOKEN}"})],
        "exit": 0,
        "ok": True,
    }

    redacted = redactor.redact_obj(event)

    assert redacted == {
        "s3cret-token": ["echo [redacted]", ("ok", {"note": "used [redacted]"})],
        "exit": 0,
        "ok": True,
    }
    assert event["s3cret-token"][0] == "echo s3cret-token"


def test_with_secrets_adds_to_a_new_redactor():
    base = Redactor(["first-secret"])

    more = base.with_secrets(["second-secret"])

    assert more.redact("first-secret second-secret") == "[redacted] [redacted]"
    assert base.redact("first-secret second-secret") == "[redacted] second-secret"


def test_secret_values_finds_long_strings_and_numbers_at_any_depth():
    prepared = {
        "port": 4173,
        "api": {"key": "test-key-123", "ids": [987654321, "ab"]},
        "user": ("alice", 3.14159265),
        "debug": True,
        "retries": 3,
    }

    assert secret_values(prepared) == ["test-key-123", "987654321", "alice", "3.14159265"]


def test_secret_values_of_a_plain_string():
    assert secret_values("only-one-secret") == ["only-one-secret"]
    assert secret_values("abc") == []


def test_prepared_secrets_are_hidden_but_a_port_stays_visible():
    prepared = {"port": 4173, "token": 20240611}
    redactor = Redactor(secret_values(prepared))

    assert redactor.redact("server 4173 with id 20240611") == "server 4173 with id [redacted]"


PREPARED = {"api": {"token": "tok/3n+with spaces&\u00e9=42!"}}
PREPARED_SECRET = PREPARED["api"]["token"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


ENCODINGS = {
    "quote": lambda s: urllib.parse.quote(s),
    "quote-no-safe": lambda s: urllib.parse.quote(s, safe=""),
    "quote-lowercase": lambda s: urllib.parse.quote(s, safe="").lower(),
    "quote_plus": lambda s: urllib.parse.quote_plus(s),
    "encodeURIComponent": lambda s: urllib.parse.quote(s, safe="!*'()"),
    "base64": lambda s: _b64(s.encode()),
    "base64-unpadded": lambda s: _b64(s.encode()).rstrip("="),
    "base64-urlsafe": lambda s: _b64url(s.encode()),
    "base64-urlsafe-unpadded": lambda s: _b64url(s.encode()).rstrip("="),
    "json": lambda s: json.dumps(s)[1:-1],
    "json-slash-escaped": lambda s: json.dumps(s)[1:-1].replace("/", "\\/"),
    "json-in-json": lambda s: json.dumps(json.dumps(s)[1:-1])[1:-1],
}


@pytest.mark.parametrize("encode", list(ENCODINGS.values()), ids=list(ENCODINGS))
def test_it_hides_an_encoded_prepare_secret(encode):
    encoded = encode(PREPARED_SECRET)
    redactor = Redactor(secret_values(PREPARED))

    redacted = redactor.redact(f"curl https://example.test/?t={encoded} -> ok")

    assert redacted == "curl https://example.test/?t=[redacted] -> ok"


@pytest.mark.parametrize("prefix", ["", "a", "ab", "Authorization: "])
@pytest.mark.parametrize("encode", [_b64, _b64url], ids=["standard", "urlsafe"])
def test_it_hides_a_prepare_secret_inside_a_longer_base64_text(encode, prefix):
    blob = encode(f"{prefix}{PREPARED_SECRET} and more".encode())
    redactor = Redactor(secret_values(PREPARED))

    redacted = redactor.redact(blob)

    assert "[redacted]" in redacted
    leftover = "".join(part for part in redacted.split("[redacted]"))
    assert len(leftover) < len(blob) - len(PREPARED_SECRET)


def test_it_leaves_other_base64_text_alone():
    redactor = Redactor(["a-prepared-secret"])
    blob = _b64(bytes(range(256)) * 4)

    assert redactor.redact(blob) == blob


@pytest.mark.parametrize(
    "text",
    [
        "echo worker-secret=${X:-absent}",
        "export API_KEY=$OPENAI_API_KEY_FROM_VAULT",
        'password: "{{ vault_password }}"',
        "token=<paste-your-token-here>",
    ],
)
def test_a_reference_to_a_secret_is_stored_as_it_ran(text):
    # Words that merely look like key names, with a variable or a placeholder as the value:
    # no secret value is in them, so nothing is hidden (issue 14, item 9).
    assert Redactor().redact(text) == text


def test_a_reference_holding_a_known_secret_is_still_hidden():
    redactor = Redactor(["hunter2-hunter2"])
    assert (
        redactor.redact("echo worker-secret=${X:-hunter2-hunter2}")
        == "echo worker-secret=${X:-[redacted]}"
    )


def test_an_event_from_a_clean_line_is_kept_and_a_secret_in_an_escaped_line_is_not():
    from proctor.agent_events import AgentEvent
    from proctor.protocol import parse_line
    from runner.core.reporting import MemoryRecorder, RedactingRecorder

    inner = MemoryRecorder()
    recorder = RedactingRecorder(inner, Redactor(["s3cret-value"]))
    clean = '{"_tag":"Message","role":"assistant","text":"echo worker-secret=${X:-absent}"}'
    # The secret spelled with a JSON escape: the raw line does not hold it as written.
    escaped = '{"_tag":"Message","role":"assistant","text":"token s3cr\\u0065t-value"}'
    for line in (clean, escaped):
        recorder.raw_line("stdout", line)
        event = parse_line(line)
        assert event is not None
        recorder.event(0, event)
    # An event whose text the harness made up is redacted field by field too.
    recorder.raw_line("stdout", clean)
    recorder.event(0, AgentEvent("Log", {"stream": "proctor", "text": "s3cret-value"}))

    texts = [event.data["text"] for _, event in inner.events]
    assert texts == ["echo worker-secret=${X:-absent}", "token [redacted]", "[redacted]"]
    assert "s3cret-value" not in inner.everything_said()
