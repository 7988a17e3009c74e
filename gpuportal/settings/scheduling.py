"""The scheduler's clusters: node agents, Kubernetes dispatch and the reconciler that repairs what they left.

The scheduler's own knobs (pass interval, longest runtime) and the simulated cluster's clock are in tuning.py:
the test suite pins them."""

from gpuportal.settings.environment import env_bool, env_float, env_int, env_list, env_str

# Node agents: how they are polled and when a node or GPU changes health.
AGENTS = {
    "POLL_WORKERS": env_int("GPUPORTAL_POLL_WORKERS", 64),
    # A total deadline per agent (connect, TLS, request, headers and body together), so that no agent can
    # stall a poll cycle.
    "POLL_TIMEOUT_SECONDS": env_float("GPUPORTAL_POLL_TIMEOUT", 3),
    # healthy -> suspect after one missed poll; -> unhealthy after K missed polls in a row
    "MISSED_POLLS_UNHEALTHY": env_int("GPUPORTAL_MISSED_POLLS_UNHEALTHY", 3),
    # suspect or unhealthy -> healthy after M good polls in a row
    "GOOD_POLLS_HEALTHY": env_int("GPUPORTAL_GOOD_POLLS_HEALTHY", 3),
    # Kept longer than a month so that a closed month can still be rolled up again from its readings.
    "READINGS_RETENTION_DAYS": env_int("GPUPORTAL_READINGS_RETENTION_DAYS", 45),
    # A snapshot larger than this is refused as a failed poll (a healthy 8-GPU node sends ~20 KB).
    "MAX_SNAPSHOT_BYTES": env_int("GPUPORTAL_AGENT_MAX_SNAPSHOT_BYTES", 1024 * 1024),
    # Registration accepts only agent URLs whose every address lies in these networks (comma-separated
    # CIDRs). Link-local addresses (cloud metadata) are always refused; loopback only when a listed network
    # is itself loopback (e.g. 127.0.0.0/8 for a local trial or tests).
    "NETWORKS": env_list("GPUPORTAL_AGENT_NETWORKS", "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"),
    # CA bundle that signs the agents' TLS certificates (https agent URLs); empty: the system's CAs.
    "CA_FILE": env_str("GPUPORTAL_AGENT_CA_FILE"),
}

# Kubernetes dispatch: retries of API calls (5xx, 429, timeouts) with exponential backoff, connections per
# cluster, how long one watch stream lasts before the next beat tick starts another (celery.py gives the watch
# task a time limit that follows WATCH_SECONDS).
KUBERNETES = {
    "RETRIES": env_int("GPUPORTAL_K8S_RETRIES", 4),
    "BACKOFF_SECONDS": env_float("GPUPORTAL_K8S_BACKOFF", 0.2),
    "REQUEST_TIMEOUT_SECONDS": env_float("GPUPORTAL_K8S_TIMEOUT", 10),
    "CONNECTIONS": env_int("GPUPORTAL_K8S_CONNECTIONS", 32),
    "WATCH_SECONDS": env_float("GPUPORTAL_K8S_WATCH_SECONDS", 55),
    "LOG_TAIL_LINES": 50,
    "DISPATCH_WORKERS": env_int("GPUPORTAL_K8S_DISPATCH_WORKERS", 16),
    # Notebooks and services behind the site's ingress controller (nginx): the host they are served on (empty:
    # no Ingress objects; notebooks open through the portal's own proxy), its class and TLS secret.
    "INGRESS_HOST": env_str("GPUPORTAL_INGRESS_HOST"),
    "INGRESS_CLASS": env_str("GPUPORTAL_INGRESS_CLASS"),
    "INGRESS_TLS_SECRET": env_str("GPUPORTAL_INGRESS_TLS_SECRET"),
    # The ConfigMap ("namespace/name") whose X-Gpuportal-Ingress-Auth entry (the shared secret of
    # GPUPORTAL_INGRESS_AUTH_SECRET_FILE) nginx adds to its auth subrequests: without it the portal answers them
    # 403 and hands no notebook token (docs/security.md, "Origins").
    "INGRESS_AUTH_HEADERS": env_str("GPUPORTAL_INGRESS_AUTH_HEADERS"),
}

