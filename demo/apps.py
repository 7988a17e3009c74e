from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The embedded demo's seed data (``manage.py seed_demo``): the top layer, above every app it fills."""

    name = "demo"
    verbose_name = "Demo data"
