"""Credentials: create (upsert by name), list, get, delete. Values are encrypted at rest
(service/credentials.py); list and get never return them unless `include_data=true` is asked
and the service allows it (`--no-credential-values` forbids it: 403 NOE876). Every value read
is recorded (who, which execution, when); `GET /api/credentials/{name}/reads` lists them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, Request
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from noetlc.service.errors import FORBIDDEN, ApiError, error_responses, not_found
from noetlc.service.routes_catalog import service_of
from noetlc.service.state import Service

router = APIRouter(prefix="/api/credentials", tags=["credentials"], responses=error_responses())


class CredentialRequest(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    name: str = Field(min_length=1)
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


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat()


def public(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": record["id"],
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


@router.post("")
def create(body: CredentialRequest, request: Request) -> dict[str, Any]:
    service = service_of(request)
    sealed = cipher_of(service).seal(body.name, body.data)
    tags = body.tags
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    stored = service.catalog.put_credential(
        body.name, body.type, sealed, body.meta, list(tags or []), body.description
    )
    return public(stored)


@router.get("")
def list_credentials(
    request: Request, type: str | None = None, q: str | None = None
) -> dict[str, Any]:
    items = service_of(request).catalog.credentials(type, q)
    return {"items": [public(r) for r in items], "filter": {"type": type, "q": q}}


@router.get("/{key}")
def get_credential(
    key: str,
    request: Request,
    include_data: bool = False,
    execution_id: str | None = None,
    catalog_id: str | None = None,
    parent_execution_id: str | None = None,
) -> dict[str, Any]:
    service = service_of(request)
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
        out["data"] = cipher_of(service).open(found["name"], found["data"])
        who = "api:" + (request.client.host if request.client else "unknown")
        service.catalog.record_read(found, who, execution_id)
    return out


@router.get("/{key}/reads")
def reads(key: str, request: Request) -> dict[str, Any]:
    service = service_of(request)
    found = service.catalog.credential(key)
    if found is None:
        raise not_found("Credential not found")
    rows = service.catalog.reads(found["name"])
    return {
        "name": found["name"],
        "reads": [
            {"who": r["who"], "execution_id": r["execution_id"], "at": _iso(r["ts"])} for r in rows
        ],
    }


@router.delete("/{key}")
def delete(key: str, request: Request) -> dict[str, Any]:
    found = service_of(request).catalog.delete_credential(key)
    if found is None:
        raise not_found("Credential not found")
    return {"message": "Credential deleted successfully", "id": found["id"], "name": found["name"]}
