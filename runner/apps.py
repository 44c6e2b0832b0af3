from django.apps import AppConfig


class RunnerConfig(AppConfig):
    name = "runner"
    verbose_name = "Runner"

    def ready(self) -> None:
        # The project's model endpoint is resolved from Django's settings before any trial
        # starts, so runner.llm and runner.core import nothing of Django.
        from runner.jobs import llm_settings

        llm_settings.install()
