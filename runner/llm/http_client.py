"""Consulting an OpenAI-compatible Chat Completions endpoint over HTTP (httpx).

Rate limits (429), server errors (5xx) and failed or dropped connections are retried (tenacity)
with exponential backoff, honouring a ``Retry-After`` in seconds or as an HTTP date, capped. A
timeout is not retried: a model that needed the whole allowance once will likely need it again,
and each retry would add another full wait. Any other refusal (400, 401, 404, a redirect, ...)
fails at once with the server's own message.

One client per process keeps connections to the endpoint open between consultations, shared
by the threads of a pool (an httpx client may be). A forked child (a `proctor eval -j N`
worker, a Celery worker's child) makes its own on first use: the parent's sockets would carry
two processes' requests on one connection, and its pool's lock may have been held by another
thread at the fork.

httpx and tenacity are imported on the first consultation, not with this module: `proctor
eval` imports it on its way to any batch (planning resolves the endpoint), and a batch without
judges, a responder or a chat agent never consults a model.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from runner.llm import anthropic_messages
from runner.llm.completion import (
    DISPATCH_FAILED,
    DISPATCH_TIMED_OUT,
    Completion,
    LLMError,
    history_message,
)
from runner.llm.endpoints import API_ANTHROPIC, LLMConfig, scrub_key

if TYPE_CHECKING:
    import httpx
    import tenacity

CHAT_COMPLETIONS_PATH = "/chat/completions"
# Backoff before retry n (0-based) is BACKOFF_BASE_S * 2**n, capped, with jitter so many trials
# hitting one rate limit do not retry in lockstep.
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0
# The longest Retry-After honoured; a server asking for more gets this much.
RETRY_AFTER_CAP_S = 60.0
# How much of a server's error text goes into the failure's sentence.
SERVER_MESSAGE_CHARS = 300
# Idle connections kept open per process (httpx's default); how many are open at once is not
# limited, as a pool of N trial threads may consult together.
KEPT_OPEN = 20


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
    max_tokens: int | None = None,
    response_format: Mapping[str, Any] | None = None,
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
    if max_tokens:
        body["max_tokens"] = max_tokens
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    elif response_format:
        body["response_format"] = dict(response_format)
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
    max_tokens: int | None = None,
    response_format: Mapping[str, Any] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Completion:
    """POST the messages and return the assistant's answer (its text, or the tools it calls
    when ``tools`` were offered in OpenAI's function format). Blocks for up to ``timeout_s``
    per attempt plus backoff between attempts; the first call in a process imports httpx.
    An endpoint whose ``api`` is Anthropic's is spoken to in its Messages format
    (runner.llm.anthropic_messages); the messages and the answer keep OpenAI's shape."""
    import tenacity  # off `proctor eval`'s start-up path (see the module docstring)

    assert config.base_url, "complete_http needs a base URL"
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": "proctor",
    }
    asked: dict[str, Any] = {
        "json_mode": json_mode,
        "tools": tools,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    parse: Callable[..., Completion] = _completion_from
    if config.api == API_ANTHROPIC:
        url = anthropic_messages.messages_url(config.base_url)
        body = anthropic_messages.request_body(config, messages, **asked)
        headers.update(anthropic_messages.headers(config))
        parse = anthropic_messages.completion_from
    else:
        url = chat_completions_url(config.base_url)
        body = request_body(config, messages, **asked, response_format=response_format)
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
    payload = json.dumps(body).encode()
    attempts = max(0, config.max_retries) + 1
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        wait=_delay_before_retry,
        retry=tenacity.retry_if_exception_type(_Retryable),
        sleep=sleep,
        reraise=True,
    )
    started = time.monotonic()
    try:
        raw = retrying(_post_once, url, payload, headers, config)
    except _Retryable as failure:
        tried = f" (tried {attempts} times)" if attempts > 1 else ""
        raise LLMError(
            DISPATCH_FAILED, scrub_key(failure.message + tried, config.api_key)
        ) from None
    return parse(raw, config, duration_ms=int((time.monotonic() - started) * 1000))


