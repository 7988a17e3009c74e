# `make demo` — set up and run the embedded demo (SQLite, no Redis, simulated cluster) on :8000.
# `make test` — the whole suite against this machine's PostgreSQL and Redis (started when down).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)

.PHONY: demo test lint venv clean bench-poll bench-scheduler bench-rollup bench-dispatch replay prod-smoke chaos-soak

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	PYTHON=$(PYTHON) ./scripts/ensure-build-deps.sh  # python-ldap compiles against libldap2-dev, libsasl2-dev
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	@mkdir -p var
	@rm -f var/gpuportal.sqlite3 var/gpuportal.sqlite3-wal var/gpuportal.sqlite3-shm
	$(PY) manage.py migrate --noinput -v 0
	$(PY) manage.py seed_demo
	PY=$(PY) ./scripts/demo.sh

lint: $(STAMP)
	$(PY) -m ruff check .

test: $(STAMP)
	./scripts/ensure-services.sh
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) manage.py makemigrations --check --dry-run -v 0
	$(PY) -m pytest
	$(MAKE) --no-print-directory prod-smoke

# The production stack end to end: gunicorn, Celery worker and beat, node agents over HTTP, on a
# fresh database; a worker SIGKILLed mid-pass. Prints each check and a JSON summary with the timings.
SMOKE_DB ?= gpuportal_smoke
prod-smoke: $(STAMP)
	./scripts/ensure-services.sh
	psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $(SMOKE_DB) WITH (FORCE)"
	psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $(SMOKE_DB)"
	DATABASE_URL=postgres://postgres@127.0.0.1:5432/$(SMOKE_DB) $(PY) manage.py migrate --noinput -v 0
	DATABASE_URL=postgres://postgres@127.0.0.1:5432/$(SMOKE_DB) DEBUG=0 $(PY) manage.py prod_smoke

# The chaos soak (docs/reliability.md): the production stack under seeded faults and API clients, on a fresh
# database; `make chaos-soak MINUTES=6 SEED=2`. The suite runs a short one (tests/faults/test_chaos_soak.py).
CHAOS_DB ?= gpuportal_chaos
MINUTES ?= 6
SEED ?= 1
chaos-soak: $(STAMP)
	./scripts/ensure-services.sh
	psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $(CHAOS_DB) WITH (FORCE)"
	psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $(CHAOS_DB)"
	DATABASE_URL=postgres://postgres@127.0.0.1:5432/$(CHAOS_DB) $(PY) manage.py migrate --noinput -v 0
	DATABASE_URL=postgres://postgres@127.0.0.1:5432/$(CHAOS_DB) DEBUG=0 $(PY) manage.py chaos_soak \
	  --minutes $(MINUTES) --seed $(SEED) --json

# Polling benchmark on this machine's PostgreSQL (database gpuportal_bench, created when missing).
BENCH_DB ?= postgres://postgres@127.0.0.1:5432/gpuportal_bench
bench-poll: $(STAMP)
	./scripts/ensure-services.sh
	psql -h 127.0.0.1 -U postgres -tc "SELECT 1 FROM pg_database WHERE datname='gpuportal_bench'" | grep -q 1 \
	  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE gpuportal_bench"
	DATABASE_URL=$(BENCH_DB) $(PY) manage.py migrate --noinput -v 0
	DATABASE_URL=$(BENCH_DB) $(PY) manage.py bench_poll --agents 1000 --gpus 8

bench-scheduler: $(STAMP)
	./scripts/ensure-services.sh
	psql -h 127.0.0.1 -U postgres -tc "SELECT 1 FROM pg_database WHERE datname='gpuportal_bench'" | grep -q 1 \
	  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE gpuportal_bench"
	DATABASE_URL=$(BENCH_DB) $(PY) manage.py migrate --noinput -v 0
	DATABASE_URL=$(BENCH_DB) DEBUG=0 $(PY) manage.py bench_scheduler --nodes 1000 --gpus-per-node 8 --tenants 100 \
	  --pending 10000 --running 4000

# A month of readings (1,000 GPUs, 10 million samples) rolled up in PostgreSQL; the data is generated once.
bench-rollup: $(STAMP)
	./scripts/ensure-services.sh
	psql -h 127.0.0.1 -U postgres -tc "SELECT 1 FROM pg_database WHERE datname='gpuportal_bench'" | grep -q 1 \
	  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE gpuportal_bench"
	DATABASE_URL=$(BENCH_DB) $(PY) manage.py migrate --noinput -v 0
	DATABASE_URL=$(BENCH_DB) DEBUG=0 $(PY) manage.py bench_rollup --samples 10000000 --gpus 1000 --month 2026-10

# Kubernetes dispatch and sync against the fake API server (its own process) on loopback.
bench-dispatch: $(STAMP)
	./scripts/ensure-services.sh
	psql -h 127.0.0.1 -U postgres -tc "SELECT 1 FROM pg_database WHERE datname='gpuportal_bench'" | grep -q 1 \
	  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE gpuportal_bench"
	DATABASE_URL=$(BENCH_DB) $(PY) manage.py migrate --noinput -v 0
	DATABASE_URL=$(BENCH_DB) DEBUG=0 $(PY) manage.py bench_dispatch --jobs 1000

TRACES ?= ../shared/traces/openb
replay: $(STAMP)
	for policy in default first-fit; do $(PY) manage.py replay_trace --nodes $(TRACES)/openb_node_list_gpu_node.csv \
	  --pods $(TRACES)/openb_pod_list_default.csv --time-scale 0.01 --node-fraction 0.05 --pass-interval 60 \
	  --policy $$policy; done

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache .ruff_cache .hypothesis
