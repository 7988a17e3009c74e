#!/usr/bin/env bash
# Restore a backup into a new, empty database and verify the audit chain:
#   createdb gpuportal_restored   (or the database the portal will use)
#   DATABASE_URL=postgres://…/gpuportal_restored scripts/restore-db.sh FILE
# Refuses a database that already has tables: a restore never merges into live data. The roles the dump
# names (the portal's login and the audit owner of `manage.py audit_db_roles`) must exist on the server.
# Runs `manage.py verify_audit` on the result with this environment's audit key: exit 0 only if intact.
set -euo pipefail
: "${DATABASE_URL:?set DATABASE_URL to the (empty) database to restore into}"
in=${1:?usage: scripts/restore-db.sh FILE}
PY=${PY:-.venv/bin/python}
tables=$(psql "$DATABASE_URL" -Atc "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
if [ "$tables" != "0" ]; then
  echo "refusing to restore: the database already has $tables tables; restore into a new, empty database" >&2
  exit 2
fi
pg_restore --no-password --exit-on-error --dbname="$DATABASE_URL" "$in"
echo "restored $in into $(psql "$DATABASE_URL" -Atc 'SELECT current_database()')"
"$PY" manage.py migrate --check >/dev/null || echo "note: migrations are pending for this version (run manage.py migrate)"
"$PY" manage.py verify_audit
