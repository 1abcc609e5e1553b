"""Catalog routes: register (one or a batch), list (summaries, paged), one resource, delete
(a version or a path), and a playbook's step graph."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from noetlc.service.deps import CatalogId, ServiceDep
from noetlc.service.errors import (
    ApiError,
    bad_request,
    error_responses,
    not_found,
)
from noetlc.service.models import BatchResult, Entry, Registered, StepGraph
from noetlc.service.registry import normalize_kind, public_entry, register
from noetlc.service.state import Service

MAX_VERSION = 2**31 - 1
VERSION_PATTERN = r"^([0-9]{1,10}|latest)?$"

router = APIRouter(prefix="/api/catalog", tags=["catalog"], responses=error_responses())


class RegisterRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    content: str = Field(
        pattern=r"\S",
        description="the file's text: standard base64 of its UTF-8, or plain (not blank)",
    )
    resource_type: str = "Playbook"


class BatchRequest(BaseModel):
    items: list[RegisterRequest]


class ListRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    resource_type: str | None = None
    path: str | None = None
    page: int = Field(1, ge=1, le=1_000_000)
    page_size: int | None = Field(None, ge=1)
    include_content: StrictBool = False


Version = (
    Annotated[int, Field(ge=1, le=MAX_VERSION)] | Annotated[str, Field(pattern=VERSION_PATTERN)]
)
# a request names an entry by its catalog_id, or by its path (and version)
BY_ID_OR_PATH: dict[str, Any] = {
    "anyOf": [
        {"required": ["path"], "properties": {"path": {"type": "string"}}},
        {"required": ["catalog_id"], "properties": {"catalog_id": {"type": ["string", "integer"]}}},
    ]
}


def by_id_or_path(model: Any) -> Any:
    """The rule BY_ID_OR_PATH states in the schema, enforced (422 NOE872)."""
    if model.path is None and model.catalog_id is None:
        raise ValueError("path or catalog_id is required")
    return model


class ResourceRequest(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra=BY_ID_OR_PATH)
    path: str | None = None
    catalog_id: str | int | None = None
    version: Version | None = None

    _named = model_validator(mode="after")(by_id_or_path)


def parse_version(version: int | str | None) -> int | None:
    if version is None or version == "latest" or version == "":
        return None
    number: int | None = None
    if isinstance(version, int) and not isinstance(version, bool):
        number = version
    elif isinstance(version, str) and version.isascii() and version.isdigit():
        number = int(version)
    if number is None:
        raise bad_request(
            f"version must be an integer from 1 to {MAX_VERSION} or 'latest', got {version!r}",
            None,
            422,
        )
    return number if 1 <= number <= MAX_VERSION else 0  # 0: no version has it (404)


def find_entry(
    service: Service, path: str | None, version: int | str | None, catalog_id: Any
) -> dict[str, Any] | None:
    if catalog_id is not None and str(catalog_id) != "":
        return service.catalog.entry(catalog_id=str(catalog_id))
    if not path:  # names nothing: no entry (the request schemas require one of the two)
        return None
    return service.catalog.entry(path=path, version=parse_version(version))


@router.post("/register", response_model=Registered)
def register_resource(body: RegisterRequest, service: ServiceDep) -> dict[str, Any]:
    service = service
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


@router.post("/register/batch", response_model=BatchResult)
def register_batch(body: BatchRequest, service: ServiceDep) -> dict[str, Any]:
    service = service
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


class CatalogSummary(BaseModel):
    catalog_id: str
    path: str
    version: int
    kind: str
    created_at: str
    content_bytes: int
    findings_count: int
    # with include_content=true only
    content: str | None = None
    payload: Any = None
    findings: list[dict[str, Any]] | None = None


class Pagination(BaseModel):
    page: int
    page_size: int
    total: int
    total_pages: int
    has_next: bool
    has_prev: bool


class CatalogList(BaseModel):
    entries: list[CatalogSummary]
    pagination: Pagination


def pagination(page: int, page_size: int, total: int) -> Pagination:
    pages = max(1, -(-total // page_size))
    return Pagination(
        page=page,
        page_size=page_size,
        total=total,
        total_pages=pages,
        has_next=page < pages,
        has_prev=page > 1,
    )


def page_size_of(service: Service, page_size: int | None) -> int:
    """The page size asked for (100 by default), at most `--max-page-size`: a larger ask is
    served the largest page (`pagination.page_size` says which)."""
    limit = service.settings.limits.page_size
    return min(limit, 100 if page_size is None else max(1, page_size))


def _list(
    service: Service,
    resource_type: str | None,
    path: str | None,
    page: int,
    page_size: int | None,
    include_content: bool,
) -> CatalogList:
    """Summaries of one page of entries (newest first); the content, payload and findings of
    each only with `include_content=true`."""
    import datetime as dt

    size = page_size_of(service, page_size)
    kind = normalize_kind(resource_type) if resource_type else None
    rows, total = service.catalog.summaries(kind, path, size, (page - 1) * size)
    entries = []
    for row in rows:
        created = dt.datetime.fromtimestamp(row["created_at"], dt.UTC).isoformat()
        summary = CatalogSummary(**{**row, "created_at": created})
        if include_content:
            full = service.catalog.entry(catalog_id=row["catalog_id"])
            if full is not None:
                summary.content = full["content"]
                summary.payload = full["payload"]
                summary.findings = full["findings"]
        entries.append(summary)
    return CatalogList(entries=entries, pagination=pagination(page, size, total))


PAGE = Query(1, ge=1, le=1_000_000, description="1-based page number")
PAGE_SIZE = Query(None, ge=1, description="entries per page (100; at most --max-page-size)")
WITH_CONTENT = Query(False, description="each entry's content, payload and findings too")


@router.post("/list", response_model=CatalogList)
def list_resources(body: ListRequest, service: ServiceDep) -> CatalogList:
    return _list(
        service,
        body.resource_type,
        body.path,
        body.page,
        body.page_size,
        body.include_content,
    )


@router.get("/list/{resource_type}", response_model=CatalogList)
def list_resources_of(
    resource_type: str,
    service: ServiceDep,
    page: int = PAGE,
    page_size: int | None = PAGE_SIZE,
    include_content: bool = WITH_CONTENT,
) -> CatalogList:
    return _list(service, resource_type, None, page, page_size, include_content)


@router.get("/list", response_model=CatalogList)
def list_all(
    service: ServiceDep,
    path: str | None = None,
    page: int = PAGE,
    page_size: int | None = PAGE_SIZE,
    include_content: bool = WITH_CONTENT,
) -> CatalogList:
    return _list(service, None, path, page, page_size, include_content)


class Deleted(BaseModel):
    status: str
    path: str
    deleted_versions: list[int]
    message: str


@router.delete("/entries/{catalog_id}", response_model=Deleted)
def delete_entry(catalog_id: CatalogId, service: ServiceDep) -> Deleted:
    """Delete one version. Executions keep the program they ran; rerunning one of the
    deleted version is refused (404)."""
    entry = service.catalog.entry(catalog_id=catalog_id) if catalog_id.isdigit() else None
    if entry is None or not service.catalog.delete_entry(catalog_id):
        raise not_found("Catalog entry not found", "GET /api/catalog/list shows the ids")
    return Deleted(
        status="deleted",
        path=entry["path"],
        deleted_versions=[entry["version"]],
        message=f"Resource '{entry['path']}' version '{entry['version']}' deleted.",
    )


@router.delete("", response_model=Deleted)
def delete_path(
    service: ServiceDep,
    path: str = Query(min_length=1, description="the entry's path"),
    version: str | None = Query(
        None, pattern=VERSION_PATTERN, description="one version (default: every version)"
    ),
) -> Deleted:
    """Delete one version of a path (`version=N`) or all of them."""
    if version is not None and version != "":
        number = parse_version(version)
        entry = service.catalog.entry(path=path, version=number)
        if entry is None:
            raise not_found(f"Catalog entry not found: {path} version {version}")
        return delete_entry(entry["catalog_id"], service)
    versions = [s["version"] for s in service.catalog.summaries(None, path, 1_000_000, 0)[0]]
    if not versions or service.catalog.delete_path(path) == 0:
        raise not_found(f"Catalog entry not found: {path}", "GET /api/catalog/list shows them")
    return Deleted(
        status="deleted",
        path=path,
        deleted_versions=sorted(versions),
        message=f"Resource '{path}': {len(versions)} version(s) deleted.",
    )


@router.post("/resource", response_model=Entry)
def get_resource(body: ResourceRequest, service: ServiceDep) -> dict[str, Any]:
    entry = find_entry(service, body.path, body.version, body.catalog_id)
    if entry is None:
        raise not_found("Catalog entry not found", "`noetl-vm catalog list` shows the paths")
    return public_entry(entry)


@router.get("/graph", response_model=StepGraph)
def graph(
    service: ServiceDep,
    path: str | None = None,
    version: str | None = Query(None, pattern=VERSION_PATTERN),
    catalog_id: str | None = None,
) -> dict[str, Any]:
    """The step graph of a playbook version (the console draws it): steps with their YAML
    line, and arcs."""
    entry = find_entry(service, path, version, catalog_id)
    if entry is None or entry.get("program") is None:
        raise not_found("Catalog entry not found", "only playbooks have a step graph")
    from noetlc.service.graph import step_graph

    return step_graph(entry["program"])
