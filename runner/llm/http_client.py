"""Consulting an OpenAI-compatible Chat Completions endpoint over plain HTTP.

Rate limits (429), server errors (5xx) and dropped connections are retried with exponential
backoff, honouring a ``Retry-After`` given in seconds. A timeout is not retried: a model that
needed the whole allowance once will likely need it again, and each retry would add another
full wait. Any other refusal (400, 401, 404, ...) fails at once with the server's own message.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.llm.completion import DISPATCH_FAILED, DISPATCH_TIMED_OUT, Completion, LLMError
from runner.llm.endpoints import LLMConfig, scrub_key

CHAT_COMPLETIONS_PATH = "/chat/completions"
# Backoff before retry n (0-based) is BACKOFF_BASE_S * 2**n, capped, with jitter so many trials
# hitting one rate limit do not retry in lockstep.
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0
# The longest Retry-After honoured; a server asking for more gets this much.
RETRY_AFTER_CAP_S = 60.0
# How much of a server's error text goes into the failure's sentence.
SERVER_MESSAGE_CHARS = 300
READ_CHUNK_BYTES = 64 * 1024


class _Retryable(Exception):
    """One attempt failed in a way worth trying again."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


def chat_completions_url(base_url: str) -> str:
    return base_url.rstrip("/") + CHAT_COMPLETIONS_PATH


def request_body(
    config: LLMConfig,
    messages: list[dict[str, Any]],
    *,
    json_mode: bool,
    tools: Sequence[Mapping[str, Any]] | None = None,
    temperature: float | None = None,
) -> dict[str, Any]:
    # Consultations (judges, the responder) ask for temperature 0 so a verdict is repeatable;
    # a chat agent under test may ask for the temperature it runs with in production.
    body: dict[str, Any] = {
        "messages": messages,
        "temperature": 0 if temperature is None else temperature,
    }
    # Without a model the request still goes out: some single-model servers ignore the field,
    # and those that need it answer with their own sentence saying so.
    if config.model:
        body = {"model": config.model, **body}
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    if tools:
        body["tools"] = [dict(spec) for spec in tools]
        body["tool_choice"] = "auto"
    return body


def complete_http(
    config: LLMConfig,
    messages: list[dict[str, Any]],
    *,
    json_mode: bool = False,
    tools: Sequence[Mapping[str, Any]] | None = None,
    temperature: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Completion:
    """POST the messages and return the assistant's answer (its text, or the tools it calls
    when ``tools`` were offered in OpenAI's function format). Blocks for up to ``timeout_s``
    per attempt plus backoff between attempts."""
    assert config.base_url, "complete_http needs a base URL"
    url = chat_completions_url(config.base_url)
    body = request_body(config, messages, json_mode=json_mode, tools=tools, temperature=temperature)
    payload = json.dumps(body).encode()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": "proctor",
    }
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    started = time.monotonic()
    attempts = max(0, config.max_retries) + 1
    for attempt in range(attempts):
        try:
            raw = _post_once(url, payload, headers, config)
        except _Retryable as failure:
            if attempt + 1 >= attempts:
                tried = f" (tried {attempts} times)" if attempts > 1 else ""
                raise LLMError(
                    DISPATCH_FAILED, scrub_key(failure.message + tried, config.api_key)
                ) from None
            sleep(_delay_before_retry(attempt, failure.retry_after_s))
            continue
        return _completion_from(raw, config, duration_ms=int((time.monotonic() - started) * 1000))
    raise AssertionError("unreachable: the loop returns or raises")


def _post_once(url: str, payload: bytes, headers: dict[str, str], config: LLMConfig) -> str:
    """One attempt: the response body of a 200, or an exception saying what went wrong."""
    request = urllib.request.Request(url, data=payload, headers=headers, method="POST")
    deadline = time.monotonic() + config.timeout_s
    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as response:
            return _read_until(response, deadline, config)
    except urllib.error.HTTPError as error:
        with error:
            status = error.code
            body = _read_error_body(error)
            retry_after = _retry_after_s(error.headers.get("Retry-After"))
        message = scrub_key(_server_message(body), config.api_key)
        if status == 429:
            raise _Retryable(
                f"the model endpoint kept rate-limiting the request (HTTP 429): {message}",
                retry_after,
            ) from None
        if status >= 500:
            raise _Retryable(
                f"the model endpoint failed (HTTP {status}): {message}", retry_after
            ) from None
        raise LLMError(
            DISPATCH_FAILED, f"the model endpoint refused the request (HTTP {status}): {message}"
        ) from None
    except TimeoutError:
        raise _timed_out(config) from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, TimeoutError):
            raise _timed_out(config) from None
        raise _Retryable(
            f"could not reach the model endpoint at {url}: {_reason(error.reason)}"
        ) from None
    except (http.client.HTTPException, OSError) as error:
        # A reset or half-closed connection (ConnectionError, RemoteDisconnected, TLS errors).
        raise _Retryable(
            f"the connection to the model endpoint at {url} broke: {_reason(error)}"
        ) from None


