"""``manage.py audit_db_roles --app-role gpuportal_app``: the PostgreSQL role the portal runs as.

Run it as the role that runs migrations and owns the tables (``DATABASE_URL="$MIGRATE_DATABASE_URL"``),
after every ``migrate``. The app role may read and write the portal's tables but owns none, so it cannot
switch triggers off; on the audit log it may only INSERT and SELECT (and UPDATE the one head row): UPDATE,
DELETE and TRUNCATE are revoked, which is what keeps a stolen portal login from rewriting the log.
``--sql`` prints the statements instead of running them.
"""

import os
import re

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils.translation import gettext as _
from psycopg import sql as pgsql

from audit.models import AuditChainHead, AuditRecord

ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def grant_statements(role: str, database: str) -> list[str]:
    """The statements, in order; identifiers are quoted, the role name was checked against ``ROLE_NAME``."""
    q = connection.ops.quote_name
    records, head = q(AuditRecord._meta.db_table), q(AuditChainHead._meta.db_table)
    return [
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN "
        f"CREATE ROLE {q(role)} LOGIN; END IF; END $$",
        f"GRANT CONNECT ON DATABASE {q(database)} TO {q(role)}",
        f"GRANT USAGE ON SCHEMA public TO {q(role)}",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {q(role)}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {q(role)}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {q(role)}",
        f"REVOKE UPDATE, DELETE, TRUNCATE ON {records} FROM {q(role)}",
        f"REVOKE DELETE, TRUNCATE ON {head} FROM {q(role)}",
        # Tables of later migrations (made by this role) reach the app too; re-run after migrate for the audit ones.
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {q(role)}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {q(role)}",
    ]


class Command(BaseCommand):
    help = ("Create or update the PostgreSQL role the portal runs as: no table of its own, and only INSERT and "
            "SELECT on the audit log. Run as the migrating role, after every migrate.")

    def add_arguments(self, parser):
        parser.add_argument("--app-role", required=True, help=_("Name of the role the portal connects as."))
        parser.add_argument("--password-env", default="",
                            help=_("Name of an environment variable holding the role's password (optional)."))
        parser.add_argument("--sql", action="store_true", help=_("Print the statements instead of running them."))

    def handle(self, *args, app_role, password_env, sql, **options):
        if not ROLE_NAME.match(app_role):
            raise CommandError(_("--app-role must be 1 to 63 lowercase letters, digits or _, not starting with a "
                                 "digit"))
        if connection.vendor != "postgresql":
            raise CommandError(_("--app-role needs PostgreSQL; this database is %(vendor)s") % {
                "vendor": connection.vendor})
        statements = grant_statements(app_role, connection.settings_dict["NAME"])
        if sql:
            self.stdout.write(";\n".join(statements) + ";")
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            if cursor.fetchone()[0] == app_role:
                raise CommandError(_("--app-role must not be the role running this command (it owns the tables)"))
        with transaction.atomic(), connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
            if password_env:
                password = os.environ.get(password_env, "")
                if not password:
                    raise CommandError(_("--password-env names %(name)s, which is empty") % {"name": password_env})
                # A utility statement takes no bound parameter: the password is quoted into it by psycopg.
                cursor.execute(pgsql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    pgsql.Identifier(app_role), pgsql.Literal(password)).as_string(connection.connection))
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [app_role])
            if cursor.fetchone()[0]:
                raise CommandError(_("%(role)s is a superuser: it could switch the audit triggers off") % {
                    "role": app_role})
            cursor.execute("SELECT c.relname FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
                           "WHERE r.rolname = %s AND c.relkind IN ('r', 'p') ORDER BY 1", [app_role])
            owned = [row[0] for row in cursor.fetchall()]
        if owned:
            raise CommandError(_("%(role)s owns %(tables)s: move them to the migrating role first "
                                 "(REASSIGN OWNED BY %(role)s TO <migrating role>)") % {
                "role": app_role, "tables": ", ".join(owned)})
        self.stdout.write(_("%(role)s may read and write the portal's tables, owns none, and may only insert and "
                            "read audit records") % {"role": app_role})
