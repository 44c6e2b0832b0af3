"""The endpoints `proctor eval --server` talks to: which bundles the server lacks, uploading
one, recording a submitted batch (queued for the workers), and the finished batch's report.

Every endpoint needs a signed-in user (session or token) and acts only inside an organization
the user is a member of; any other organization answers 404, like every other object.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard import access
from evals_app import bundle_archive
from evals_app.bundle_store import missing_bundles, save_bundle
from evals_app.models import Organization
from evals_app.resolution import RECORD_FORMAT as SUBMISSION_FORMAT

logger = logging.getLogger(__name__)

DEFAULT_BUNDLE_MAX_BYTES = 50 * 1024 * 1024
DIGEST = re.compile(r"[0-9a-f]{64}")
BUNDLE_KINDS = (bundle_archive.KIND_TREE, bundle_archive.KIND_GIT)
# A tree bundle is gzip'd; hashing it unpacks it, so refuse one that unpacks past this many
# times the upload limit (a gzip bomb) instead of hashing forever.
MAX_UNPACKED_RATIO = 20
READ_CHUNK = 1024 * 1024


def bundle_max_bytes() -> int:
    return getattr(settings, "BUNDLE_MAX_BYTES", DEFAULT_BUNDLE_MAX_BYTES)


# --- bodies ------------------------------------------------------------------------------------


class OrganizationField(serializers.CharField):
    def __init__(self, **kwargs) -> None:
        super().__init__(
            required=False,
            allow_null=True,
            allow_blank=True,
            max_length=100,
            help_text="The organization's slug; null means your only organization.",
            **kwargs,
        )


class MissingBundlesRequestSerializer(serializers.Serializer):
    organization = OrganizationField()
    digests = serializers.ListField(
        child=serializers.RegexField(DIGEST, max_length=64, min_length=64),
        max_length=10_000,
        help_text="sha256 digests (64 lowercase hex digits) of the bundles a submission needs.",
    )


class MissingBundlesSerializer(serializers.Serializer):
    missing = serializers.ListField(
        child=serializers.CharField(), help_text="The digests this organization has not stored."
    )
    max_bytes = serializers.IntegerField(
        help_text="The largest bundle an upload may be (PROCTOR_BUNDLE_MAX_MB), so a client can "
        "refuse before uploading any."
    )


class SubmissionRequestSerializer(serializers.Serializer):
    organization = OrganizationField()
    submission = serializers.JSONField(
        help_text="What `proctor eval` builds from the validated eval files (format 2)."
    )

    def validate_submission(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValidationError("submission must be an object of format 2.")
        if value.get("format") != SUBMISSION_FORMAT:
            raise ValidationError(
                f"submission is of format {value.get('format')!r}; this server takes format "
                f"{SUBMISSION_FORMAT} (install the same Proctor version as the server)."
            )
        for key, kind in (("options", dict), ("cases", list), ("variants", list), ("runs", list)):
            if not isinstance(value.get(key), kind):
                raise ValidationError(
                    f"submission.{key} must be {'an object' if kind is dict else 'a list'}."
                )
        for key in ("cases", "variants", "runs"):
            if not all(isinstance(item, dict) for item in value[key]):
                raise ValidationError(f"every item of submission.{key} must be an object.")
        if not value["runs"]:
            raise ValidationError("submission.runs is empty: there is nothing to run.")
        return value


class SubmissionCreatedSerializer(serializers.Serializer):
    batch = serializers.IntegerField(help_text="The new batch's id.")
    trials = serializers.IntegerField(help_text="Trials queued for the workers.")
    new_versions = serializers.IntegerField(help_text="Case versions this submission created.")
    url = serializers.URLField(help_text="The batch's grid in the dashboard.")


class ProblemsSerializer(serializers.Serializer):
    problems = serializers.ListField(
        child=serializers.CharField(), help_text="One line per problem."
    )


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()


class BundleStoredSerializer(serializers.Serializer):
    digest = serializers.CharField()
    kind = serializers.ChoiceField(choices=BUNDLE_KINDS)
    size = serializers.IntegerField()


class BundleBodyParser(BaseParser):
    """Accepts the raw bundle; the view reads the stream itself (never ``request.data``), so
    a body past the limit is refused without being held in memory."""

    media_type = "application/octet-stream"

    def parse(self, stream, media_type=None, parser_context=None):  # pragma: no cover - unused
        return stream


# --- organizations -----------------------------------------------------------------------------


def _organization_for(user, slug: str | None) -> Organization:
    """The organization a request names, among the user's; 404 for any other."""
    organizations = access.organizations_of(user)
    if slug:
        organization = organizations.filter(slug=slug).first()
        if organization is None:
            raise NotFound(f"no organization {slug} for this user")
        return organization
    mine = list(organizations.order_by("slug")[:21])
    if len(mine) == 1:
        return mine[0]
    if not mine:
        raise NotFound(f"user {user.get_username()} is a member of no organization")
    choices = ", ".join(o.slug for o in mine[:20]) + (", ..." if len(mine) > 20 else "")
    raise ValidationError(
        {
            "problems": [
                f"user {user.get_username()} is in several organizations ({choices}): name one with --org"
            ]
        }
    )


