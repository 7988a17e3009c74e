from django.apps import AppConfig


class BenchConfig(AppConfig):
    """Benchmarks and the trace replay (``manage.py bench_*``, ``replay_trace``): the top layer, above every app
    they measure. Each prints JSON; ``tests/bench`` runs each at a tiny size so none can rot."""

    name = "bench"
    verbose_name = "Benchmarks"
