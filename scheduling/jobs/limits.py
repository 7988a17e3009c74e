"""The fixed limits of what a person may ask of the scheduler, declared once.

The submit fields (``submission.SUBMIT_FIELDS``), the page forms, the API serializers (and through them the
OpenAPI schema) and the messages that refuse a value all read them here, so no layer keeps a copy that could
drift. Limits that depend on the fleet (GPUs per node of a model) come from the GPU-model catalogue instead.
"""

#: The most tasks one array may have and the most replicas one service may ask for. An array is stored in one
#: transaction with a few bulk inserts (``submission.store_jobs``), so 10,000 tasks take seconds, not minutes;
#: beyond that the pass's queue, not the submission, becomes the cost, and a larger sweep is split in arrays.
MAX_ARRAY_TASKS = 10_000
MAX_REPLICAS = 64
#: The most job specs one ``POST /api/jobs/batch/`` may carry (each an array or a service counts once; the
#: body also stays within ``DATA_UPLOAD_MAX_MEMORY_SIZE``).
MAX_BATCH_JOBS = 1000
#: The most jobs one batch stores in all (an array counts each task, a service each replica): without it a
#: thousand arrays of 10,000 tasks would be ten million jobs in one transaction of one web worker.
MAX_BATCH_TOTAL = MAX_ARRAY_TASKS
#: The largest id a request may name (PostgreSQL's integer).
MAX_ID = 2 ** 31 - 1
#: The longest reason a cancel may give: a longer one is refused, never cut (what is stored is what was written).
CANCEL_REASON_MAX = 500
#: The most named ports one job may declare (``submission``'s ``ports``): each is a Service port on Kubernetes and
#: a line on the job page; a program with more to show puts them behind one web UI.
MAX_PORTS = 8
#: The longest port name: Kubernetes' limit for a container's or a Service's port name (an IANA service name).
MAX_PORT_NAME = 15
#: The longest ``name:port`` entry: the name, a colon and five digits.
MAX_PORT_ENTRY = MAX_PORT_NAME + 6
#: The most jobs one submission may wait for (``submission``'s ``depends_on``), and the longest text naming them.
MAX_DEPENDENCIES = 100
MAX_DEPENDS_ON_TEXT = 2000
#: The most jobs the job page follows a dependency chain through, each way.
MAX_CHAIN = 50
