"""Credentials: create (upsert by name), list, get, delete. Values are encrypted at rest
(service/credentials.py); list and get never return them unless `include_data=true` is asked
and the service allows it (`--no-credential-values` forbids it: 403 NOE876). Every value read
is recorded (who, which execution, when); `GET /api/credentials/{name}/reads` lists them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, Request
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from noetlc.service.deps import ServiceDep
from noetlc.service.errors import FORBIDDEN, ApiError, error_responses, not_found
from noetlc.service.routes_catalog import (
    PAGE,
    PAGE_SIZE,
    Pagination,
    page_size_of,
    pagination,
)
from noetlc.service.state import Service

router = APIRouter(prefix="/api/credentials", tags=["credentials"], responses=error_responses())


class CredentialRequest(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    name: str = Field(min_length=1, pattern=r"\S")
    type: str = Field(default="generic", validation_alias=AliasChoices("type", "credential_type"))
    data: dict[str, Any]
    meta: dict[str, Any] | None = None
    tags: list[str] | str | None = None
    description: str | None = None

    @field_validator("name")
    @classmethod
    def _trim(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("name must not be blank")
        return value


class CredentialView(BaseModel):
    id: str
    name: str
    type: str
    meta: Any = None
    tags: list[str] | None = None
    description: str | None = None
    created_at: str
    updated_at: str
    data: Any = None  # with include_data=true, where the service allows it


class CredentialList(BaseModel):
    items: list[CredentialView]
    filter: dict[str, str | None]
    pagination: Pagination


class Read(BaseModel):
    who: str
    execution_id: str | None = None
    at: str


class Reads(BaseModel):
    name: str
    reads: list[Read]
    pagination: Pagination


class CredentialDeleted(BaseModel):
    message: str
    id: str
    name: str


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat()


def public(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(record["id"]),
        "name": record["name"],
        "type": record["type"],
        "meta": record["meta"],
        "tags": record["tags"],
        "description": record["description"],
        "created_at": _iso(record["created_at"]),
        "updated_at": _iso(record["updated_at"]),
    }


def cipher_of(service: Service) -> Any:
    if service.cipher is None:
        raise ApiError(
            503,
            "NOE874",
            "this service has no credential key",
            "start `noetl-vm serve` with NOETL_CREDENTIAL_KEY or --credential-key-file",
        )
    return service.cipher


@router.post("", response_model=CredentialView, response_model_exclude_none=True)
def create(body: CredentialRequest, service: ServiceDep) -> CredentialView:
    service = service
    sealed = cipher_of(service).seal(body.name, body.data)
    tags = body.tags
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    stored = service.catalog.put_credential(
        body.name, body.type, sealed, body.meta, list(tags or []), body.description
    )
    return CredentialView(**public(stored))


@router.get("", response_model=CredentialList, response_model_exclude_none=True)
def list_credentials(
    service: ServiceDep,
    type: str | None = None,
    q: str | None = None,
    page: int = PAGE,
    page_size: int | None = PAGE_SIZE,
) -> CredentialList:
    service = service
    size = page_size_of(service, page_size)
    items = service.catalog.credentials(type, q)
    chunk = items[(page - 1) * size : page * size]
    return CredentialList(
        items=[CredentialView(**public(r)) for r in chunk],
        filter={"type": type, "q": q},
        pagination=pagination(page, size, len(items)),
    )


@router.get("/{key}", response_model=CredentialView, response_model_exclude_none=True)
def get_credential(
    key: str,
    request: Request,
    service: ServiceDep,
    include_data: bool = False,
    execution_id: str | None = None,
    catalog_id: str | None = None,
    parent_execution_id: str | None = None,
) -> CredentialView:
    found = service.catalog.credential(key)
    if found is None:
        raise not_found("Credential not found", "GET /api/credentials lists them")
    out = public(found)
    if include_data:
        if not service.settings.allow_credential_values:
            raise ApiError(
                403,
                FORBIDDEN,
                "this service does not return credential values",
                "playbooks read them through the keychain; the value is never sent back",
            )
        out["data"] = open_value(service, found)
        who = "api:" + (request.client.host if request.client else "unknown")
        service.catalog.record_read(found, who, execution_id)
    return CredentialView(**out)


@router.get("/{key}/reads", response_model=Reads)
def reads(
    key: str,
    service: ServiceDep,
    page: int = PAGE,
    page_size: int | None = PAGE_SIZE,
) -> Reads:
    service = service
    size = page_size_of(service, page_size)
    found = service.catalog.credential(key)
    if found is None:
        raise not_found("Credential not found")
    rows = service.catalog.reads(found["name"])
    chunk = rows[(page - 1) * size : page * size]
    return Reads(
        name=found["name"],
        reads=[Read(who=r["who"], execution_id=r["execution_id"], at=_iso(r["ts"])) for r in chunk],
        pagination=pagination(page, size, len(rows)),
    )


@router.delete("/{key}", response_model=CredentialDeleted)
def delete(key: str, service: ServiceDep) -> CredentialDeleted:
    found = service.catalog.delete_credential(key)
    if found is None:
        raise not_found("Credential not found")
    return CredentialDeleted(
        message="Credential deleted successfully", id=str(found["id"]), name=found["name"]
    )


def open_value(service: Service, found: dict[str, Any]) -> Any:
    """A stored value, decrypted; a key that does not open it is NOE874 naming where the
    service's key came from (not a 500 InvalidTag)."""
    try:
        return cipher_of(service).open(found["name"], found["data"])
    except Exception as exc:  # cryptography's InvalidTag, or a value that is no JSON
        raise ApiError(
            409,
            "NOE874",
            f"credential '{found['name']}' cannot be decrypted with this service's key"
            f" ({service.settings.key_source}): {type(exc).__name__}",
            "start the service with the key the credential was stored with, or store the"
            " credential again",
        ) from None
