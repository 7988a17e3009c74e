"""The fixed limits of what a person may ask of the scheduler, declared once.

The submit fields (``submission.SUBMIT_FIELDS``), the page forms, the API serializers (and through them the
OpenAPI schema) and the messages that refuse a value all read them here, so no layer keeps a copy that could
drift. Limits that depend on the fleet (GPUs per node of a model) come from the GPU-model catalogue instead.
"""

#: The most tasks one array may have and the most replicas one service may ask for.
MAX_ARRAY_TASKS = 1000
MAX_REPLICAS = 64
#: The largest id a request may name (PostgreSQL's integer).
MAX_ID = 2 ** 31 - 1
#: The longest reason a cancel may give: a longer one is refused, never cut (what is stored is what was written).
CANCEL_REASON_MAX = 500
