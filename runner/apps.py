from django.apps import AppConfig


class RunnerConfig(AppConfig):
    name = "runner"
    verbose_name = "Runner"

    def ready(self) -> None:
        # The project's model endpoint is resolved from Django's settings before any trial
        # starts, so runner.llm and runner.core import nothing of Django.
        from runner.jobs import model_endpoint

        model_endpoint.install()
        self._install_user_code_limits()

    @staticmethod
    def _install_user_code_limits() -> None:
        from django.conf import settings

        # Imported when the app is ready, as Django wants of what an AppConfig reads.
        from runner.core.limits import UserCodeLimits, use_limits

        use_limits(
            UserCodeLimits(
                check_s=settings.PROCTOR_CHECK_TIMEOUT_S,
                prepare_s=settings.PROCTOR_PREPARE_TIMEOUT_S,
                tool_s=settings.PROCTOR_TOOL_TIMEOUT_S,
            )
        )
