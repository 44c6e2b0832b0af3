from django.conf import settings
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from dashboard.views import (
    batches,
    cases,
    compare,
    failures,
    grid,
    labels,
    metrics,
    reruns,
    runs,
    side_by_side,
    trials,
)

urlpatterns = [
    path("api/", include("dashboard.api.urls")),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Pages link the SVG icon; this answers the browsers and tools that ask for the old name.
    path("favicon.ico", RedirectView.as_view(url=f"{settings.STATIC_URL}favicon.svg")),
    path("", grid.grid, name="grid"),
    path("batches/", batches.batch_list, name="batches"),
    path("batches/<int:batch_id>/baseline/", batches.mark_baseline_view, name="mark-baseline"),
    path("compare/", compare.compare_view, name="compare"),
    path("batches/<int:batch_id>/", grid.grid, name="batch"),
    path("batches/<int:batch_id>/variants/", compare.variant_compare_view, name="batch-variants"),
    path("batches/<int:batch_id>/labelling/", labels.labelling_queue_view, name="labelling"),
    path("judges/", labels.judges_view, name="judges"),
    path("batches/<int:batch_id>/failures/", failures.batch_failures_view, name="batch-failures"),
    path("batches/<int:batch_id>/metrics/", metrics.batch_metrics_view, name="batch-metrics"),
    path("batches/<int:batch_id>/rerun/", reruns.rerun_batch_view, name="rerun-batch"),
    path("batches/<int:batch_id>/regrade/", reruns.regrade_batch_view, name="regrade-batch"),
    path("batches/<int:batch_id>/rerun-failed/", reruns.rerun_failed_view, name="rerun-failed"),
    path("batches/<int:batch_id>/rerun-errored/", reruns.rerun_errored_view, name="rerun-errored"),
    path(
        "batches/<int:batch_id>/cases/<int:case_id>/rerun/",
        reruns.rerun_case_view,
        name="rerun-case",
    ),
    path("runs/<int:run_id>/", runs.run_detail, name="run"),
    path("runs/<int:run_id>/rerun/", reruns.rerun_run_view, name="rerun-run"),
    path("trials/<int:trial_id>/", trials.trial_detail, name="trial"),
    path("trials/<int:trial_id>/trajectory.json", trials.trial_trajectory, name="trial-trajectory"),
    path(
        "trials/<int:trial_id>/compare/", side_by_side.compare_picker, name="trial-compare-picker"
    ),
    path(
        "trials/<int:trial_id>/compare/<int:other_id>/",
        side_by_side.side_by_side,
        name="trial-side-by-side",
    ),
    path("trials/<int:trial_id>/label/", labels.label_trial_view, name="label-trial"),
    path("trials/<int:trial_id>/rerun/", reruns.rerun_trial_view, name="rerun-trial"),
    path(
        "trials/<int:trial_id>/artifacts/<path:path>", trials.trial_artifact, name="trial-artifact"
    ),
    path("cases/<int:case_id>/", cases.case_history, name="case"),
]
