"""API errors: every refusal is a 4xx JSON body with a stable code.

    {"detail": "<message>", "code": "NOE871", "hint": "<what to do>"}

`detail` is where NoETL clients look for the message; `code` is one of the NOE87x codes of
diagnostics/codes/service_codes.py (or the compiler's codes in `diagnostics`, for a refused
playbook). Unexpected failures are a 500 with code NOE900 and no trace.
"""

from __future__ import annotations

from typing import Any

UNAUTHORIZED = "NOE870"
NOT_FOUND = "NOE871"
BAD_REQUEST = "NOE872"
REFUSED_PLAYBOOK = "NOE873"
FORBIDDEN = "NOE876"
FOREIGN_ORIGIN = "NOE877"
TOO_LARGE = "NOE878"
INVALID_TEXT = "NOE879"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        hint: str | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.extra = extra

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"detail": self.message, "code": self.code}
        if self.hint:
            out["hint"] = self.hint
        out.update(self.extra)
        return out


def not_found(message: str, hint: str | None = None) -> ApiError:
    return ApiError(404, NOT_FOUND, message, hint)


def bad_request(message: str, hint: str | None = None, status: int = 400) -> ApiError:
    return ApiError(status, BAD_REQUEST, message, hint)


def error_responses() -> dict[int | str, dict[str, Any]]:
    """The error replies every route documents in the OpenAPI schema (one body shape)."""
    from pydantic import BaseModel, ConfigDict

    class ErrorBody(BaseModel):
        """`detail`: the message (a list of field errors for a 422 from the schema);
        `code`: NOE87x, or the compiler's codes in `diagnostics` for a refused playbook."""

        model_config = ConfigDict(extra="allow")
        detail: str | list[dict[str, Any]]
        code: str
        hint: str | None = None

    described = {
        400: "a request the route cannot serve; NUL, lone surrogates, NaN/Infinity (NOE879)",
        401: "no valid bearer token (NOE870)",
        403: "refused by the service's settings (NOE876), or from a foreign page (NOE877)",
        404: "no such execution, entry, credential or route (NOE871)",
        409: "the execution's state does not allow it",
        413: "the body or a part of it is over a limit (NOE878)",
        421: "a Host name the service does not serve (NOE877)",
        422: "the body or parameters do not validate (NOE872), or a refused playbook (NOE873)",
        500: "a bug (NOE900), never with a trace",
        503: "the service lacks a setting the route needs",
    }
    return {status: {"model": ErrorBody, "description": text} for status, text in described.items()}
