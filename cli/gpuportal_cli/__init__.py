"""``gpuportal``: the command-line client of GPU Portal.

It talks only to the portal's REST API (``/api/...``) with a personal API token, so it runs anywhere a
researcher has Python and network access to the portal, and it imports nothing of the portal itself
(an import-linter contract checks that)."""

__version__ = "0.1.0"
