"""`POST /api/context/render` evaluates under the expression limits: a limit is NOE311 (not
the generic NOE310), and one request's templates build at most `MAX_BUILT` in all (each
string of a template tree is its own evaluation, with its own budget)."""

from __future__ import annotations

from pathlib import Path

import httpx

from noetlc.service.testing import register, wait_done

HELLO = (Path(__file__).resolve().parents[2] / "examples" / "hello.yaml").read_text()


async def _execution(api: httpx.AsyncClient) -> str:
    await register(api, HELLO)
    reply = await api.post("/api/execute", json={"path": "examples/hello", "workload": {}})
    execution_id = str(reply.json()["execution_id"])
    await wait_done(api, execution_id)
    return execution_id


async def test_render_refuses_runaway_templates_with_noe311(api: httpx.AsyncClient) -> None:
    execution_id = await _execution(api)
    for template in (
        "{{ 3 ** 14000 }} ",
        "{{ 10 ** 4300 }}",
        "{{ ('x' * 600000) ~ ('x' * 600000) }}",
        ["{{ 'x' * 900000 }}"] * 20,  # each within the limits, 18 million characters in all
        {"a": ["{{ 'x' * 900000 }}"] * 10, "b": ["{{ 'y' * 900000 }}"] * 10},
    ):
        reply = await api.post(
            "/api/context/render", json={"execution_id": execution_id, "template": template}
        )
        assert reply.status_code == 400, template if isinstance(template, str) else "many"
        assert reply.json()["code"] == "NOE311", reply.text[:300]


async def test_render_within_the_limits_is_unchanged(api: httpx.AsyncClient) -> None:
    execution_id = await _execution(api)
    reply = await api.post(
        "/api/context/render",
        json={"execution_id": execution_id, "template": ["{{ 'x' * 900000 }}"] * 3},
    )
    assert reply.status_code == 200
    assert [len(s) for s in reply.json()["rendered"]] == [900000] * 3
