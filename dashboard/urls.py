from django.contrib.auth import views as auth_views
from django.urls import include, path

from dashboard.views import cases, grid, metrics, reruns, runs, trials

urlpatterns = [
    path("api/", include("dashboard.api.urls")),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", grid.grid, name="grid"),
    path("batches/<int:batch_id>/", grid.grid, name="batch"),
    path("batches/<int:batch_id>/metrics/", metrics.batch_metrics_view, name="batch-metrics"),
    path("batches/<int:batch_id>/rerun/", reruns.rerun_batch_view, name="rerun-batch"),
    path("batches/<int:batch_id>/rerun-failed/", reruns.rerun_failed_view, name="rerun-failed"),
    path(
        "batches/<int:batch_id>/cases/<int:case_id>/rerun/",
        reruns.rerun_case_view,
        name="rerun-case",
    ),
    path("runs/<int:run_id>/", runs.run_detail, name="run"),
    path("runs/<int:run_id>/rerun/", reruns.rerun_run_view, name="rerun-run"),
    path("trials/<int:trial_id>/", trials.trial_detail, name="trial"),
    path(
        "trials/<int:trial_id>/artifacts/<path:path>", trials.trial_artifact, name="trial-artifact"
    ),
    path("cases/<int:case_id>/", cases.case_history, name="case"),
]
