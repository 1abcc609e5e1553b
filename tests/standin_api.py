"""A loopback stand-in for the HTTP test server NoETL's e2e playbooks call.

NoETL's test playbooks page through, retry against and probe an API at
`http://paginated-api.test-server.svc.cluster.local:5555`; this module serves the same
endpoints, with the same answers and the same failure behaviour, on 127.0.0.1 and a free port
(stdlib only: a thread per request, so slow requests overlap as on the real server). Tests and
`scripts/corpus_run.py` start it with `serve()` and point the playbooks' URLs at it
(`point_urls`). Behaviour, endpoint by endpoint:

* `/health` — `{status: ok}`.
* `/api/v1/assessments?page&pageSize` — 35 items, `{data, paging: {hasMore, page, pageSize,
  total}}`; `/api/v1/users?offset&limit` — `{users, has_more, offset, limit, total}`;
  `/api/v1/events?cursor&limit` — the cursor is the base64 of the page number, `{events,
  next_cursor, limit}`.
* `/api/v1/flaky?page&fail_on=1,3` — a listed page answers 500 on its first request and
  succeeds from the second (counted per page until `POST /api/v1/flaky/reset`).
* `/api/v1/errors?page&error_type=429|500|503|auth|403|404|timeout&retry_after` — that error
  (429/503 with `Retry-After`; `timeout` sleeps 30 s), else a normal page.
* `/api/v1/rate-limited?page&requests_per_second` — 429 with `Retry-After` above the rate.
* `/api/v1/heavy?page&pageSize&payload_kb` — 100 items with a deterministic payload each.
* `/api/v1/concurrency/{reset,stats,probe}` — counts overlapping requests (`max_active`).
* `/api/v1/patient-records?patientId&page&pageSize&min_delay&max_delay&payload_kb&rate_limit`
  — a FHIR-like bundle, 2–5 pages per patient (stable per id), 404 past the last page,
  `meta: {page, totalPages, ...}`, a link `next` while there is one.
* `/api/v1/patient/{assessments,conditions,medications,vital_signs}?patientId&page&pageSize`
  (`{data, paging}`, 404 past the last page), `/api/v1/patient/demographics`,
  `/api/v1/mds/assessment_ids`, `/api/v1/mds/assessment/{id}`.

Errors raised the way the real server's framework raises them answer `{"detail": "..."}`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOTAL_ITEMS = 35
PAGE_SIZE = 10
HEAVY_TOTAL = 100
# the hosts NoETL's test playbooks name for the test server
STANDIN_URL = re.compile(r"https?://paginated-api(?:\.[A-Za-z0-9.-]+)?(?::\d+)?")


def point_urls(text: str, base_url: str) -> str:
    """A playbook's text with the test server's URLs pointing at the stand-in."""
    return STANDIN_URL.sub(base_url, text)


def _seed(text: str) -> int:
    return int(hashlib.md5(text.encode()).hexdigest(), 16)


def _page(items: list[Any], page: int, size: int) -> tuple[list[Any], bool]:
    start = (page - 1) * size
    return items[start : start + size], start + size < len(items)


class State:
    """What the server remembers between requests (flaky attempts, rates, probe counters)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flaky: dict[int, int] = {}
        self.rates: dict[str, list[float]] = {}
        self.probe = {"started": 0, "completed": 0, "active": 0, "max_active": 0}
        self.requests: list[str] = []

    def within_rate(self, key: str, limit: int) -> bool:
        now = time.monotonic()
        with self.lock:
            recent = [t for t in self.rates.get(key, []) if now - t < 1.0]
            if len(recent) >= limit:
                self.rates[key] = recent
                return False
            self.rates[key] = [*recent, now]
            return True


class Answer(Exception):
    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers or {}


def _int(q: dict[str, str], name: str, default: int) -> int:
    try:
        return int(q.get(name, default))
    except ValueError:
        raise Answer(422, {"detail": f"query parameter {name} is not an integer"}) from None


