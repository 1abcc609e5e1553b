"""The service's tables behind one interface: the playbook catalog, credentials, their read
log, and per-execution variables.

`open_catalog(url)` takes the event store's URL: `sqlite:///FILE` keeps them in the same file
as the event log (so a `kind: playbook` task of an embedded run finds catalog entries beside
its events), `memory:` in a private in-memory SQLite database (the test double, same SQL),
`postgresql://...` in the distributed database (runtime/postgres/catalog.py).

Catalog: entries are keyed by (path, version). Registering content that the path already
holds returns that entry (same content, same version); new content gets the next version.
Each entry keeps the source text, the parsed document, the compiled program and the lint
findings. Ids (`catalog_id`, credential `id`) are 64-bit snowflake integers written in decimal.

Credentials: the store holds only ciphertext (the service encrypts before `put_credential`);
every read of a value is recorded (who, which execution, when) with `record_read`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from noetlc.runtime.event_store import StoreError, ensure_sqlite_folder
from noetlc.runtime.ids import snowflake
from noetlc.runtime.sql_files import q


def digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class CatalogStore(Protocol):
    def register(
        self,
        path: str,
        kind: str,
        content: str,
        payload: Any,
        program: bytes | None,
        findings: list[dict[str, Any]],
    ) -> tuple[dict[str, Any], bool]: ...
    def entries(self, kind: str | None = None, path: str | None = None) -> list[dict[str, Any]]: ...
    def summaries(
        self, kind: str | None, path: str | None, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]: ...
    def delete_entry(self, catalog_id: str) -> bool: ...
    def delete_path(self, path: str) -> int: ...
    def entry(
        self, path: str | None = None, version: int | None = None, catalog_id: str | None = None
    ) -> dict[str, Any] | None: ...
    def put_credential(
        self,
        name: str,
        type_: str,
        data: bytes,
        meta: Any,
        tags: list[str],
        description: str | None,
    ) -> dict[str, Any]: ...
    def credentials(
        self, type_: str | None = None, q: str | None = None
    ) -> list[dict[str, Any]]: ...
    def credential(self, key: str) -> dict[str, Any] | None: ...
    def delete_credential(self, key: str) -> dict[str, Any] | None: ...
    def record_read(
        self, credential: dict[str, Any], who: str, execution_id: str | None
    ) -> None: ...
    def reads(self, name: str) -> list[dict[str, Any]]: ...
    def set_vars(
        self, execution_id: str, values: dict[str, Any], var_type: str, source_step: str | None
    ) -> list[str]: ...
    def vars(self, execution_id: str) -> dict[str, dict[str, Any]]: ...
    def var(self, execution_id: str, name: str) -> dict[str, Any] | None: ...
    def delete_var(self, execution_id: str, name: str) -> bool: ...
    def delete_vars(self, execution_id: str) -> int: ...
    def record_origin(
        self, execution_id: str, catalog_id: str | None, path: str | None, version: int | None
    ) -> None: ...
    def origins(self) -> dict[str, dict[str, Any]]: ...
    def origin(self, execution_id: str) -> dict[str, Any] | None: ...
    def close(self) -> None: ...


def entry_record(row: Sequence[Any]) -> dict[str, Any]:
    """A catalog row (catalog_id, path, version, kind, content, payload, findings, created_at
    [, program]) as the API gives it."""
    record: dict[str, Any] = {
        "catalog_id": str(row[0]),
        "path": row[1],
        "version": int(row[2]),
        "kind": row[3],
        "content": row[4],
        "payload": json.loads(row[5]) if isinstance(row[5], str) else row[5],
        "findings": json.loads(row[6]) if isinstance(row[6], str) else row[6],
        "created_at": float(row[7]),
    }
    if len(row) > 8:
        record["program"] = None if row[8] is None else bytes(row[8])
    return record


def credential_record(row: Sequence[Any]) -> dict[str, Any]:
    return {
        "id": str(row[0]),
        "name": row[1],
        "type": row[2],
        "data": bytes(row[3]),
        "meta": json.loads(row[4]) if isinstance(row[4], str) else row[4],
        "tags": json.loads(row[5]) if isinstance(row[5], str) else list(row[5] or []),
        "description": row[6],
        "created_at": float(row[7]),
        "updated_at": float(row[8]),
    }


def var_record(row: Sequence[Any]) -> dict[str, Any]:
    return {
        "value": json.loads(row[1]),
        "type": row[2],
        "source_step": row[3],
        "created_at": float(row[4]),
        "accessed_at": None if row[5] is None else float(row[5]),
        "access_count": int(row[6]),
    }


class CatalogTables(ABC):
    """What every catalog store does, over two primitives a backend gives: `_fetch(query,
    **params)` (rows of a named query) and `_execute(query, **params)` (rows affected), plus
    `_insert_version` for the one step that needs a transaction. Both backends name their
    statements alike (runtime/sql/catalog.sql, runtime/postgres/sql/catalog.sql); SQLite binds
    the parameters by name, PostgreSQL (asyncpg: `$1`, `$2`, ...) in the order they are passed,
    so every call passes them in the order of the PostgreSQL statement."""

    @abstractmethod
    def _fetch(self, query: str, /, **params: Any) -> list[Sequence[Any]]:
        """The rows of the named statement."""

    @abstractmethod
    def _execute(self, query: str, /, **params: Any) -> int:
        """Run the named statement; the rows it affected."""

    @abstractmethod
    def _insert_version(
        self, path: str, key: str, row: Callable[[str, int], dict[str, Any]]
    ) -> tuple[str, bool]:
        """Under the path's lock: the id of the entry holding content `key` already, or a new
        entry `row(catalog_id, version)` at the next version; and whether it is new."""

    # ------------------------------------------------------------------ catalog

    def register(
        self,
        path: str,
        kind: str,
        content: str,
        payload: Any,
        program: bytes | None,
        findings: list[dict[str, Any]],
    ) -> tuple[dict[str, Any], bool]:
        key = digest(content)
        payload_text = json.dumps(payload, default=str)
        findings_text = json.dumps(findings, default=str)

        def row(catalog_id: str, version: int) -> dict[str, Any]:
            return {
                "catalog_id": catalog_id,
                "path": path,
                "version": version,
                "kind": kind,
                "digest": key,
                "content": content,
                "payload": payload_text,
                "program": program,
                "findings": findings_text,
                "created_at": time.time(),
            }

        catalog_id, created = self._insert_version(path, key, row)
        found = self.entry(catalog_id=catalog_id)
        assert found is not None
        return found, created

    def entries(self, kind: str | None = None, path: str | None = None) -> list[dict[str, Any]]:
        return [entry_record(r) for r in self._fetch("catalog_entries", kind=kind, path=path)]

    def summaries(
        self, kind: str | None, path: str | None, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of entries without their content (newest first), and how many match."""
        rows = self._fetch("catalog_summaries", kind=kind, path=path, limit=limit, offset=offset)
        total = int(self._fetch("catalog_count", kind=kind, path=path)[0][0])
        page = [
            {
                "catalog_id": str(r[0]),
                "path": r[1],
                "version": int(r[2]),
                "kind": r[3],
                "created_at": float(r[4]),
                "content_bytes": int(r[5] or 0),
                "findings_count": len(json.loads(r[6]) if isinstance(r[6], str) else r[6] or []),
            }
            for r in rows
        ]
        return page, total

    def delete_entry(self, catalog_id: str) -> bool:
        """Delete one version. Executions keep the program they ran (it is stored with each
        execution), and their origin still names the deleted version."""
        return self._execute("catalog_delete_entry", catalog_id=str(catalog_id)) > 0

    def delete_path(self, path: str) -> int:
        """Delete every version of a path; how many there were."""
        return self._execute("catalog_delete_path", path=path)

    def entry(
        self, path: str | None = None, version: int | None = None, catalog_id: str | None = None
    ) -> dict[str, Any] | None:
        if catalog_id is not None:
            rows = self._fetch("catalog_entry_by_id", catalog_id=str(catalog_id))
        else:
            rows = self._fetch("catalog_entry_by_path", path=path, version=version)
        return entry_record(rows[0]) if rows else None

    # ------------------------------------------------------------------ credentials

    def put_credential(
        self,
        name: str,
        type_: str,
        data: bytes,
        meta: Any,
        tags: list[str],
        description: str | None,
    ) -> dict[str, Any]:
        now = time.time()
        self._execute(
            "credential_upsert",
            id=snowflake(),
            name=name,
            type=type_,
            data=data,
            meta=None if meta is None else json.dumps(meta, default=str),
            tags=json.dumps(tags),
            description=description,
            created_at=now,
            updated_at=now,
        )
        found = self.credential(name)
        assert found is not None
        return found

    def credentials(self, type_: str | None = None, q: str | None = None) -> list[dict[str, Any]]:
        like = None if not q else f"%{q.lower()}%"
        return [credential_record(r) for r in self._fetch("credential_list", type=type_, like=like)]

    def credential(self, key: str) -> dict[str, Any] | None:
        rows = self._fetch("credential_by_id", id=key) if key.isdigit() else []
        if not rows:  # a name, or a name made of digits
            rows = self._fetch("credential_by_name", name=key)
        return credential_record(rows[0]) if rows else None

    def delete_credential(self, key: str) -> dict[str, Any] | None:
        found = self.credential(key)
        if found is not None:
            self._execute("credential_delete", id=found["id"])
        return found

    def record_read(self, credential: dict[str, Any], who: str, execution_id: str | None) -> None:
        self._execute(
            "credential_record_read",
            credential_id=credential["id"],
            name=credential["name"],
            who=who,
            execution_id=execution_id,
            ts=time.time(),
        )

    def reads(self, name: str) -> list[dict[str, Any]]:
        return [
            {"credential_id": r[0], "name": r[1], "who": r[2], "execution_id": r[3], "ts": r[4]}
            for r in self._fetch("credential_reads", name=name)
        ]

    # ------------------------------------------------------------------ variables

    def set_vars(
        self, execution_id: str, values: dict[str, Any], var_type: str, source_step: str | None
    ) -> list[str]:
        now = time.time()
        for name, value in values.items():
            self._execute(
                "var_set",
                execution_id=execution_id,
                name=name,
                value=json.dumps(value, default=str),
                type=var_type,
                source_step=source_step,
                created_at=now,
            )
        return list(values)

    def vars(self, execution_id: str) -> dict[str, dict[str, Any]]:
        return {r[0]: var_record(r) for r in self._fetch("var_list", execution_id=execution_id)}

    def var(self, execution_id: str, name: str) -> dict[str, Any] | None:
        """A variable's record, counting the read."""
        rows = self._fetch("var_touch", execution_id=execution_id, name=name, now=time.time())
        return var_record(rows[0]) if rows else None

    def delete_var(self, execution_id: str, name: str) -> bool:
        return self._execute("var_delete", execution_id=execution_id, name=name) > 0

    def delete_vars(self, execution_id: str) -> int:
        return self._execute("var_delete_all", execution_id=execution_id)

    # ------------------------------------------------------------------ origins

    def record_origin(
        self, execution_id: str, catalog_id: str | None, path: str | None, version: int | None
    ) -> None:
        self._execute(
            "origin_record",
            execution_id=execution_id,
            catalog_id=catalog_id,
            path=path,
            version=version,
        )

    def origins(self) -> dict[str, dict[str, Any]]:
        return {
            r[0]: {"catalog_id": r[1], "path": r[2], "version": r[3]}
            for r in self._fetch("origin_list")
        }

    def origin(self, execution_id: str) -> dict[str, Any] | None:
        """The catalog entry an execution started through the API ran, or None."""
        rows = self._fetch("origin_one", execution_id=execution_id)
        if not rows:
            return None
        return {"catalog_id": rows[0][1], "path": rows[0][2], "version": rows[0][3]}

    @abstractmethod
    def close(self) -> None:
        """Release the connection(s)."""


