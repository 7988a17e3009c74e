"""The chaos soak (``manage.py chaos_soak``, ``bench.chaos``) as a test: the production stack on a fresh database
of its own, four API clients and a seeded fault every 5 to 20 s for 55 s, a drain of at most 45 s, then every
check of the soak asserted.

The command runs as its own process, as an operator runs it: its stack, its database and its Redis database
are its own, so nothing of the suite's test database or other tests' brokers is touched (Redis database 9:
10 is the page-cache tests', 11 to 15 the benchmarks', the smoke's and the fault suite's). Whatever the soak
started must be gone when it exits: every process it starts carries a marker this test chose, and the test
looks for any left.
"""

import json
import os
import secrets
import signal
import subprocess
import sys
from collections import Counter

import psycopg
import pytest
from django.conf import settings

from bench.chaos import MARKER, VIOLATIONS, marked_processes, stop_marked
from tests.faults.faultlib import record

pytestmark = [pytest.mark.faults, pytest.mark.celery_worker]
SEED = 2528  # its 55 s of faults include every kind, the last at 52.7 s (bench.chaos.fault_plan)
MINUTES, DRAIN_MINUTES = 55 / 60, 0.75
THINK = 1.0  # seconds between a client's actions: a smaller mix than the command's default
REDIS_URL = os.environ.get("GPUPORTAL_CHAOS_REDIS_URL", "redis://127.0.0.1:6379/9")


def _server() -> dict:
    db = settings.DATABASES["default"]
    return {"host": db["HOST"] or "127.0.0.1", "port": db["PORT"] or 5432, "user": db["USER"] or "postgres"}


@pytest.fixture
def fresh_database():
    """A database of its own, migrated as ``make prod-smoke`` migrates its own; dropped afterwards."""
    server, name = _server(), f"gpuportal_chaos_{os.getpid()}"
    url = f"postgres://{server['user']}@{server['host']}:{server['port']}/{name}"
    with psycopg.connect(**server, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpuportal.settings", "DATABASE_URL": url}
        migrated = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                                  cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=300)
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        yield url
    finally:
        with psycopg.connect(**server, dbname="postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_chaos_soak_leaves_every_invariant(fresh_database):
    marker = f"test-{os.getpid()}-{secrets.token_hex(6)}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpuportal.settings", "DATABASE_URL": fresh_database,
           "DEBUG": "0", MARKER: marker}
    for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CELERY_TASK_ALWAYS_EAGER", "GPUPORTAL_ENV"):
        env.pop(name, None)  # the command's own process settles and checks in-process, as the fault suite does
    soak = subprocess.Popen([sys.executable, "manage.py", "chaos_soak", "--minutes", str(MINUTES), "--drain-minutes",
                             str(DRAIN_MINUTES), "--seed", str(SEED), "--think", str(THINK), "--broker-url",
                             REDIS_URL, "--json"],
                            cwd=settings.BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = soak.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        soak.send_signal(signal.SIGTERM)  # through its cleanup
        out, err = soak.communicate(120)
    finally:
        if soak.poll() is None:
            soak.kill()
            soak.wait(10)
        left = marked_processes(marker)
        stop_marked(marker)
    assert left == [], f"processes outlived the soak: {left}"
    assert out.strip(), f"the soak printed no findings (exit code {soak.returncode}):\n{err[-5000:]}"
    result = json.loads(out.strip().splitlines()[-1])
    print(err, json.dumps(result, indent=1), sep="\n")  # the whole story, shown on failure (or with -s, -rP)

    kinds = Counter(fault["kind"] for fault in result["faults"])
    for fault in result["faults"]:
        record(f"chaos soak seed {SEED}: {fault['at']:6.1f} s {fault['kind']}: {fault['detail']}")
    failed = {name: result[name] for name in VIOLATIONS if result[name]}
    if not result["audit_ok"]:
        failed["audit_ok"] = result["audit_problem"]
    record(f"chaos soak seed {SEED}: {MINUTES * 60:.0f} s of faults ({', '.join(f'{n} {k}' for k, n in kinds.items())})"
           f" and clients, drain up to {DRAIN_MINUTES * 60:.0f} s; {result['submitted']} submissions "
           f"({result['acknowledged']} acknowledged, {result['same_key_pairs']} same-key pairs), "
           f"{result['requests']} requests; jobs {result['jobs']}; pass failures {result['pass_failures']}; "
           f"audit {'intact' if result['audit_ok'] else 'BROKEN'} ({result['audit_records']} records); "
           + (f"FAILED {', '.join(f'{name} {len(v) if isinstance(v, list) else v}' for name, v in failed.items())}"
              if failed else "every check OK"))

    assert len(result["faults"]) >= 3 and result["acknowledged"] >= 20, "the soak did too little to prove anything"
    assert not failed, json.dumps(failed, indent=1, default=str)[:8000] + "\n" + err[-3000:]
    assert result["ok"] and soak.returncode == 0, err[-3000:]
