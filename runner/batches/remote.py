"""`proctor eval --server URL`: hand a built submission to a Proctor server and follow the batch
its workers run.

The server's API (``dashboard.api.submissions``) is asked which bundles it lacks, only those
are uploaded (so a second run uploads nothing), the submission is recorded there, and the
batch's trial counts are polled until it finishes. Every failure is a RemoteError whose lines
are what the person reads: one sentence, or the server's problems one per line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

# The statuses a trial ends in (budget_exhausted: stopped by the batch's budget).
FINAL_STATUSES = ("passed", "failed", "timed_out", "errored", "budget_exhausted")
POLL_S = 0.5
# After every trial is final the server closes the batch; wait this long for it at most.
FINISH_GRACE_S = 10.0
# Polling survives a server restart of about this long before giving up.
UNREACHABLE_GRACE_S = 15.0
TOKEN_HINT = "make one with `proctor createtoken USERNAME` on the server and pass it with --token or PROCTOR_TOKEN"


class RemoteError(Exception):
    """What went wrong talking to the server: ``lines`` to print, one problem each."""

    def __init__(self, message: str, *, problems: list[str] | None = None) -> None:
        self.lines = problems or [message]
        super().__init__("\n".join(self.lines))


class ServerUnreachable(RemoteError):
    """No connection could be made (refused, unknown host, reset)."""


class Bundle(Protocol):
    kind: str
    data: bytes


@dataclass(frozen=True)
class Uploaded:
    new: int  # bundles sent now
    present: int  # bundles the server already had
    bytes: int  # bytes sent


@dataclass(frozen=True)
class RemoteBatch:
    id: int
    trials: int
    new_versions: int
    url: str  # the batch's grid in the dashboard


def server_url(raw: str) -> str:
    """The server's base URL without a trailing slash; RemoteError unless http(s)."""
    url = raw.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RemoteError(f"--server must be an http:// or https:// URL, not {raw!r}")
    return url