def _float(q: dict[str, str], name: str, default: float) -> float:
    try:
        return float(q[name]) if q.get(name) not in (None, "", "None") else default
    except ValueError:
        raise Answer(422, {"detail": f"query parameter {name} is not a number"}) from None


def _paged(items: list[Any], page: int, size: int, total: bool = True) -> dict[str, Any]:
    chunk, more = _page(items, page, size)
    paging: dict[str, Any] = {"hasMore": more, "page": page, "pageSize": size}
    if total:
        paging["total"] = len(items)
    return {"data": chunk, "paging": paging}


def _values() -> list[dict[str, Any]]:
    return [{"id": i, "value": f"item_{i}"} for i in range(1, TOTAL_ITEMS + 1)]


def route(state: State, method: str, path: str, q: dict[str, str]) -> Any:
    """The answer to one request (raises `Answer` for a non-200 one)."""
    if path == "/health":
        return {"status": "ok"}
    if path == "/api/v1/assessments":
        items = [
            {"id": i, "name": f"Assessment {i}", "score": 50 + i % 50}
            for i in range(1, TOTAL_ITEMS + 1)
        ]
        return _paged(items, _int(q, "page", 1), _int(q, "pageSize", PAGE_SIZE))
    if path == "/api/v1/users":
        offset, limit = _int(q, "offset", 0), _int(q, "limit", PAGE_SIZE)
        users = [
            {"id": i, "username": f"user{i}", "email": f"user{i}@example.com"}
            for i in range(1, TOTAL_ITEMS + 1)
        ]
        return {
            "users": users[offset : offset + limit],
            "has_more": offset + limit < TOTAL_ITEMS,
            "offset": offset,
            "limit": limit,
            "total": TOTAL_ITEMS,
        }
    if path == "/api/v1/events":
        limit = _int(q, "limit", PAGE_SIZE)
        try:
            page = int(base64.b64decode(q["cursor"]).decode()) if q.get("cursor") else 1
        except (ValueError, UnicodeDecodeError):
            page = 1
        events = [
            {
                "id": i,
                "type": "user_action",
                "timestamp": f"2024-01-{i % 28 + 1:02d}T12:00:00Z",
                "data": {"action": f"event_{i}"},
            }
            for i in range(1, TOTAL_ITEMS + 1)
        ]
        chunk, more = _page(events, page, limit)
        cursor = base64.b64encode(str(page + 1).encode()).decode() if more else None
        return {"events": chunk, "next_cursor": cursor, "limit": limit}
    if path == "/api/v1/flaky/reset" and method == "POST":
        with state.lock:
            state.flaky.clear()
        return {"status": "reset", "message": "Flaky endpoint counters cleared"}
    if path == "/api/v1/flaky":
        page = _int(q, "page", 1)
        failing = {int(p) for p in q.get("fail_on", "").split(",") if p.strip().isdigit()}
        with state.lock:
            state.flaky[page] = attempt = state.flaky.get(page, 0) + 1
        if page in failing and attempt == 1:
            raise Answer(500, {"detail": "Simulated failure"})
        return _paged(_values(), page, PAGE_SIZE, total=False)
    if path == "/api/v1/errors":
        return _errors(q)
    if path == "/api/v1/rate-limited":
        limit = _int(q, "requests_per_second", 2)
        if not state.within_rate("rate_limited", limit):
            raise Answer(
                429, {"error": "Rate limit exceeded", "limit": limit}, {"Retry-After": "1"}
            )
        body = _paged(
            [{**v, "rate_limited": True} for v in _values()], _int(q, "page", 1), PAGE_SIZE, False
        )
        return {**body, "rate_limit": {"limit": limit}}
    if path == "/api/v1/heavy":
        return _heavy(q)
    if path.startswith("/api/v1/concurrency/"):
        return _probe(state, path.rsplit("/", 1)[1], q)
    if path == "/api/v1/patient-records":
        return _patient_records(state, q)
    if path.startswith("/api/v1/patient/") or path.startswith("/api/v1/mds/"):
        return _patient(path, q)
    raise Answer(404, {"detail": "Not Found"})


