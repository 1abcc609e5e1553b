"""The service's front door (service/guard.py): Host and Origin checks against DNS rebinding
and cross-origin posts, the token only in headers (and `?token=` on the event stream alone),
the body limit, and NUL / lone surrogate / non-finite numbers refused as 4xx with a code."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from noetlc.service.state import Limits
from noetlc.service.testing import TOKEN, asgi_client, b64, register, settings_for, wait_done

HELLO = (Path(__file__).resolve().parents[2] / "examples" / "hello.yaml").read_text()


async def test_a_rebinding_request_with_a_foreign_host_is_refused(db_url: str) -> None:
    # no token: the loopback default, where a rebinding page would otherwise be let in
    async with asgi_client(settings_for(db_url, token=None)) as api:
        refused = await api.post(
            "/api/catalog/register",
            json={"content": b64(HELLO)},
            headers={"Host": "attacker.example:8082"},
        )
        assert refused.status_code == 421
        assert refused.json()["code"] == "NOE877"
        listing = await api.get("/api/credentials", headers={"Host": "attacker.example"})
        assert listing.status_code == 421
        for host in ("127.0.0.1:8082", "localhost:8082", "[::1]:8082", "127.0.0.2"):
            ok = await api.get("/api/credentials", headers={"Host": host})
            assert ok.status_code == 200, host


async def test_allowed_hosts_extend_the_loopback_names(db_url: str) -> None:
    settings = settings_for(db_url, allowed_hosts=("testserver", "noetl.internal"))
    async with asgi_client(settings) as api:
        assert (await api.get("/api/credentials", headers={"Host": "noetl.internal"})).is_success
        assert (await api.get("/api/credentials", headers={"Host": "other"})).status_code == 421


async def test_a_cross_origin_post_is_refused_even_as_text(db_url: str) -> None:
    async with asgi_client(settings_for(db_url, token=None)) as api:
        for origin in ("https://attacker.example", "null"):
            refused = await api.post(
                "/api/catalog/register",
                content=b'{"content": "x"}',
                headers={"Origin": origin, "Content-Type": "text/plain"},
            )
            assert refused.status_code == 403, origin
            assert refused.json()["code"] == "NOE877"
        # reading is not changing: a foreign page cannot read the reply anyway (no CORS)
        read = await api.get("/api/health", headers={"Origin": "https://attacker.example"})
        assert read.status_code == 200
        same = await api.post(
            "/api/catalog/register",
            json={"content": b64(HELLO)},
            headers={"Origin": "http://127.0.0.1:8082"},
        )
        assert same.status_code == 200, same.text


async def test_credential_values_need_the_service_to_allow_them(db_url: str) -> None:
    settings = settings_for(db_url)
    settings.allow_credential_values = False
    async with asgi_client(settings) as api:
        made = await api.post("/api/credentials", json={"name": "c", "data": {"password": "pw"}})
        assert made.status_code == 200
        refused = await api.get("/api/credentials/c", params={"include_data": "true"})
        assert refused.status_code == 403 and refused.json()["code"] == "NOE876"
    from noetlc.service.state import Settings

    assert Settings().allow_credential_values is False


async def test_the_query_token_is_accepted_on_the_event_stream_only(db_url: str) -> None:
    async with asgi_client(settings_for(db_url)) as api:
        started = await api.post(
            "/api/execute", json={"path": (await register(api, HELLO))["path"]}
        )
        execution_id = started.json()["execution_id"]
        await wait_done(api, execution_id)
        bare = httpx.AsyncClient(transport=api._transport, base_url="http://testserver")
        async with bare:
            listing = await bare.get("/api/executions", params={"token": TOKEN})
            assert listing.status_code == 401
            events = await bare.get(
                f"/api/executions/{execution_id}/events", params={"token": TOKEN}
            )
            assert events.status_code == 200
            assert (await bare.get(f"/api/executions/{execution_id}/events")).status_code == 401


async def test_a_body_over_the_limit_is_413(db_url: str) -> None:
    limits = Limits(body_bytes=1000)
    async with asgi_client(settings_for(db_url, limits=limits)) as api:
        big = await api.post("/api/catalog/register", json={"content": "x" * 2000})
        assert big.status_code == 413 and big.json()["code"] == "NOE878"
        ok = await api.post("/api/catalog/register", json={"content": b64(HELLO)})
        assert ok.status_code == 200


BAD_BODIES = [
    pytest.param(b'{"content": "a\\u0000b"}', id="nul-escape"),
    pytest.param(b'{"content": "\\ud800"}', id="lone-surrogate"),
    pytest.param(b'{"path": "x", "workload": {"n": Infinity}}', id="infinity"),
    pytest.param(b'{"path": "x", "workload": {"n": NaN}}', id="nan"),
    pytest.param(b'{"path": "x", "workload": {"\\udc00": 1}}', id="surrogate-key"),
    pytest.param(b'{"path": "x", "workload": {"n": 1e999}}', id="overflow"),
]


@pytest.mark.parametrize("body", BAD_BODIES)
async def test_nul_surrogates_and_non_finite_numbers_are_400(db_url: str, body: bytes) -> None:
    async with asgi_client(settings_for(db_url)) as api:
        for route in ("/api/catalog/register", "/api/execute", "/api/credentials"):
            reply = await api.post(
                route, content=body, headers={"Content-Type": "application/json"}
            )
            assert reply.status_code == 400, (route, reply.text)
            assert reply.json()["code"] == "NOE879"
        assert (await api.get("/api/health")).status_code == 200  # the service still answers


@pytest.mark.parametrize(
    "path",
    ["/api/executions/1%002", "/api/credentials/a%00b", "/api/credentials/%ED%A0%80"],
)
async def test_nul_and_surrogates_in_paths_and_queries_are_400(db_url: str, path: str) -> None:
    async with asgi_client(settings_for(db_url)) as api:
        reply = await api.get(path)
        assert reply.status_code == 400 and reply.json()["code"] == "NOE879"
        query = await api.get("/api/executions", params={"path": "a\x00b"})
        assert query.status_code == 400 and query.json()["code"] == "NOE879"


async def test_yaml_limits_and_escapes_are_4xx_with_a_code(db_url: str) -> None:
    limits = Limits(yaml_bytes=4000, yaml_depth=8, workload_bytes=200)
    async with asgi_client(settings_for(db_url, limits=limits)) as api:
        big = await api.post("/api/catalog/register", json={"content": HELLO + "#" * 5000})
        assert big.status_code == 413 and big.json()["code"] == "NOE878"
        deep = "x: " + "[" * 20 + "]" * 20 + "\n"
        nested = await api.post("/api/catalog/register", json={"content": deep})
        assert nested.status_code == 413 and nested.json()["code"] == "NOE878"
        for escape in ('"\\uD800"', '"a\\0b"', ".inf"):
            text = HELLO.replace("name: world", f"name: {escape}")
            reply = await api.post("/api/catalog/register", json={"content": b64(text)})
            assert reply.status_code == 400, (escape, reply.text)
            assert reply.json()["code"] == "NOE879"
        path = (await register(api, HELLO))["path"]
        heavy = await api.post("/api/execute", json={"path": path, "workload": {"x": "y" * 500}})
        assert heavy.status_code == 413 and heavy.json()["code"] == "NOE878"


@pytest.fixture(params=["embedded", "distributed"])
def any_mode_url(request: pytest.FixtureRequest, db_url: str) -> Iterator[str]:
    if request.param == "embedded":
        yield db_url
        return
    from noetlc.runtime.postgres.testing import dsn_or_skip, temporary_schema

    dsn_or_skip()
    with temporary_schema("noetl_guard") as url:
        yield url


MATRIX = [
    ("POST", "/api/catalog/register", b'{"content": "\\ud800"}'),
    ("POST", "/api/execute", b'{"path": "examples/hello", "workload": {"n": Infinity}}'),
    ("POST", "/api/execute", b'{"path": "examples/hello", "workload": {"n": "a\\u0000b"}}'),
    ("POST", "/api/credentials", b'{"name": "a\\u0000", "data": {}}'),
    ("POST", "/api/vars/1", b'{"variables": {"x": NaN}}'),
    ("GET", "/api/executions/12%003", b""),
    ("GET", "/api/credentials/x%00y", b""),
    ("GET", "/api/catalog/list?path=a%00b", b""),
    ("GET", "/api/executions?path=%ED%A0%80", b""),
]


async def test_the_nul_surrogate_infinity_matrix_in_both_modes(any_mode_url: str) -> None:
    async with asgi_client(settings_for(any_mode_url)) as api:
        await register(api, HELLO)
        for method, url, body in MATRIX:
            reply = await api.request(
                method, url, content=body or None, headers={"Content-Type": "application/json"}
            )
            assert reply.status_code == 400 and reply.json()["code"] == "NOE879", (url, body)
        # nothing half-done: no execution was created, and the next request is served
        listed = await api.get("/api/executions")
        assert listed.status_code == 200 and listed.json() == []
        yaml_escape = HELLO.replace("name: world", 'name: "\\uD800"')
        refused = await api.post("/api/catalog/register", json={"content": b64(yaml_escape)})
        assert refused.status_code == 400 and refused.json()["code"] == "NOE879"
