"""The OpenAPI schema's view of failures: every operation also documents the errors it can
answer (drf-spectacular documents only the success), so a client, and schemathesis, can tell
a described 404 from a surprise."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema

# DRF's error bodies: {"detail": "..."} for 401/403/404/429, a field name per problem for 400.
ERROR_BODY = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}


def error_response(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ERROR_BODY}}}


class ProctorAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)  # type: ignore[arg-type]
        errors = {
            "401": "Not signed in: no session or token.",
            "403": "Signed in, but not allowed (a CSRF failure for a session POST).",
            "404": "No such object for this user (another organization's is not found either),"
            " or a page past the last.",
        }
        if getattr(self.view, "action", None) != "retrieve":
            errors["400"] = "A query or body value that is not valid, in one sentence per field."
        if self.method == "POST":
            errors["415"] = "A body in a media type the endpoint does not read."
        for code, description in errors.items():
            responses.setdefault(code, error_response(description))
        return dict(sorted(responses.items()))
