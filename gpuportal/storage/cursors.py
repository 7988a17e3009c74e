"""The PostgreSQL cursor the portal's connections use (``settings.base.postgresql_options``).

Parameters are sent apart from the SQL (server-side binding), so that psycopg can prepare a statement that a
connection runs again and again: PostgreSQL then plans it once, or keeps a generic plan, instead of planning it
at every request (a job's page: 1.5 ms to plan its main query, 0.14 ms to run it).

The wire protocol carries at most 65,535 parameters per statement, and the scheduling pass at 100,000 waiting
jobs sends larger lists (``pk IN (…)``, ``UPDATE … FROM (VALUES …)``). Such a statement is merged on the client,
as Django's default cursor does for every statement, with the connection's own adapters: the same SQL reaches
the server, and it is never prepared (its text is new each time anyway).

Only psycopg is imported here: the settings import this module before Django is set up.
"""

from __future__ import annotations

from psycopg import ClientCursor, Cursor

#: The most parameters a statement sends apart from its SQL (the protocol's 16-bit count, with a margin).
MAX_BOUND_PARAMETERS = 60_000


class BoundCursor(Cursor):
    """A server-binding cursor that merges a statement with more than ``MAX_BOUND_PARAMETERS`` parameters into its
    SQL on the client."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        if params is not None and len(params) > MAX_BOUND_PARAMETERS:
            query, params = ClientCursor(self.connection).mogrify(query, params), None
        return super().execute(query, params, prepare=prepare, binary=binary)
