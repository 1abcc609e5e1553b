"""What one service process holds: its settings, the catalog (and credential) store, the
engine that runs executions, and the credential cipher."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from noetlc.runtime.catalog import CatalogStore
from noetlc.runtime.credentials import Cipher, StoreCredentials
from noetlc.service.engine import Engine
from noetlc.service.limits import Limits

PROGRESS_KEPT = 1024


@dataclass
class Settings:
    db: str = "sqlite:///.noetl/noetl.db"
    token: str | None = None
    credential_key: bytes | None = None
    # where the key came from, named in NOE874 when a stored value does not decrypt
    key_source: str = "the key given to the service"
    # `GET /api/credentials/{name}?include_data=true` returns the value only when the
    # service was started to allow it (`--credential-values`)
    allow_credential_values: bool = False
    keychain_file: str | None = None
    # embedded: finish the executions a previous service on this store left running
    resume: bool = True
    # Host names served besides the loopback names (`*`: any); see service/guard.py
    allowed_hosts: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    # python and shell tasks (and plugins that ask) run in runner processes while the service
    # is open, however it was made (`serve`, or `create_app` in another program); False only
    # for an embedding that trusts every playbook it runs (docs/runtime.md, "Task isolation")
    isolate_tasks: bool = True


@dataclass
class Service:
    settings: Settings
    catalog: CatalogStore
    engine: Engine
    cipher: Cipher | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    # the status of running executions, folded incrementally from their events (the NoETL
    # client polls it): the last PROGRESS_KEPT asked for, most recent last
    progress: dict[str, Any] = field(default_factory=dict)
    progress_lock: threading.Lock = field(default_factory=threading.Lock)
    # this service holds the task isolation mode (`isolation.hold`) until it is closed
    isolating: bool = False

    @classmethod
    def open(cls, settings: Settings) -> Service:
        from noetlc.runtime.store_url import open_catalog

        engine = Engine(settings.db, keychain_file=settings.keychain_file)
        try:
            catalog = open_catalog(settings.db)
        except Exception:
            engine.close()
            raise
        cipher = Cipher(settings.credential_key) if settings.credential_key else None
        service = cls(settings, catalog, engine, cipher)
        if settings.isolate_tasks:
            from noetlc.stdlib_tools import isolation

            isolation.hold()  # before resuming: a resumed execution runs task code too
            service.isolating = True
        if cipher is not None:
            engine.credentials = StoreCredentials(catalog, cipher, settings.key_source)
        if settings.resume:
            try:
                engine.resume_orphans(set(catalog.origins()))
            except BaseException:
                service.close()
                raise
        return service

    def close(self) -> None:
        try:
            self.engine.close()
        finally:
            self.catalog.close()
            if self.isolating:
                from noetlc.stdlib_tools import isolation

                self.isolating = False
                isolation.release()
