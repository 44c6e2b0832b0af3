"""API reruns the CLI would refuse answer 400 with the CLI's sentences, as a submission does."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response


class RerunRefusalMixin:
    """For viewsets with rerun actions: the runner's InvalidInput (nothing was written) becomes
    ``400 {"problems": [...]}`` instead of a 500."""

    def handle_exception(self, exc: Exception) -> Response:
        from runner.batches.planning import InvalidInput  # the runner loads on use, as in views

        if isinstance(exc, InvalidInput):
            return Response({"problems": exc.problems}, status=status.HTTP_400_BAD_REQUEST)
        return super().handle_exception(exc)  # type: ignore[misc]
