"""Health, per-execution variables, and template rendering in an execution's scope."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from noetlc.service.deps import ID_PATTERN, ExecutionId, ServiceDep
from noetlc.service.errors import ApiError, bad_request, error_responses, not_found
from noetlc.service.models import Health, Rendered, Var, VarDeleted, Vars, VarsDeleted, VarsSet
from noetlc.service.routes_catalog import PAGE, PAGE_SIZE, Pagination, page_size_of, pagination

router = APIRouter(tags=["misc"], responses=error_responses())


@router.get("/api/health", response_model=Health)
def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/health", response_model=Health)
def health_root() -> dict[str, str]:
    return {"status": "ok"}


def integer_id(execution_id: str) -> str:
    if not execution_id.isdigit():
        raise bad_request(f"execution_id must be an integer value, got {execution_id!r}", None, 422)
    return execution_id


class SetVars(BaseModel):
    variables: dict[str, Any] = Field(min_length=1)
    var_type: Literal["user_defined", "step_result", "computed", "iterator_state"] = "user_defined"
    source_step: str | None = None


class VarsPage(Vars):
    """One page of an execution's variables, by name; `count` is this page's."""

    pagination: Pagination


@router.get("/api/vars/{execution_id}", tags=["vars"], response_model=VarsPage)
def get_vars(
    execution_id: ExecutionId,
    service: ServiceDep,
    page: int = PAGE,
    page_size: int | None = PAGE_SIZE,
) -> VarsPage:
    values = service.catalog.vars(integer_id(execution_id))
    size = page_size_of(service, page_size)
    names = list(values)[(page - 1) * size : page * size]  # the store lists them by name
    return VarsPage(
        execution_id=int(execution_id),
        variables={name: values[name] for name in names},
        count=len(names),
        pagination=pagination(page, size, len(values)),
    )


@router.get("/api/vars/{execution_id}/{name}", tags=["vars"], response_model=Var)
def get_var(execution_id: ExecutionId, name: str, service: ServiceDep) -> dict[str, Any]:
    found = service.catalog.var(integer_id(execution_id), name)
    if found is None:
        raise not_found(f"Variable '{name}' not found for execution {execution_id}")
    return {**found, "execution_id": int(execution_id), "var_name": name}


@router.post("/api/vars/{execution_id}", tags=["vars"], response_model=VarsSet)
def set_vars(execution_id: ExecutionId, body: SetVars, service: ServiceDep) -> dict[str, Any]:
    if not body.variables:
        raise bad_request("variables must not be empty")
    names = service.catalog.set_vars(
        integer_id(execution_id), body.variables, body.var_type, body.source_step
    )
    return {"execution_id": int(execution_id), "variables_set": len(names), "var_names": names}


@router.delete("/api/vars/{execution_id}/{name}", tags=["vars"], response_model=VarDeleted)
def delete_var(execution_id: ExecutionId, name: str, service: ServiceDep) -> dict[str, Any]:
    deleted = service.catalog.delete_var(integer_id(execution_id), name)
    return {"execution_id": int(execution_id), "var_name": name, "deleted": deleted}


@router.delete("/api/vars/{execution_id}", tags=["vars"], response_model=VarsDeleted)
def delete_vars(execution_id: ExecutionId, service: ServiceDep) -> dict[str, Any]:
    count = service.catalog.delete_vars(integer_id(execution_id))
    return {"execution_id": int(execution_id), "deleted_count": count}


class RenderRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    execution_id: Annotated[int, Field(ge=0)] | Annotated[str, Field(pattern=ID_PATTERN)]
    template: Any = Field(description="any JSON: the strings inside are rendered")
    extra_context: dict[str, Any] | None = None
    strict: StrictBool = True


@router.post("/api/context/render", tags=["context"], response_model=Rendered)
def render(body: RenderRequest, service: ServiceDep) -> dict[str, Any]:
    """Evaluate a template (any JSON: strings inside are rendered) in an execution's scope as
    the VM sees it: `workload`, `ctx`, each finished step's result by step name, the
    execution's variables under `vars`, and `extra_context` on top."""
    if body.execution_id is None or body.execution_id == "":
        raise bad_request("execution_id is required")
    if "template" not in (body.model_fields_set or set()):
        raise bad_request("template is required")
    execution_id = str(body.execution_id)
    if not execution_id.isdigit():
        raise bad_request(f"execution_id must be an integer value, got {execution_id!r}")
    record = service.engine.execution(execution_id)
    if record is None:
        raise not_found(f"Execution {execution_id} not found")
    scope = scope_of(service, record)
    scope.update(body.extra_context or {})
    rendered = render_value(body.template, scope, body.strict, [0])
    return {"status": "ok", "rendered": rendered, "context_keys": sorted(scope)}


def scope_of(service: Any, record: dict[str, Any]) -> dict[str, Any]:
    execution_id = str(record["execution_id"])
    summary = record.get("summary") or {}
    steps = summary.get("steps") or {}
    scope: dict[str, Any] = {}
    if not steps:  # running: the results so far, from the log
        from noetlc.ir.events import EventName

        done = EventName.STEP_DONE.value
        for event in service.engine.events(execution_id):
            if event["name"] == done and event.get("step"):
                payload = event.get("payload") or {}
                steps[event["step"]] = {"result": payload.get("result")}
    for name, step in steps.items():
        scope[name] = step.get("result")
    scope["workload"] = record.get("workload") or {}
    scope["ctx"] = summary.get("ctx") or {}
    scope["execution_id"] = execution_id
    scope["vars"] = {k: v["value"] for k, v in service.catalog.vars(execution_id).items()}
    return scope


def render_value(template: Any, scope: dict[str, Any], strict: bool, built: list[int]) -> Any:
    """Each string of `template` is one evaluation, with the expression limits; `built` counts
    what all of them rendered, so one request builds at most `limits.MAX_BUILT` in all."""
    if isinstance(template, dict):
        return {k: render_value(v, scope, strict, built) for k, v in template.items()}
    if isinstance(template, list):
        return [render_value(v, scope, strict, built) for v in template]
    if not isinstance(template, str):
        return template
    from noetlc.expr import limits
    from noetlc.expr.compile import compile_expression
    from noetlc.expr.runtime import ExpressionError, compile_entry, to_json_value

    try:
        compiled = compile_expression(template, mode="template")
        value = compile_entry(compiled.to_entry())(scope)
        limits.charge(built, limits.deep_size(value, limits.MAX_BUILT))  # characters and items
        return to_json_value(value)
    except Exception as exc:
        if not strict:
            return template
        code = exc.code if isinstance(exc, ExpressionError) else "NOE310"
        if isinstance(exc, limits.ExpressionLimit):
            code = "NOE311"
        raise ApiError(
            400,
            code,
            f"cannot render {template!r}: {exc}",
            "names in scope: " + ", ".join(sorted(scope)),
        ) from None
