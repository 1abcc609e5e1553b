"""What one service process holds: its settings, the catalog (and credential) store, the
engine that runs executions, and the credential cipher."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from noetlc.runtime.catalog import CatalogStore
from noetlc.runtime.credentials import Cipher, StoreCredentials
from noetlc.service.engine import Engine


@dataclass
class Settings:
    db: str = "sqlite:///.noetl/noetl.db"
    token: str | None = None
    credential_key: bytes | None = None
    # `GET /api/credentials/{name}?include_data=true` returns the value only when allowed
    allow_credential_values: bool = True
    keychain_file: str | None = None
    # embedded: finish the executions a previous service on this store left running
    resume: bool = True


@dataclass
class Service:
    settings: Settings
    catalog: CatalogStore
    engine: Engine
    cipher: Cipher | None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, settings: Settings) -> Service:
        from noetlc.runtime.stores import open_catalog

        engine = Engine(settings.db, keychain_file=settings.keychain_file)
        try:
            catalog = open_catalog(settings.db)
        except Exception:
            engine.close()
            raise
        cipher = Cipher(settings.credential_key) if settings.credential_key else None
        service = cls(settings, catalog, engine, cipher)
        if cipher is not None:
            engine.credentials = StoreCredentials(catalog, cipher)
        if settings.resume:
            engine.resume_orphans(set(catalog.origins()))
        return service

    def close(self) -> None:
        try:
            self.engine.close()
        finally:
            self.catalog.close()
