"""The service tables (catalog, credentials, credential reads, variables) in the PostgreSQL
database of distributed mode, behind the synchronous `CatalogStore` interface
(runtime/catalog.py): each call runs on a private event loop thread with a small pool.

Registering serializes per path with a transaction advisory lock, so API processes running at
the same time never hand out one version twice.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from noetlc.runtime.catalog import (
    credential_record,
    digest,
    entry_record,
    snowflake,
    var_record,
)
from noetlc.runtime.postgres.connect import PgUrl, connect, create_pool, parse_url
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.postgres.migrate import require_current
from noetlc.runtime.postgres.queries import q
from noetlc.runtime.store import StoreError

T = TypeVar("T")


class PostgresCatalog:
    def __init__(self, url: str | PgUrl) -> None:
        self.url = parse_url(url) if isinstance(url, str) else url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        try:
            self._pool: asyncpg.Pool = self._call(self._open)
        except DatabaseError as exc:
            self._stop()
            raise StoreError(exc.code, str(exc), exc.hint) from None

    async def _open(self) -> asyncpg.Pool:
        conn = await connect(self.url)
        try:
            await require_current(conn, self.url.schema)
        finally:
            await conn.close()
        return await create_pool(self.url, min_size=1, max_size=4)

    def _call(self, make: Callable[[], Awaitable[T]]) -> T:
        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def _fetch(self, name: str, *args: Any) -> list[asyncpg.Record]:
        return self._call(lambda: self._pool.fetch(q(name), *args))

    def _execute(self, name: str, *args: Any) -> int:
        status: str = self._call(lambda: self._pool.execute(q(name), *args))
        return int(status.rsplit(" ", 1)[-1]) if status[-1:].isdigit() else 0

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

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

        async def run() -> tuple[str, bool]:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(q("catalog_lock_path"), path)
                same = await conn.fetchval(q("catalog_same_content"), path, key)
                if same is not None:
                    return str(same), False
                version = await conn.fetchval(q("catalog_next_version"), path)
                catalog_id = snowflake()
                await conn.execute(
                    q("catalog_insert"),
                    catalog_id,
                    path,
                    version,
                    kind,
                    key,
                    content,
                    json.dumps(payload, default=str),
                    program,
                    json.dumps(findings, default=str),
                    time.time(),
                )
                return catalog_id, True

        catalog_id, created = self._call(run)
        found = self.entry(catalog_id=catalog_id)
        assert found is not None
        return found, created

    def entries(self, kind: str | None = None, path: str | None = None) -> list[dict[str, Any]]:
        return [entry_record(list(r)) for r in self._fetch("catalog_entries", kind, path)]

    def entry(
        self, path: str | None = None, version: int | None = None, catalog_id: str | None = None
    ) -> dict[str, Any] | None:
        if catalog_id is not None:
            rows = self._fetch("catalog_entry_by_id", str(catalog_id))
        else:
            rows = self._fetch("catalog_entry_by_path", path, version)
        return entry_record(list(rows[0])) if rows else None

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
            snowflake(),
            name,
            type_,
            data,
            None if meta is None else json.dumps(meta, default=str),
            json.dumps(tags),
            description,
            now,
            now,
        )
        found = self.credential(name)
        assert found is not None
        return found

    def credentials(self, type_: str | None = None, q: str | None = None) -> list[dict[str, Any]]:
        like = None if not q else f"%{q.lower()}%"
        return [credential_record(list(r)) for r in self._fetch("credential_list", type_, like)]

    def credential(self, key: str) -> dict[str, Any] | None:
        rows = self._fetch("credential_by_id" if key.isdigit() else "credential_by_name", key)
        if not rows and key.isdigit():
            rows = self._fetch("credential_by_name", key)
        return credential_record(list(rows[0])) if rows else None

    def delete_credential(self, key: str) -> dict[str, Any] | None:
        found = self.credential(key)
        if found is not None:
            self._execute("credential_delete", found["id"])
        return found

    def record_read(self, credential: dict[str, Any], who: str, execution_id: str | None) -> None:
        self._execute(
            "credential_record_read",
            credential["id"],
            credential["name"],
            who,
            execution_id,
            time.time(),
        )

    def reads(self, name: str) -> list[dict[str, Any]]:
        return [
            {"credential_id": r[0], "name": r[1], "who": r[2], "execution_id": r[3], "ts": r[4]}
            for r in self._fetch("credential_reads", name)
        ]

    # ------------------------------------------------------------------ variables

    def set_vars(
        self, execution_id: str, values: dict[str, Any], var_type: str, source_step: str | None
    ) -> list[str]:
        now = time.time()
        for name, value in values.items():
            self._execute(
                "var_set",
                execution_id,
                name,
                json.dumps(value, default=str),
                var_type,
                source_step,
                now,
            )
        return list(values)

    def vars(self, execution_id: str) -> dict[str, dict[str, Any]]:
        return {r[0]: var_record(list(r)) for r in self._fetch("var_list", execution_id)}

    def var(self, execution_id: str, name: str) -> dict[str, Any] | None:
        rows = self._fetch("var_touch", execution_id, name, time.time())
        return var_record(list(rows[0])) if rows else None

    def delete_var(self, execution_id: str, name: str) -> bool:
        return self._execute("var_delete", execution_id, name) > 0

    def delete_vars(self, execution_id: str) -> int:
        return self._execute("var_delete_all", execution_id)

    # ------------------------------------------------------------------ origins

    def record_origin(
        self, execution_id: str, catalog_id: str | None, path: str | None, version: int | None
    ) -> None:
        self._execute("origin_record", execution_id, catalog_id, path, version)

    def origins(self) -> dict[str, dict[str, Any]]:
        return {
            r[0]: {"catalog_id": r[1], "path": r[2], "version": r[3]}
            for r in self._fetch("origin_list")
        }

    def origin(self, execution_id: str) -> dict[str, Any] | None:
        rows = self._fetch("origin_one", execution_id)
        return (
            {"catalog_id": rows[0][1], "path": rows[0][2], "version": rows[0][3]} if rows else None
        )

    def close(self) -> None:
        try:
            self._call(self._pool.close)
        finally:
            self._stop()