class SQLiteCatalog(CatalogTables):
    """The catalog tables in a SQLite file (`:memory:`: the in-memory double). One connection
    behind a lock: the service calls it from its worker threads."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        ensure_sqlite_folder(path)
        try:
            from noetlc.runtime.event_store import connect_wal, private_file

            private_file(path)
            self._db = connect_wal(path)
            self._db.executescript(q("catalog_schema"))
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                "NOE803",
                f"cannot open the catalog in {path}: {exc}",
                "check the path and its permissions",
            ) from None

    def _fetch(self, query: str, /, **params: Any) -> list[Sequence[Any]]:
        with self._lock:
            return list(self._db.execute(q(query), params))

    def _execute(self, query: str, /, **params: Any) -> int:
        with self._lock:
            return self._db.execute(q(query), params).rowcount

    def _insert_version(
        self, path: str, key: str, row: Callable[[str, int], dict[str, Any]]
    ) -> tuple[str, bool]:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")  # versions of one path are assigned under the lock
            try:
                same = db.execute(
                    q("catalog_same_content"), {"path": path, "digest": key}
                ).fetchone()
                if same is None:
                    (version,) = db.execute(q("catalog_next_version"), {"path": path}).fetchone()
                    catalog_id = snowflake()
                    db.execute(q("catalog_insert"), row(catalog_id, version))
                else:
                    catalog_id = same[0]
                db.execute("COMMIT")
            except sqlite3.Error:
                db.execute("ROLLBACK")
                raise
        return catalog_id, same is None

    def close(self) -> None:
        self._db.close()
