from django.apps import AppConfig


class EvalsAppConfig(AppConfig):
    name = "evals_app"
    verbose_name = "Evals"
    default_auto_field = "django.db.models.BigAutoField"