def _errors(q: dict[str, str]) -> Any:
    kind, retry_after = q.get("error_type"), str(_int(q, "retry_after", 5))
    if kind == "429":
        body = {"error": "Too Many Requests", "message": "Rate limit exceeded"}
        raise Answer(429, body, {"Retry-After": retry_after})
    if kind == "503":
        body = {"error": "Service Unavailable", "message": "Server temporarily unavailable"}
        raise Answer(503, body, {"Retry-After": retry_after})
    fixed = {
        "500": (500, "Internal Server Error - simulated"),
        "auth": (401, "Unauthorized - invalid credentials"),
        "403": (403, "Forbidden - insufficient permissions"),
        "404": (404, "Not Found - resource does not exist"),
    }
    if kind in fixed:
        raise Answer(fixed[kind][0], {"detail": fixed[kind][1]})
    if kind == "timeout":
        time.sleep(30)
        return {"data": [], "simulated": "timeout"}
    return _paged(_values(), _int(q, "page", 1), PAGE_SIZE, total=False)


def _heavy(q: dict[str, str]) -> Any:
    page, size, kb = _int(q, "page", 1), _int(q, "pageSize", 10), _int(q, "payload_kb", 10)
    first, last = (page - 1) * size + 1, min(page * size, HEAVY_TOTAL)
    items = []
    for i in range(first, last + 1):
        block = hashlib.sha256(f"heavy-{i}".encode()).hexdigest()
        items.append(
            {
                "id": i,
                "name": f"Heavy Assessment {i}",
                "score": 50 + i % 50,
                "category": ("finance", "technology", "healthcare", "education")[i % 4],
                "metadata": {"version": f"1.{i % 10}.0", "tags": [f"tag_{t}" for t in range(5)]},
                "payload": (block * (kb * 1024 // len(block) + 1))[: kb * 1024],
            }
        )
    return {
        "data": items,
        "paging": {
            "hasMore": page * size < HEAVY_TOTAL,
            "page": page,
            "pageSize": size,
            "total": HEAVY_TOTAL,
        },
        "meta": {"payload_kb_per_item": kb},
    }


def _probe(state: State, what: str, q: dict[str, str]) -> Any:
    probe = state.probe
    if what == "reset":
        with state.lock:
            probe.update(started=0, completed=0, active=0, max_active=0)
        return {"status": "reset"}
    if what == "stats":
        with state.lock:
            return {**probe, "recent_events": []}
    if what != "probe":
        raise Answer(404, {"detail": "Not Found"})
    delay = min(max(_float(q, "delay_seconds", 0.0), 0.0), 60.0)
    with state.lock:
        probe["started"] += 1
        probe["active"] += 1
        probe["max_active"] = max(probe["max_active"], probe["active"])
        request_id, active_at_start = probe["started"], probe["active"]
    started = time.monotonic()
    if delay:
        time.sleep(delay)
    with state.lock:
        probe["completed"] += 1
        probe["active"] -= 1
        snapshot = dict(probe)
    return {
        "request_id": request_id,
        "label": q.get("label", "probe"),
        "delay_seconds": delay,
        "duration_seconds": round(time.monotonic() - started, 4),
        "active_at_start": active_at_start,
        **snapshot,
    }


def _patient_records(state: State, q: dict[str, str]) -> Any:
    patient = q.get("patientId")
    if not patient:
        raise Answer(422, {"detail": "query parameter patientId is required"})
    if not state.within_rate("patient-records", _int(q, "rate_limit", 50)):
        body = {"error": "Too Many Requests", "message": "Rate limit exceeded"}
        raise Answer(429, body, {"Retry-After": "1"})
    low, high = _float(q, "min_delay", 2.0), _float(q, "max_delay", 4.0)
    delay = low + (high - low) * (_seed(patient) % 1000) / 1000  # stable per patient
    time.sleep(max(delay, 0.0))
    page, size = _int(q, "page", 1), _int(q, "pageSize", 10)
    pages = 2 + _seed(patient) % 4
    if page > pages:
        raise Answer(404, {"detail": f"Page {page} does not exist for patient {patient}"})
    padding = max(100, _int(q, "payload_kb", 100) * 1024 // max(size, 1) - 600)
    entries = [
        {
            "fullUrl": f"MedicationStatement/{patient}-p{page}-e{(page - 1) * size + i}",
            "resource": {
                "resourceType": "MedicationStatement",
                "id": f"{patient}-p{page}-e{(page - 1) * size + i}",
                "status": "active",
                "subject": {"reference": f"Patient/{patient}"},
                "padding": "M" * padding,
            },
        }
        for i in range(size)
    ]
    links = [{"relation": "self", "url": f"?patientId={patient}&page={page}"}]
    if page < pages:
        links.append({"relation": "next", "url": f"?patientId={patient}&page={page + 1}"})
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        "total": pages * size,
        "link": links,
        "entry": entries,
        "meta": {
            "patientId": patient,
            "page": page,
            "pageSize": size,
            "totalPages": pages,
            "delaySeconds": round(delay, 2),
        },
    }


_PATIENT_PAGES = {"assessments": (2, 4), "conditions": (1, 3), "medications": (2, 3),
                  "vital_signs": (1, 1)}  # fmt: skip


def _patient(path: str, q: dict[str, str]) -> Any:
    patient = q.get("patientId", "")
    what = path.rsplit("/", 1)[1]
    if path.startswith("/api/v1/mds/assessment/"):
        seed = _seed(what)
        sections = [
            {"sectionId": f"S{i}", "questions": [
                {"key": f"B{i}0{j}", "responses": [{"responseValue": str((seed + i * 10 + j) % 5)}]}
                for j in range(1, 4)]}
            for i in range(1, 4)
        ]  # fmt: skip
        return {"assessmentId": what, "status": "completed", "sections": sections}
    if not patient:
        raise Answer(422, {"detail": "query parameter patientId is required"})
    if what == "assessment_ids":
        count = 2 + _seed(f"{patient}:mds") % 4
        ids = [f"MDS-{patient}-{i:03d}" for i in range(1, count + 1)]
        return {"patientId": patient, "assessmentIds": ids, "count": count}
    if what == "demographics":
        seed = _seed(f"{patient}:demographics")
        return {"patientId": patient, "firstName": f"First{seed % 1000}",
                "lastName": f"Last{(seed >> 8) % 1000}", "gender": "MF"[seed % 2],
                "status": "active"}  # fmt: skip
    if what not in _PATIENT_PAGES:
        raise Answer(404, {"detail": "Not Found"})
    low, high = _PATIENT_PAGES[what]
    pages = low + _seed(f"{patient}:{what}") % (high - low + 1)
    page, size = _int(q, "page", 1), _int(q, "pageSize", 10)
    if page > pages:
        raise Answer(404, {"error": "page not found"})
    seed = _seed(f"{patient}:{what}:{page}")
    items = [
        {"id": f"{what[:4].upper()}-{patient}-p{page}-i{i}", "patientId": patient,
         "dataType": what, "value": (seed + i) % 100}
        for i in range(size)
    ]  # fmt: skip
    paging = {"hasMore": page < pages, "page": page, "pageSize": size, "total": pages * size}
    return {"data": items, "paging": paging}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        state = self.server.state
        with state.lock:
            state.requests.append(f"{method} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        try:
            status, body, headers = 200, route(state, method, url.path, query), {}
        except Answer as answer:
            status, body, headers = answer.status, answer.body, answer.headers
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: State

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up (a cancelled or timed-out call): nothing to report


@contextmanager
def serve() -> Iterator[tuple[str, State]]:
    """The stand-in on 127.0.0.1 and a free port for the block: (base URL, its state)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = State()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