def _post_once(url: str, payload: bytes, headers: dict[str, str], config: LLMConfig) -> str:
    """One attempt: the response body of a 2xx, or an exception saying what went wrong."""
    import httpx  # on the first consultation (see the module docstring)

    deadline = time.monotonic() + config.timeout_s
    try:
        with _client().stream(
            "POST", url, content=payload, headers=headers, timeout=config.timeout_s
        ) as response:
            if response.is_success:
                return _read_until(response, deadline, config)
            try:
                body = response.read().decode("utf-8", errors="replace")
            except httpx.TransportError:  # a refusal cut short still has its status to tell
                body = ""
    except httpx.TimeoutException:
        raise _timed_out(config) from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as error:
        # Asking again cannot help (a base URL without http://, say).
        raise LLMError(
            DISPATCH_FAILED, f"cannot send to the model endpoint at {url}: {_reason(error)}"
        ) from None
    except (httpx.ConnectError, httpx.ProxyError) as error:
        raise _Retryable(f"could not reach the model endpoint at {url}: {_reason(error)}") from None
    except httpx.TransportError as error:
        # A reset or half-closed connection (ReadError, RemoteProtocolError, TLS errors).
        raise _Retryable(
            f"the connection to the model endpoint at {url} broke: {_reason(error)}"
        ) from None
    raise _refusal(response, body, config)


def _client() -> httpx.Client:
    """This process's client, made on first use (see the module docstring)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            import ssl  # with httpx, on the first consultation
            from http.cookiejar import CookieJar, DefaultCookiePolicy

            import httpx

            _shared = httpx.Client(
                # The system's certificates, as urllib used: an endpoint signed by a company CA
                # installed on the machine stays trusted (httpx's default is certifi's bundle).
                verify=ssl.create_default_context(),
                # No cookies kept: a gateway's cookie set for one trial must not ride on another's.
                cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=KEPT_OPEN),
            )
        return _shared


_shared: httpx.Client | None = None
_shared_lock = threading.Lock()


def _forget_in_child() -> None:
    """A forked child makes a client of its own; the parent's is dropped, not closed, as
    closing takes a lock another thread may have held at the fork."""
    global _shared, _shared_lock
    _shared, _shared_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def _read_until(response: httpx.Response, deadline: float, config: LLMConfig) -> str:
    """The whole body, read as it arrives so a server trickling bytes cannot outlast the
    timeout (with a chunk size, httpx would gather a chunk's worth before the check)."""
    chunks: list[bytes] = []
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise _timed_out(config)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _refusal(response: httpx.Response, body: str, config: LLMConfig) -> Exception:
    """The failure a non-2xx answer stands for: retryable for 429 and 5xx, final otherwise."""
    status = response.status_code
    retry_after = _retry_after_s(response.headers.get("Retry-After"))
    location = response.headers.get("Location")
    if 300 <= status < 400 and location:
        # Not followed: a redirected POST becomes a GET (301-303) the endpoint cannot answer.
        body = f"it redirects to {location}; point the base URL there"
    message = scrub_key(_server_message(body), config.api_key)
    if status == 429:
        return _Retryable(
            f"the model endpoint kept rate-limiting the request (HTTP 429): {message}",
            retry_after,
        )
    if status >= 500:
        return _Retryable(f"the model endpoint failed (HTTP {status}): {message}", retry_after)
    return LLMError(
        DISPATCH_FAILED, f"the model endpoint refused the request (HTTP {status}): {message}"
    )


def _timed_out(config: LLMConfig) -> LLMError:
    return LLMError(
        DISPATCH_TIMED_OUT,
        f"the model endpoint at {config.base_url} did not answer within {config.timeout_s:g}s",
    )


def _reason(error: BaseException) -> str:
    """The operating system's words when an OSError lies under httpx's (``Connection
    refused``), else httpx's own sentence."""
    cause: BaseException | None = error
    for _ in range(5):
        if cause is None:
            break
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__ or cause.__context__
    return str(error) or type(error).__name__


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
    """Retry-After in seconds from now, given as seconds or as an HTTP date, capped; None when
    absent or unreadable (the backoff decides)."""
    if not header:
        return None
    try:
        seconds = float(header)
    except ValueError:
        from datetime import UTC  # a rare form: loaded when it comes
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return None
        # An HTTP date is in GMT, even in the asctime form that names no zone.
        seconds = when.replace(tzinfo=when.tzinfo or UTC).timestamp() - time.time()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def _delay_before_retry(state: tenacity.RetryCallState) -> float:
    """The server's Retry-After when it gave one, else the backoff for this attempt."""
    failure = state.outcome.exception() if state.outcome else None
    if isinstance(failure, _Retryable) and failure.retry_after_s is not None:
        return failure.retry_after_s
    backoff = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (state.attempt_number - 1))
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
        message=history_message(text, tool_calls),
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
