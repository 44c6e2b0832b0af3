"""Embeddings from an OpenAI-compatible endpoint (``POST {base_url}/embeddings``), for the
``similar`` assertion. One request embeds every text it is given."""

from __future__ import annotations

import json
from collections.abc import Sequence

from runner.llm.completion import DISPATCH_FAILED, DISPATCH_TIMED_OUT, LLMError
from runner.llm.endpoints import KIND_HTTP, LLMConfig, scrub_key

EMBEDDINGS_PATH = "/embeddings"
# promptfoo's default embedding model for `similar`, used when the assertion names none.
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-large"


def embed(config: LLMConfig, texts: Sequence[str]) -> list[list[float]]:
    """One vector per text, in order; raises LLMError saying what went wrong."""
    import httpx  # on the first use, as the chat client does

    if config.kind != KIND_HTTP or not config.base_url:
        raise LLMError(
            DISPATCH_FAILED,
            "similar needs an HTTP model endpoint for embeddings (PROCTOR_LLM_BASE_URL)",
        )
    url = config.base_url.rstrip("/") + EMBEDDINGS_PATH
    headers = {"Content-Type": "application/json", "User-Agent": "proctor"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    body = {"model": config.model or DEFAULT_EMBEDDING_MODEL, "input": list(texts)}
    try:
        response = httpx.post(url, json=body, headers=headers, timeout=config.timeout_s)
    except httpx.TimeoutException:
        raise LLMError(
            DISPATCH_TIMED_OUT, f"no embeddings from {url} within {config.timeout_s:g} s"
        ) from None
    except httpx.HTTPError as error:
        raise LLMError(DISPATCH_FAILED, f"could not reach {url}: {error}") from None
    if not response.is_success:
        raise LLMError(
            DISPATCH_FAILED,
            scrub_key(
                f"{url} answered {response.status_code}: {response.text[:300]}", config.api_key
            ),
        )
    try:
        data = sorted(response.json()["data"], key=lambda item: item.get("index", 0))
        vectors = [[float(x) for x in item["embedding"]] for item in data]
    except (ValueError, KeyError, TypeError) as exc:
        raise LLMError(
            DISPATCH_FAILED, f"{url} answered with no embeddings ({json.dumps(str(exc))[:100]})"
        ) from None
    if len(vectors) != len(texts):
        raise LLMError(DISPATCH_FAILED, f"{url} embedded {len(vectors)} of {len(texts)} texts")
    return vectors
