"""Catalog routes: register (one or a batch), list, one resource, and a playbook's step graph."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from noetlc.service.errors import ApiError, bad_request, error_responses, not_found
from noetlc.service.registry import normalize_kind, public_entry, register
from noetlc.service.state import Service

MAX_VERSION = 2**31 - 1

router = APIRouter(prefix="/api/catalog", tags=["catalog"], responses=error_responses())


class RegisterRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    content: str = Field(description="the file's text: standard base64 of its UTF-8, or plain")
    resource_type: str = "Playbook"


class BatchRequest(BaseModel):
    items: list[RegisterRequest]


class ListRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    resource_type: str | None = None
    path: str | None = None


class ResourceRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    path: str | None = None
    catalog_id: str | int | None = None
    version: int | str | None = None


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def parse_version(version: int | str | None) -> int | None:
    if version is None or version == "latest" or version == "":
        return None
    number: int | None = None
    if isinstance(version, int) and not isinstance(version, bool):
        number = version
    elif isinstance(version, str) and version.isascii() and version.isdigit():
        number = int(version)
    if number is None or not 1 <= number <= MAX_VERSION:
        raise bad_request(
            f"version must be an integer from 1 to {MAX_VERSION} or 'latest', got {version!r}",
            None,
            422,
        )
    return number


def find_entry(
    service: Service, path: str | None, version: int | str | None, catalog_id: Any
) -> dict[str, Any] | None:
    if catalog_id is not None and str(catalog_id) != "":
        return service.catalog.entry(catalog_id=str(catalog_id))
    if not path:
        raise bad_request("catalog_id or path is required", None, 422)
    return service.catalog.entry(path=path, version=parse_version(version))


@router.post("/register")
def register_resource(body: RegisterRequest, request: Request) -> dict[str, Any]:
    service = service_of(request)
    entry, created = register(
        service.catalog, body.content, body.resource_type, service.settings.limits
    )
    verb = "registered" if created else "already registered (same content)"
    return {
        "status": "success",
        "message": f"Resource '{entry['path']}' version '{entry['version']}' {verb}.",
        "path": entry["path"],
        "version": entry["version"],
        "catalog_id": entry["catalog_id"],
        "kind": entry["kind"],
        "created": created,
        "findings": entry["findings"],
    }


@router.post("/register/batch")
def register_batch(body: BatchRequest, request: Request) -> dict[str, Any]:
    service = service_of(request)
    catalog = service.catalog
    results: list[dict[str, Any]] = []
    for index, item in enumerate(body.items):
        try:
            entry, _ = register(catalog, item.content, item.resource_type, service.settings.limits)
        except ApiError as exc:
            results.append(
                {
                    "index": index,
                    "status": "failed",
                    "path": None,
                    "version": None,
                    "error": exc.message,
                    "code": exc.code,
                }
            )
            continue
        results.append(
            {
                "index": index,
                "status": "registered",
                "path": entry["path"],
                "version": entry["version"],
                "catalog_id": entry["catalog_id"],
                "error": None,
            }
        )
    registered = sum(1 for r in results if r["status"] == "registered")
    return {"registered": registered, "failed": len(results) - registered, "results": results}


def _list(service: Service, resource_type: str | None, path: str | None) -> dict[str, Any]:
    kind = normalize_kind(resource_type) if resource_type else None
    entries = service.catalog.entries(kind, path)
    return {"entries": [public_entry(e) for e in entries]}


@router.post("/list")
def list_resources(body: ListRequest, request: Request) -> dict[str, Any]:
    return _list(service_of(request), body.resource_type, body.path)


@router.get("/list/{resource_type}")
def list_resources_of(resource_type: str, request: Request) -> dict[str, Any]:
    return _list(service_of(request), resource_type, None)


@router.get("/list")
def list_all(request: Request, path: str | None = None) -> dict[str, Any]:
    return _list(service_of(request), None, path)


@router.post("/resource")
def get_resource(body: ResourceRequest, request: Request) -> dict[str, Any]:
    entry = find_entry(service_of(request), body.path, body.version, body.catalog_id)
    if entry is None:
        raise not_found("Catalog entry not found", "`noetl-vm catalog list` shows the paths")
    return public_entry(entry)


@router.get("/graph")
def graph(
    request: Request,
    path: str | None = None,
    version: str | None = None,
    catalog_id: str | None = None,
) -> dict[str, Any]:
    """The step graph of a playbook version (the console draws it): steps with their YAML
    line, and arcs."""
    entry = find_entry(service_of(request), path, version, catalog_id)
    if entry is None or entry.get("program") is None:
        raise not_found("Catalog entry not found", "only playbooks have a step graph")
    from noetlc.service.graph import step_graph

    return step_graph(entry["program"])
