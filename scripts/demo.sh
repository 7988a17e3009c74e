#!/usr/bin/env bash
# Run the embedded demo: the scheduler loop (the beat schedule, in-process) beside the web server.
set -eu
PY=${PY:-.venv/bin/python}
ADDR=${ADDR:-127.0.0.1:8000}
"$PY" manage.py scheduler_loop &
LOOP=$!
# on the way out, the loop and the notebook and service stand-ins of the simulated cluster stop too
trap 'kill $LOOP 2>/dev/null || true; "$PY" manage.py shell -c "from scheduling.executors import simulated_serving; simulated_serving.stop_all()" >/dev/null 2>&1 || true' EXIT INT TERM
cat <<MSG

  GPU Portal demo: http://$ADDR/   (API docs: http://$ADDR/api/docs/)
  Logins, password "demo":
    alice  researcher, tenant vision      bob    researcher, tenant nlp
    carol  approver + researcher, vision  erin   researcher, tenant speech
    frank  tenant admin, nlp              dave   manager (all tenants, read-only)
    admin  platform admin (all tenants, read-write; Django admin at /admin/)
  Stop with Ctrl-C.

MSG
"$PY" manage.py runserver "$ADDR" --noreload