def _too_large(size: int | None) -> Response:
    """413 with one sentence; ``size`` when the request declared it."""
    limit = bundle_max_bytes()
    what = f"is {_megabytes(size)}" if size else "is larger than that"
    return Response(
        {
            "detail": (
                f"the server accepts bundles of at most {_megabytes(limit)} (PROCTOR_BUNDLE_MAX_MB) "
                f"and this one {what}; trim the project folder with a .proctorignore"
            )
        },
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


# --- bundle digests ----------------------------------------------------------------------------


def tree_digest(data: bytes, *, max_unpacked: int) -> str | None:
    """sha256 of the tar inside a gzip'd tree bundle (``bundle_archive.tree_digest``, read in
    chunks), or None when it is not gzip or unpacks past ``max_unpacked`` bytes."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    digest = hashlib.sha256()
    unpacked = 0
    try:
        for start in range(0, len(data), READ_CHUNK):
            chunk = inflater.decompress(data[start : start + READ_CHUNK], READ_CHUNK)
            while True:
                unpacked += len(chunk)
                if unpacked > max_unpacked:
                    return None
                digest.update(chunk)
                if not inflater.unconsumed_tail:
                    break
                chunk = inflater.decompress(inflater.unconsumed_tail, READ_CHUNK)
        tail = inflater.flush()
    except zlib.error:
        return None
    if not inflater.eof or inflater.unused_data:
        return None  # truncated, or more than one gzip member
    if unpacked + len(tail) > max_unpacked:
        return None
    digest.update(tail)
    return digest.hexdigest()


def git_digest(data: bytes) -> str | None:
    """The digest of a git bundle: sha256 of "git commit " and its refs/heads/proctor commit,
    or None when it is not such a bundle. Runs `git bundle list-heads` (a subprocess)."""
    git = shutil.which("git")
    assert git is not None  # the caller checks
    with tempfile.TemporaryDirectory(prefix="proctor-upload-") as folder:
        path = Path(folder) / "upload.bundle"
        path.write_bytes(data)
        listed = subprocess.run(
            [git, "bundle", "list-heads", str(path), "refs/heads/proctor"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    heads = [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    if listed.returncode != 0 or len(heads) != 1:
        return None
    return bundle_archive.git_digest(heads[0])


def digest_problem(digest: str, kind: str, data: bytes, *, limit: int) -> str | None:
    """Why ``data`` is not the ``kind`` bundle named ``digest``, or None when it is.

    A bundle is stored under the digest its uploader names, so the server recomputes it: a
    tree from its tar, a git bundle from its commit (only where git is installed; without it
    the worker could not use the bundle either, and the claimed digest is kept)."""
    if kind == bundle_archive.KIND_TREE:
        actual = tree_digest(data, max_unpacked=limit * MAX_UNPACKED_RATIO)
    elif shutil.which("git") is not None:
        actual = git_digest(data)
    else:
        return None
    if actual is None:
        return f"bundle {digest} is not a readable {kind} bundle"
    if actual != digest:
        return f"bundle {digest} holds content whose digest is {actual}"
    return None


def _read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None when it is longer than ``limit`` bytes."""
    stream = request.stream
    if stream is None:
        return b""
    data = stream.read(limit + 1)
    return None if len(data) > limit else data


# --- views -------------------------------------------------------------------------------------


@extend_schema(
    summary="Which of these bundles the organization has not stored yet",
    request=MissingBundlesRequestSerializer,
    responses={
        200: MissingBundlesSerializer,
        400: ProblemsSerializer,
        404: OpenApiResponse(DetailSerializer, description="Not an organization of yours."),
    },
    tags=["submissions"],
)
@api_view(["POST"])
def missing_bundles_view(request: Request) -> Response:
    body = MissingBundlesRequestSerializer(data=request.data)
    if not body.is_valid():
        raise ValidationError({"problems": _problem_lines(body.errors)})
    organization = _organization_for(request.user, body.validated_data.get("organization"))
    digests = list(dict.fromkeys(body.validated_data["digests"]))
    return Response(
        {"missing": missing_bundles(organization, digests), "max_bytes": bundle_max_bytes()}
    )


@extend_schema(
    summary="Upload one bundle (idempotent: a stored digest answers 200 and stores nothing)",
    parameters=[
        OpenApiParameter("organization", str, description="The organization's slug."),
        OpenApiParameter("kind", str, enum=list(BUNDLE_KINDS), description="tree or git."),
    ],
    request={"application/octet-stream": OpenApiTypes.BINARY},
    responses={
        201: BundleStoredSerializer,
        200: BundleStoredSerializer,
        400: ProblemsSerializer,
        404: OpenApiResponse(DetailSerializer, description="Not an organization of yours."),
        413: OpenApiResponse(DetailSerializer, description="Over PROCTOR_BUNDLE_MAX_MB."),
    },
    tags=["submissions"],
)
@api_view(["PUT"])
@parser_classes([BundleBodyParser])
def upload_bundle_view(request: Request, digest: str) -> Response:
    if not DIGEST.fullmatch(digest):
        raise ValidationError({"problems": [f"{digest!r} is not a sha256 digest (64 hex digits)"]})
    kind = request.query_params.get("kind", "tree")
    if kind not in BUNDLE_KINDS:
        raise ValidationError({"problems": [f"kind must be tree or git, not {kind!r}"]})
    organization = _organization_for(request.user, request.query_params.get("organization"))
    limit = bundle_max_bytes()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0  # read and measured below instead
    if declared > limit:
        return _too_large(declared)
    stored = {"digest": digest, "kind": kind}
    if digest not in missing_bundles(organization, [digest]):
        return Response({**stored, "size": declared}, status=status.HTTP_200_OK)
    data = _read_body(request, limit)
    if data is None:
        return _too_large(None)
    if not data:
        raise ValidationError({"problems": ["the bundle's body is empty"]})
    problem = digest_problem(digest, kind, data, limit=limit)
    if problem:
        raise ValidationError({"problems": [problem]})
    created = save_bundle(organization, digest, kind, data)
    return Response(
        {**stored, "size": len(data)},
        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
    )


@extend_schema(
    summary="Record a submitted batch and queue its trials for the workers",
    request=SubmissionRequestSerializer,
    responses={
        201: SubmissionCreatedSerializer,
        400: ProblemsSerializer,
        404: OpenApiResponse(DetailSerializer, description="Not an organization of yours."),
    },
    tags=["submissions"],
)
@api_view(["POST"])
def create_submission_view(request: Request) -> Response:
    # The runner brings Celery and the harnesses: load on use.
    from runner.batches.planning import InvalidInput, record_submission
    from runner.jobs.dispatch import enqueue

    body = SubmissionRequestSerializer(data=request.data)
    if not body.is_valid():
        raise ValidationError({"problems": _problem_lines(body.errors)})
    organization = _organization_for(request.user, body.validated_data.get("organization"))
    try:
        with transaction.atomic():
            batch, trial_ids, new_versions = record_submission(
                organization, body.validated_data["submission"], user=request.user, on_server=True
            )
            transaction.on_commit(lambda: enqueue(trial_ids))
    except InvalidInput as exc:
        return Response({"problems": exc.problems}, status=status.HTTP_400_BAD_REQUEST)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        # A submission of the right shape whose insides are not (another `proctor` version, or
        # a hand-made one): nothing was written; say so instead of answering 500.
        logger.warning("malformed submission from %s", request.user, exc_info=True)
        problem = (
            f"the submission is malformed ({type(exc).__name__}: {exc}); "
            "is the client the same version of proctor as the server?"
        )
        return Response({"problems": [problem]}, status=status.HTTP_400_BAD_REQUEST)
    return Response(
        {
            "batch": batch.pk,
            "trials": len(trial_ids),
            "new_versions": new_versions,
            "url": request.build_absolute_uri(reverse("batch", args=[batch.pk])),
        },
        status=status.HTTP_201_CREATED,
        headers={
            "Location": request.build_absolute_uri(reverse("api-batch-detail", args=[batch.pk]))
        },
    )


def _problem_lines(errors: Any, prefix: str = "") -> list[str]:
    """A serializer's nested errors as one line each, named by their field."""
    if isinstance(errors, dict):
        return [
            line
            for key, value in errors.items()
            for line in _problem_lines(
                value, f"{prefix}{key}: " if key != "non_field_errors" else prefix
            )
        ]
    if isinstance(errors, list):
        return [line for value in errors for line in _problem_lines(value, prefix)]
    return [f"{prefix}{errors}"]


@extend_schema(
    summary="A batch's results: the JSON `proctor eval --json` prints",
    responses={200: OpenApiTypes.OBJECT, 404: DetailSerializer},
    tags=["submissions"],
)
@api_view(["GET"])
def batch_report_view(request: Request, pk: int) -> Response:
    # The runner brings Celery and the harnesses: load on use.
    from runner.batches.report import batch_report

    batch = access.get_or_404(access.batches_for(request.user), pk=pk)
    # Its links lead where the caller reached this server, as the submission's "url" does (not
    # to PROCTOR_DASHBOARD_URL's default, another port on the caller's own machine).
    return Response(batch_report(batch, dashboard_url=request.build_absolute_uri("/")))