def _read_until(response: Any, deadline: float, config: LLMConfig) -> str:
    """The whole body, read in chunks so a server trickling bytes cannot outlast the timeout."""
    chunks: list[bytes] = []
    while chunk := response.read(READ_CHUNK_BYTES):
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise _timed_out(config)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _read_error_body(error: urllib.error.HTTPError) -> str:
    try:
        return error.read().decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException):
        return ""


def _timed_out(config: LLMConfig) -> LLMError:
    return LLMError(
        DISPATCH_TIMED_OUT,
        f"the model endpoint at {config.base_url} did not answer within {config.timeout_s:g}s",
    )


def _reason(reason: object) -> str:
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def _server_message(body: str) -> str:
    """The sentence a server put in its error body: OpenAI's ``{"error": {"message"}}``, a few
    common variants, or the start of the body as text."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _clip(error["message"])
        if isinstance(error, str):
            return _clip(error)
        if isinstance(data.get("message"), str):
            return _clip(data["message"])
    text = body.strip()
    return _clip(text) if text else "no error message"


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SERVER_MESSAGE_CHARS else text[: SERVER_MESSAGE_CHARS - 1] + "…"


def _retry_after_s(header: str | None) -> float | None:
    """Retry-After in seconds; the HTTP-date form is rare from model APIs and falls back to
    the backoff."""
    if not header:
        return None
    try:
        seconds = float(header.strip())
    except ValueError:
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def _delay_before_retry(attempt: int, retry_after_s: float | None) -> float:
    if retry_after_s is not None:
        return retry_after_s
    backoff = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt)
    return backoff * random.uniform(0.5, 1.0)


def _completion_from(raw: str, config: LLMConfig, *, duration_ms: int) -> Completion:
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise LLMError(
            DISPATCH_FAILED,
            f"the model endpoint answered with something other than a JSON object: {_clip(raw)[:200]!r}",
        )
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        detail = _server_message(raw) if "error" in data else "no choices in its answer"
        raise LLMError(
            DISPATCH_FAILED,
            scrub_key(f"the model endpoint gave no answer: {detail}", config.api_key),
        )
    message = choices[0].get("message") or {}
    text = _content_text(message)
    tool_calls = _tool_calls(message)
    return Completion(
        text=text,
        raw=raw,
        model=str(data.get("model") or config.model or ""),
        usage=_usage(data.get("usage")),
        duration_ms=duration_ms,
        tool_calls=tool_calls,
        message=_history_message(text, tool_calls),
    )


def _tool_calls(message: Any) -> list[dict[str, str]]:
    """The function calls of an assistant message as ``{"id", "name", "arguments"}``.

    Arguments stay the JSON text the model wrote; a server that sends them as an object gets
    them written as JSON. A call without an id gets one, since each tool result must name the
    call it answers.
    """
    if not isinstance(message, dict) or not isinstance(message.get("tool_calls"), list):
        return []
    calls = []
    for position, call in enumerate(message["tool_calls"]):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = call.get("id")
        calls.append(
            {
                "id": call_id if isinstance(call_id, str) and call_id else f"call_{position}",
                "name": function["name"],
                "arguments": arguments,
            }
        )
    return calls


def _history_message(text: str, tool_calls: list[dict[str, str]]) -> dict[str, Any]:
    """The assistant message to send back on the next call: only the fields every
    OpenAI-compatible server accepts (some refuse the extras a response carries, such as
    ``refusal`` or ``annotations``)."""
    if not tool_calls:
        return {"role": "assistant", "content": text}
    return {
        "role": "assistant",
        # OpenAI sends null content with tool calls; some servers refuse an empty string.
        "content": text or None,
        "tool_calls": [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in tool_calls
        ],
    }


def _content_text(message: Any) -> str:
    """The assistant's text: a string, or the text parts of a list of content parts; a refusal
    stands in for missing content so the caller sees what the model said."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    refusal = message.get("refusal")
    return refusal if isinstance(refusal, str) else ""


def _usage(usage: Any) -> dict[str, int]:
    """Token counts under the names the transcript uses."""
    if not isinstance(usage, dict):
        return {}
    names = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens"}
    return {
        ours: int(usage[theirs])
        for theirs, ours in names.items()
        if isinstance(usage.get(theirs), int)
    }