class ProctorServer:
    """A Proctor server's submission API, as one user (their token) in one organization
    (``None``: the user's only one). Every method is a blocking HTTP request or several."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        organization: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = server_url(url)
        self.organization = organization or None
        self._timeout = timeout
        self._client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Token {token}", "Accept": "application/json"},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            transport=transport,
            follow_redirects=False,
        )

    def __enter__(self) -> ProctorServer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    # --- the steps of a submission ---------------------------------------------------------------

    def upload_bundles(
        self, bundles: Mapping[str, Bundle], names: Mapping[str, str] | None = None
    ) -> Uploaded:
        """Send the bundles the server does not hold yet (asks first, one request). When one
        is over the server's limit nothing is sent; ``names`` say what each digest holds."""
        answer = self._json(
            "POST",
            "/api/bundles/missing/",
            json={"organization": self.organization, "digests": list(bundles)},
        )
        missing = answer["missing"]
        limit = answer.get("max_bytes")
        too_large = [d for d in missing if limit is not None and len(bundles[d].data) > limit]
        if too_large:
            what = (names or {}).get(too_large[0]) or f"bundle {too_large[0][:12]}"
            raise RemoteError(
                f"the server at {self.url} accepts bundles of at most {_megabytes(limit)} "
                f"(its PROCTOR_BUNDLE_MAX_MB) and {what} is {_megabytes(len(bundles[too_large[0]].data))} "
                "compressed: leave large files out with a .proctorignore"
            )
        params = {"organization": self.organization} if self.organization else {}
        sent = 0
        for digest in missing:
            bundle = bundles[digest]
            self._json(
                "PUT",
                f"/api/bundles/{digest}/",
                params={**params, "kind": bundle.kind},
                content=bundle.data,
                headers={"Content-Type": "application/octet-stream"},
            )
            sent += len(bundle.data)
        return Uploaded(new=len(missing), present=len(bundles) - len(missing), bytes=sent)

    def submit(self, submission: dict[str, Any]) -> RemoteBatch:
        """Record the batch on the server; its workers start on it at once."""
        body = self._json(
            "POST",
            "/api/submissions/",
            json={"organization": self.organization, "submission": submission},
        )
        return RemoteBatch(
            id=body["batch"],
            trials=body["trials"],
            new_versions=body["new_versions"],
            url=body["url"],
        )

    def trial_counts(self, batch: int) -> tuple[str, dict[str, int]]:
        """The batch's status and its trial counts per status (and ``total``)."""
        body = self._json("GET", f"/api/batches/{batch}/")
        return body["status"], body["trial_counts"]

    def wait(
        self,
        batch: int,
        on_progress: Callable[[dict[str, int]], None],
        *,
        poll_s: float = POLL_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Poll the batch until it is finished, calling ``on_progress`` with its counts."""
        finished_at: float | None = None
        unreachable_since: float | None = None
        while True:
            try:
                status, counts = self.trial_counts(batch)
            except ServerUnreachable:
                # A restarting server (or a blip) is waited for briefly; a refusal is not.
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > UNREACHABLE_GRACE_S:
                    raise
                sleep(poll_s)
                continue
            unreachable_since = None
            on_progress(counts)
            if status == "finished":
                return
            if sum(counts.get(s, 0) for s in FINAL_STATUSES) >= counts.get("total", 0):
                finished_at = finished_at or time.monotonic()
                if time.monotonic() - finished_at > FINISH_GRACE_S:
                    return
            else:
                # An adaptive batch queued more trials since: the grace starts over.
                finished_at = None
            sleep(poll_s)

    def report(self, batch: int) -> dict[str, Any]:
        """What `proctor eval --json` prints for the batch."""
        return self._json("GET", f"/api/batches/{batch}/report/")

    # --- one request ---------------------------------------------------------------------------

    def _json(self, method: str, path: str, **kwargs) -> Any:
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise RemoteError(
                f"the Proctor server at {self.url} did not answer {method} {path} within {self._timeout:.0f}s"
            ) from None
        except httpx.HTTPError as exc:
            raise ServerUnreachable(
                f"cannot reach the Proctor server at {self.url}: {_reason(exc)}"
            ) from None
        body = _body(response)
        if response.is_success:
            if not isinstance(body, dict):
                raise RemoteError(
                    f"{self.url} answered {method} {path} with something that is not Proctor's API "
                    f"(HTTP {response.status_code}, {response.headers.get('content-type', 'no content type')}); "
                    "is --server the address of a Proctor server?"
                )
            return body
        raise self._refusal(method, path, response.status_code, body)

    def _refusal(self, method: str, path: str, code: int, body: Any) -> RemoteError:
        detail = body.get("detail") if isinstance(body, dict) else None
        problems = body.get("problems") if isinstance(body, dict) else None
        if code in (401, 403):
            why = f" ({detail})" if detail else ""
            return RemoteError(f"the server at {self.url} refused the token{why}: {TOKEN_HINT}")
        if code == 404 and detail and detail != "Not found.":
            return RemoteError(f"the server at {self.url} answered: {detail}")
        if code == 404:
            return RemoteError(
                f"the server at {self.url} has no {path}: is it a Proctor server recent enough for --server?"
            )
        if code == 413:
            return RemoteError(
                f"the server at {self.url} refused a bundle as too large: "
                f"{detail or 'HTTP 413 (a proxy in front of it may limit request bodies)'}"
            )
        if code == 400 and isinstance(problems, list) and problems:
            return RemoteError(
                "the server refused the submission", problems=[str(p) for p in problems]
            )
        if code == 400 and isinstance(body, dict) and body:
            return RemoteError(
                "the server refused the request",
                problems=[f"{key}: {_flat(value)}" for key, value in body.items()],
            )
        why = f": {detail}" if detail else ""
        return RemoteError(
            f"the Proctor server at {self.url} answered HTTP {code} to {method} {path}{why}"
        )


def bundle_names(submission: dict[str, Any]) -> dict[str, str]:
    """What each bundle a submission references holds, for messages about it."""
    names: dict[str, str] = {}
    for case in submission.get("cases", []):
        names.setdefault(case["bundle"], f"the bundle of {case['module_path']}")
        if case.get("source"):
            names.setdefault(case["source"]["bundle"], f"the repository of case {case['case']}")
    for variant in submission.get("variants", []):
        if variant.get("profile_bundle"):
            names.setdefault(variant["profile_bundle"], f"the profile of variant {variant['name']}")
    return names


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _body(response: httpx.Response) -> Any:
    if "json" not in response.headers.get("content-type", ""):
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _flat(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(_flat(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_flat(v)}" for k, v in value.items())
    return str(value)


def _reason(exc: httpx.HTTPError) -> str:
    """The innermost cause, e.g. "[Errno 111] Connection refused"."""
    text = str(exc).strip()
    return text or type(exc).__name__
