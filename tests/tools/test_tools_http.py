"""The http tool against a real local server (http.server on 127.0.0.1, a thread per test module)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.registry import ToolContext, call_tool

RELEASE = threading.Event()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def _send(
        self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: object) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _echo(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode() if length else ""
        url = urlsplit(self.path)
        self._json(
            200,
            {
                "method": self.command,
                "path": url.path,
                "query": {k: v[0] for k, v in parse_qs(url.query).items()},
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": raw,
            },
        )

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            self._json(code, {"error": "as requested", "code": code})
        elif path == "/text":
            self._send(200, b"plain words", "text/plain; charset=utf-8")
        elif path == "/binary":
            self._send(200, b"\x00\x01\xff", "application/octet-stream")
        elif path == "/bad-json":
            self._send(200, b"{not json", "application/json")
        elif path == "/redirect":
            self._send(302, b"", "text/plain", {"Location": "/echo?from=redirect"})
        elif path == "/hang":
            RELEASE.wait(30)  # answers only once the cancel test is over
            with contextlib.suppress(OSError):
                self._json(200, {"hung": True})
        elif path == "/slow":
            time.sleep(1.5)
            with contextlib.suppress(OSError):  # the client gave up (the timeout tests)
                self._json(200, {"slow": True})
        else:
            self._echo()

    do_POST = do_PUT = do_DELETE = do_PATCH = _echo  # type: ignore[assignment]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_get_decodes_json_and_sends_params(base_url: str) -> None:
    out = call_tool("http", {"url": f"{base_url}/echo", "params": {"page": 2, "size": "10"}}, None)
    assert out["status"] == "ok", out
    assert out["result"]["data"]["query"] == {"page": "2", "size": "10"}
    assert out["http"]["status"] == 200
    assert out["http"]["headers"]["content-type"] == "application/json"
    assert out["meta"]["kind"] == "http" and out["meta"]["duration_ms"] >= 0


def test_result_is_noetls_response_envelope(base_url: str) -> None:
    # NoETL's http tool returns {status_code, headers, url, elapsed, data} (its
    # tools/http/response.py); the body is `data`, also for an error answer
    for path, code in (("/echo?a=1", 200), ("/status/503", 503)):
        out = call_tool("http", {"url": f"{base_url}{path}"})
        envelope = out["result"]
        assert set(envelope) == {"status_code", "headers", "url", "elapsed", "data"}, envelope
        assert envelope["status_code"] == code == out["http"]["status"]
        assert envelope["url"] == f"{base_url}{path}"
        assert isinstance(envelope["elapsed"], float) and envelope["elapsed"] >= 0
        assert envelope["headers"]["content-type"] == "application/json"
        assert isinstance(envelope["data"], dict)


def test_endpoint_is_url_and_method_is_case_insensitive(base_url: str) -> None:
    out = call_tool("http", {"endpoint": f"{base_url}/echo", "method": "put"})
    assert out["status"] == "ok" and out["result"]["data"]["method"] == "PUT"


def test_json_body_and_headers(base_url: str) -> None:
    out = call_tool(
        "http",
        {
            "url": f"{base_url}/echo",
            "method": "POST",
            "json": {"a": [1, 2]},
            "headers": {"X-Trace": "t1"},
        },
    )
    assert json.loads(out["result"]["data"]["body"]) == {"a": [1, 2]}
    assert out["result"]["data"]["headers"]["x-trace"] == "t1"
    assert out["result"]["data"]["headers"]["content-type"] == "application/json"


def test_data_is_query_for_get_and_json_for_post(base_url: str) -> None:
    get = call_tool("http", {"url": f"{base_url}/echo", "data": {"q": "x"}})
    assert get["result"]["data"]["query"] == {"q": "x"} and get["result"]["data"]["body"] == ""
    post = call_tool("http", {"url": f"{base_url}/echo", "method": "POST", "payload": {"q": 1}})
    assert (
        json.loads(post["result"]["data"]["body"]) == {"q": 1}
        and post["result"]["data"]["query"] == {}
    )


def test_raw_body_and_form(base_url: str) -> None:
    raw = call_tool("http", {"url": f"{base_url}/echo", "method": "POST", "body": "a;b"})
    assert raw["result"]["data"]["body"] == "a;b"
    form = call_tool("http", {"url": f"{base_url}/echo", "method": "POST", "form": {"k": "v w"}})
    assert form["result"]["data"]["body"] == "k=v+w"


@pytest.mark.parametrize(
    ("code", "category", "retryable"),
    [
        (404, "not_found", False),
        (401, "auth", False),
        (429, "rate_limit", True),
        (400, "client_error", False),
        (408, "client_error", False),  # NoETL retries 429 and 5xx only
        (503, "server_error", True),
    ],
)
def test_non_2xx_is_an_error_with_http_fields_and_body(
    base_url: str, code: int, category: str, retryable: bool
) -> None:
    out = call_tool("http", {"url": f"{base_url}/status/{code}"})
    assert out["status"] == "error"
    assert out["error"]["type"] == "HttpError"
    assert (out["error"]["category"], out["error"]["retryable"]) == (category, retryable)
    # NoETL's names: its task sequence's error of an http tool result with `status: error`
    assert out["error"]["kind"] == "tool_error" and out["error"]["source"] == "http"
    assert out["error"]["code"] == f"HTTP_{code}"
    assert out["error"]["status_code"] == out["error"]["http_status"] == code
    assert out["http"]["status"] == code
    assert out["result"]["data"] == {"error": "as requested", "code": code}
    # the error itself says the status and the start of the body (the console shows both)
    assert out["error"]["status"] == code
    assert json.loads(out["error"]["body"]) == out["result"]["data"]


def test_text_binary_and_invalid_json_bodies(base_url: str) -> None:
    assert call_tool("http", {"url": f"{base_url}/text"})["result"]["data"] == "plain words"
    binary = call_tool("http", {"url": f"{base_url}/binary"})
    assert binary["result"]["data"] == "AAH/" and binary["http"]["encoding"] == "base64"
    assert call_tool("http", {"url": f"{base_url}/bad-json"})["result"]["data"] == "{not json"


def test_redirects_are_followed_unless_disabled(base_url: str) -> None:
    followed = call_tool("http", {"url": f"{base_url}/redirect"})
    assert followed["result"]["data"]["query"] == {"from": "redirect"}
    kept = call_tool("http", {"url": f"{base_url}/redirect", "follow_redirects": False})
    assert kept["status"] == "error" and kept["http"]["status"] == 302  # non-2xx
    assert kept["error"]["category"] == "redirect" and kept["http"]["headers"]["location"]


def test_timeout_from_argument_or_spec(base_url: str) -> None:
    out = call_tool("http", {"url": f"{base_url}/slow", "timeout": 0.2})
    assert out["status"] == "error" and out["error"]["type"] == "Timeout"
    assert out["error"]["retryable"] is True and out["http"]["status"] is None
    spec = call_tool("http", {"url": f"{base_url}/slow"}, {"timeout": {"read": 0.2}})
    assert spec["error"]["type"] == "Timeout"


def test_a_cancel_abandons_a_request_that_has_no_answer_yet(base_url: str) -> None:
    flag = threading.Event()
    threading.Timer(0.3, flag.set).start()
    started = time.monotonic()
    try:
        out = call_tool(
            "http",
            {"url": f"{base_url}/hang", "timeout": 60},
            None,
            ToolContext(cancelled=flag.is_set),
        )
    finally:
        RELEASE.set()
    assert out["status"] == "error" and out["error"]["type"] == "Cancelled", out
    assert out["http"]["status"] is None and out["http"]["method"] == "GET"
    assert time.monotonic() - started < 15  # not the server's 30 s nor the 60 s timeout
    # a cancellable call that is not cancelled answers as usual
    again = call_tool(
        "http",
        {"url": f"{base_url}/echo", "params": {"a": 1}},
        None,
        ToolContext(cancelled=lambda: False),
    )
    assert again["status"] == "ok" and again["result"]["data"]["query"] == {"a": "1"}, again


def test_connection_refused_is_a_retryable_connection_error() -> None:
    out = call_tool("http", {"url": "http://127.0.0.1:9/nothing", "timeout": 2})
    assert out["error"]["type"] == "ConnectionError"
    assert out["error"]["category"] == "connection" and out["error"]["retryable"] is True
    assert out["error"]["kind"] == "tool_error" and "status_code" not in out["error"]


def test_auth_from_the_keychain_sets_the_header_and_is_redactable(base_url: str) -> None:
    chain = Keychain(
        env={
            "NOETL_KEYCHAIN_API": "tok-123456",
            "NOETL_KEYCHAIN_BASIC": '{"username": "ann", "password": "pw-secret"}',
        }
    )
    ctx = ToolContext(keychain=chain)
    out = call_tool("http", {"url": f"{base_url}/echo", "auth": "api"}, None, ctx)
    assert out["result"]["data"]["headers"]["authorization"] == "Bearer tok-123456"
    assert "tok-123456" not in json.dumps(chain.redact(out))
    basic = call_tool("http", {"url": f"{base_url}/echo", "auth": "basic"}, None, ctx)
    assert basic["result"]["data"]["headers"]["authorization"].startswith("Basic ")


def test_bad_arguments_are_an_error_outcome_not_an_exception() -> None:
    out = call_tool("http", {"url": "http://x", "json": {}, "data": {}})
    assert out["status"] == "error" and out["error"]["type"] == "ToolArgumentError"
    assert "only one of" in out["error"]["message"]
