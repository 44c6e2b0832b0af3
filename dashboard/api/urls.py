"""The API's routes under /api/: one router for the domain, the schema and its docs page."""

from django.contrib.auth.decorators import login_required
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from dashboard.api import analysis, submissions, views

router = DefaultRouter()
router.register("suites", views.SuiteViewSet, basename="api-suite")
router.register("cases", views.CaseViewSet, basename="api-case")
router.register("case-versions", views.CaseVersionViewSet, basename="api-caseversion")
router.register("variants", views.VariantViewSet, basename="api-variant")
router.register("batches", views.BatchViewSet, basename="api-batch")
router.register("runs", views.RunViewSet, basename="api-run")
router.register("trials", views.TrialViewSet, basename="api-trial")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # A browser page: send a signed-out reader to the sign-in page rather than a bare 403.
    # The split view serves its init script from ?script rather than inline, so the page runs
    # under the same Content-Security-Policy as every other (dashboard/content_security.py).
    path(
        "docs/",
        login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    # What `proctor eval --server` uses (before the router: batches/<id>/report/ is not a viewset route).
    path("bundles/missing/", submissions.missing_bundles_view, name="api-bundles-missing"),
    path("bundles/<str:digest>/", submissions.upload_bundle_view, name="api-bundle"),
    path("submissions/", submissions.create_submission_view, name="api-submissions"),
    path("batches/<int:pk>/report/", submissions.batch_report_view, name="api-batch-report"),
    # The analysis (issue 12): batches with filters, compare, pass@k, flaky cells, cost.
    path("analysis/batches/", analysis.batch_summaries_view, name="api-analysis-batches"),
    path("analysis/compare/", analysis.compare_view, name="api-analysis-compare"),
    path(
        "analysis/batches/<int:pk>/pass-at-k/",
        analysis.pass_at_k_view,
        name="api-analysis-pass-at-k",
    ),
    path(
        "analysis/batches/<int:pk>/variants/",
        analysis.variant_compare_view,
        name="api-analysis-variants",
    ),
    path("analysis/judges/", analysis.judges_view, name="api-analysis-judges"),
    path("analysis/batches/<int:pk>/flaky/", analysis.batch_flaky_view, name="api-analysis-flaky"),
    path(
        "analysis/batches/<int:pk>/failures/",
        analysis.batch_failures_view,
        name="api-analysis-failures",
    ),
    path("analysis/batches/<int:pk>/cost/", analysis.batch_cost_view, name="api-analysis-cost"),
    path(
        "analysis/batches/<int:pk>/baseline/",
        analysis.mark_baseline_view,
        name="api-analysis-baseline",
    ),
    path(
        "analysis/suites/<int:pk>/flaky/",
        analysis.suite_flaky_view,
        name="api-analysis-suite-flaky",
    ),
    path("", include(router.urls)),
    re_path(r"^(?P<path>[\s\S]*)$", views.api_not_found, name="api-not-found"),
]