# The reconciler (scheduling/passes/reconcile.py): how long a job may stay admitted or dispatching before it is
# repaired, and how often it runs.
RECONCILE = {
    "ADMITTED_SECONDS": env_float("GPUPORTAL_RECONCILE_ADMITTED_SECONDS", 120),
    "DISPATCHING_SECONDS": env_float("GPUPORTAL_RECONCILE_DISPATCHING_SECONDS", 300),
    "INTERVAL_SECONDS": env_float("GPUPORTAL_RECONCILE_INTERVAL", 60),
}

SLURM = {
    # Lifespan of the per-user tokens the portal signs with a cluster's JWT key (kept until a minute before).
    "TOKEN_SECONDS": env_int("GPUPORTAL_SLURM_TOKEN_SECONDS", 600),
    "REQUEST_TIMEOUT_SECONDS": env_float("GPUPORTAL_SLURM_TIMEOUT", 10),
    "RETRIES": env_int("GPUPORTAL_SLURM_RETRIES", 2),
    # A dispatched job Slurm keeps pending longer than this (its node was taken meanwhile) is withdrawn and
    # placed again by the reconciler.
    "PENDING_SECONDS": env_float("GPUPORTAL_SLURM_PENDING_SECONDS", 120),
    # How often nodes, their states and work outside the portal are read again (the beat).
    "INVENTORY_SECONDS": env_float("GPUPORTAL_SLURM_INVENTORY_SECONDS", 30),
    # How far back each accounting import reads slurmdb (finished jobs are imported once; the window only bounds
    # how late a record may come).
    "ACCOUNTING_HOURS": env_float("GPUPORTAL_SLURM_ACCOUNTING_HOURS", 48),
    "LOG_TAIL_LINES": 50,
}

#: The longest max runtime a job may ask for unless the site says otherwise: 7 days, in minutes.
DEFAULT_MAX_RUNTIME_MINUTES = 7 * 24 * 60
#: One simulated second lasts this many real seconds (0.02 = 50x faster), so that demo jobs with runtimes of
#: tens of minutes finish while someone watches.
DEFAULT_SIMULATION_TIME_SCALE = 0.02


def scheduler(max_runtime_minutes: int) -> dict:
    """The scheduling pass and the job-status sync; the caller gives the longest runtime (tests pin it)."""
    return {
        "MAX_RUNTIME_MINUTES": max_runtime_minutes,
        "PASS_INTERVAL_SECONDS": env_float("GPUPORTAL_PASS_INTERVAL", 10),
        "SYNC_INTERVAL_SECONDS": env_float("GPUPORTAL_SYNC_INTERVAL", 5),
        "POLL_INTERVAL_SECONDS": env_float("GPUPORTAL_POLL_INTERVAL", 15),
        # A retry avoids the nodes its earlier attempts failed on; after this many hours a node that is
        # schedulable again (repaired: healthy, not cordoned) is tried again.
        "AVOID_NODE_HOURS": env_float("GPUPORTAL_AVOID_NODE_HOURS", 24),
        # A job that avoids every node that could hold it fails at the next pass (its attempts say why); on, it
        # keeps waiting with that reason instead, until the avoidance expires or an admin clears it.
        "WAIT_WHEN_ALL_NODES_AVOIDED": env_bool("GPUPORTAL_WAIT_WHEN_ALL_NODES_AVOIDED", False),
        # Each worker keeps the rows its last pass read and reads again only those that changed
        # (scheduling/passes/kept.py); it reads everything again after this many seconds, and compares what it
        # keeps with a full read every this many passes (0: never).
        "FULL_REBUILD_SECONDS": env_float("GPUPORTAL_SCHEDULER_FULL_REBUILD_SECONDS", 900),
        "SNAPSHOT_CHECK_PASSES": env_int("GPUPORTAL_SCHEDULER_SNAPSHOT_CHECK_PASSES", 20),
        # A waiting job's stored estimates are written again only when they moved by more than this many
        # seconds (or its reason or position changed): the pages show them to the minute
        # (scheduling/passes/queue_states.py).
        "ESTIMATE_TOLERANCE_SECONDS": env_float("GPUPORTAL_SCHEDULER_ESTIMATE_TOLERANCE_SECONDS", 60),
        # Placement packs against the shapes of the jobs submitted in the last this many days (0: the queue's
        # and the running jobs' shapes only): scheduling/passes/workload.py, docs/placement.md.
        "HISTORY_DAYS": env_float("GPUPORTAL_SCHEDULER_HISTORY_DAYS", 14),
    }
