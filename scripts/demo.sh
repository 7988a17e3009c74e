#!/usr/bin/env bash
# Run the embedded demo: the scheduler loop (the beat schedule, in-process) beside the web server, and a second
# web server for the workload origin: notebooks and services answer only there, on an origin of their own
# (scheduling/workloads/origin.py), never on the portal's.
set -eu
PY=${PY:-.venv/bin/python}
ADDR=${ADDR:-127.0.0.1:8000}
WORKLOAD_ADDR=${WORKLOAD_ADDR:-127.0.0.1:8001}
export GPUPORTAL_WORKLOAD_ORIGIN=${GPUPORTAL_WORKLOAD_ORIGIN:-http://$WORKLOAD_ADDR}
"$PY" manage.py scheduler_loop &
LOOP=$!
"$PY" manage.py runserver "$WORKLOAD_ADDR" --noreload &
WORKLOADS=$!
# on the way out, the loop, the workload server and the notebook and service stand-ins of the simulated cluster
# stop too
trap 'kill $LOOP $WORKLOADS 2>/dev/null || true; "$PY" manage.py shell -c "from scheduling.executors.simulated import serving; serving.stop_all()" >/dev/null 2>&1 || true' EXIT INT TERM
cat <<MSG

  GPU Portal demo: http://$ADDR/   (API docs: http://$ADDR/api/docs/)
  Notebooks and services: $GPUPORTAL_WORKLOAD_ORIGIN/   (an origin of their own; open them from the portal)
  Logins, password "demo":
    alice  researcher, tenant vision      bob    researcher, tenant nlp
    carol  approver + researcher, vision  erin   researcher, tenant speech
    frank  tenant admin, nlp              dave   manager (all tenants, read-only)
    admin  platform admin (all tenants, read-write; Django admin at /admin/)
  Django's technical error pages instead of the portal's own: DEBUG=1 make demo.
  Stop with Ctrl-C.

MSG
"$PY" manage.py runserver "$ADDR" --noreload
