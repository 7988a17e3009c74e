"""A fake Kubernetes API server for tests and benchmarks (``kubefake.server.FakeKubernetes``; ``python -m
kubefake`` serves one in its own process). It imports nothing of the portal; its modules, one per concern, are
listed in ``kubefake.server``."""
