#!/usr/bin/env bash
# The node agent's NVML readings against `nvidia-smi -q -x` on this machine, field by field, and the time of a
# snapshot: prints JSON and rewrites docs/device-check.md (nodeagent/devicecheck.py does the work).
# Needs only this repository and a Python with nvidia-ml-py: PYTHON, else .venv/bin/python, else python3.
# Exit status: 0 every field matches, 1 some field does not, 2 the check could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
exec "$PYTHON" -m nodeagent.devicecheck --markdown docs/device-check.md "$@"
