#!/usr/bin/env bash
# Back up the portal's database: DATABASE_URL=postgres://… scripts/backup-db.sh FILE
# One consistent snapshot (pg_dump's own transaction), custom format (compressed; restored selectively if
# need be). Keep the audit key (GPUPORTAL_AUDIT_KEY[_FILE]) and the exported audit heads with the backup but
# NOT in the same place: the key verifies the restored audit chain (docs/operations.md, "Backup and restore").
set -euo pipefail
: "${DATABASE_URL:?set DATABASE_URL to the database of the portal, postgres://user@host:port/name}"
out=${1:?usage: scripts/backup-db.sh FILE}
pg_dump --format=custom --no-password --file="$out" "$DATABASE_URL"
echo "backed up $(psql "$DATABASE_URL" -Atc 'SELECT current_database()') to $out ($(stat -c %s "$out") bytes)"
