"""Open an event store by URL: memory, SQLite (embedded) or PostgreSQL (distributed).

Its own module, above `event_store.py` (memory and SQLite) and `postgres/` (which builds its store on
`event_store.py`'s interface), so neither of those imports the other.
"""

from __future__ import annotations

from noetlc.runtime.catalog import CatalogStore, SQLiteCatalog
from noetlc.runtime.event_store import EventStore, MemoryStore, SQLiteStore, StoreError


def open_store(url: str) -> EventStore:
    """`memory:` or `sqlite:///relative/or//absolute/path.db`; anything else is NOE803."""
    if url in ("memory:", "memory://"):
        return MemoryStore()
    if url.startswith("sqlite:///"):
        return SQLiteStore(url[len("sqlite:///") :] or ":memory:")
    if url.startswith(("postgresql://", "postgres://")):
        from noetlc.runtime.postgres.event_store import PostgresStore  # asyncpg only when asked

        return PostgresStore(url)
    raise StoreError(
        "NOE803", f"unsupported store URL {url!r}", "use sqlite:///path/to/file.db or memory:"
    )


def open_catalog(url: str) -> CatalogStore:
    """The service tables (catalog, credentials, variables) of the store at `url`: the same
    SQLite file as the event log, a private in-memory database for `memory:`, or the
    PostgreSQL database; anything else is NOE803."""
    if url in ("memory:", "memory://"):
        return SQLiteCatalog(":memory:")
    if url.startswith("sqlite:///"):
        return SQLiteCatalog(url[len("sqlite:///") :] or ":memory:")
    if url.startswith(("postgresql://", "postgres://")):
        from noetlc.runtime.postgres.catalog import PostgresCatalog  # asyncpg only when asked

        return PostgresCatalog(url)
    raise StoreError(
        "NOE803", f"unsupported store URL {url!r}", "use sqlite:///path/to/file.db or memory:"
    )
