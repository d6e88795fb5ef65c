from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "observability"
    verbose_name = "Observability and accounting"
    default_auto_field = "django.db.models.BigAutoField"
