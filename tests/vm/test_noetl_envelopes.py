"""Result envelopes and ids as NoETL's engine gives them, against the loopback stand-in of
NoETL's e2e test server (tests/standin_api.py): the http result is `{status_code, headers,
url, elapsed, data}` under every name a playbook reads it by, pagination and retry loops run
to NoETL's outcome, and execution ids are snowflake integers in every mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_file, compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore
from noetlc.runtime.ids import child_execution_id, is_execution_id, snowflake
from noetlc.vm.control_state import arc_output, job_namespace
from tests.standin_api import point_urls, serve

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "envelopes"


def _run(name: str, base_url: str, **kwargs: Any) -> dict[str, Any]:
    text = point_urls((FIXTURES / name).read_text(encoding="utf-8"), base_url)
    unit = compile_source(text, str(FIXTURES / name))
    assert not [d for d in unit.reporter.diagnostics if d.severity == "error"], (
        unit.reporter.sorted()
    )
    return run_embedded(unit.payload, **kwargs)


def test_legacy_case_rules_read_the_http_envelope_and_page_to_the_end() -> None:
    with serve() as (url, state):
        summary = _run("legacy_case_pages.yaml", url)
    assert summary["status"] == "completed", summary["error"]
    # 35 items, 10 a page: four calls, the last with 5 items (page 1 alone before the fix)
    assert summary["result"] == {"pages": 4, "last_count": 5, "status_code": 200}
    assert [r for r in state.requests if "assessments" in r] == [
        f"GET /api/v1/assessments?page={p}&pageSize=10" for p in (1, 2, 3, 4)
    ]


def test_pipeline_pages_retries_and_arcs_read_noetls_names() -> None:
    with serve() as (url, state):
        summary = _run("pipeline_pages.yaml", url)
    assert summary["status"] == "completed", summary["error"]
    assert summary["steps"]["fetch"]["result"]["count"] == 35
    fetch = summary["steps"]["fetch"]["result"]
    assert (fetch["first"], fetch["last"], fetch["status_code"], fetch["url_has_page"]) == (
        1, 35, 200, True,
    )  # fmt: skip
    assert "wrong" not in summary["steps"]  # `output` and `fetch.data` in the arc guard
    assert summary["result"]["same"] is True and summary["result"]["job_is_int"] is True
    # pages 2 and 3 failed once each and were retried: 4 pages, 6 requests
    flaky = [r.split("page=")[1].split("&")[0] for r in state.requests if "/flaky" in r]
    assert flaky == ["1", "2", "2", "3", "3", "4"]


def test_the_stand_in_behaves_as_noetls_test_server() -> None:
    import httpx

    with serve() as (url, _):
        first = httpx.get(f"{url}/api/v1/flaky", params={"page": 2, "fail_on": "2"})
        second = httpx.get(f"{url}/api/v1/flaky", params={"page": 2, "fail_on": "2"})
        limited = [httpx.get(f"{url}/api/v1/rate-limited", params={"requests_per_second": 1})
                   for _ in range(2)]  # fmt: skip
        users = httpx.get(f"{url}/api/v1/users", params={"offset": 30, "limit": 10}).json()
        events = httpx.get(f"{url}/api/v1/events", params={"limit": 20}).json()
        last = httpx.get(
            f"{url}/api/v1/events", params={"cursor": events["next_cursor"], "limit": 20}
        ).json()
        auth = httpx.get(f"{url}/api/v1/errors", params={"error_type": "auth"})
        missing = httpx.get(
            f"{url}/api/v1/patient/vital_signs", params={"patientId": "p", "page": 2}
        )
    assert (first.status_code, second.status_code) == (500, 200)
    assert second.json()["paging"] == {"hasMore": True, "page": 2, "pageSize": 10}
    assert [r.status_code for r in limited] == [200, 429] and limited[1].headers["retry-after"]
    assert (len(users["users"]), users["has_more"]) == (5, False)
    assert (len(events["events"]), len(last["events"]), last["next_cursor"]) == (20, 15, None)
    assert auth.status_code == 401 and auth.json() == {
        "detail": "Unauthorized - invalid credentials"
    }
    assert missing.status_code == 404


def test_point_urls_rewrites_only_the_test_servers_hosts() -> None:
    text = "a: http://paginated-api.test-server.svc.cluster.local:5555/x\nb: http://paginated-api:5555\nc: https://api.example.com"
    out = point_urls(text, "http://127.0.0.1:1")
    assert out == "a: http://127.0.0.1:1/x\nb: http://127.0.0.1:1\nc: https://api.example.com"


@pytest.mark.parametrize(
    ("result", "error", "expected"),
    [
        ({"status_code": 200, "data": {"k": 1}}, None, {"status": "ok", "data": {"k": 1}}),
        ({"rows": [1]}, None, {"status": "ok", "data": {"rows": [1]}}),
        ([1, 2], None, {"status": "ok", "data": [1, 2]}),
        (None, {"message": "x"}, {"status": "error", "data": None, "error": {"message": "x"}}),
    ],
)
def test_arc_output_is_noetls_output_view(
    result: Any, error: Any, expected: dict[str, Any]
) -> None:
    view = arc_output(result, error)
    assert {k: view[k] for k in expected} == expected
    assert view["result"] == (result if error is None else None)


def test_ids_are_snowflake_integers_everywhere(tmp_path: Path) -> None:
    ids = [snowflake() for _ in range(2000)]
    assert all(is_execution_id(i) for i in ids) and len(set(ids)) == len(ids)
    assert [int(i) for i in ids] == sorted(int(i) for i in ids)  # one process: increasing
    child = child_execution_id(ids[0], "a1", "call", 1)
    assert is_execution_id(child) and child == child_execution_id(ids[0], "a1", "call", 1)
    assert child != child_execution_id(ids[0], "a1", "call", 2)
    assert job_namespace(ids[0]) == {"uuid": ids[0], "execution_id": ids[0], "id": ids[0]}
    # embedded: the id a run gets, and the one its child gets, spliced into a BIGINT-like use
    parent = tmp_path / "parent.yaml"
    (tmp_path / "child.yaml").write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: c, path: c}\n"
        "workflow:\n  - step: start\n    tool:\n      kind: python\n"
        "      input: {me: '{{ execution_id }}', job: '{{ job.uuid }}'}\n"
        '      code: \'result = {"me": int(me), "job": int(job)}\'\n'
    )
    parent.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: p}\n"
        "workflow:\n  - step: start\n    tool: {kind: playbook, path: child.yaml, wait: true}\n"
    )
    store = MemoryStore()
    summary = run_embedded(compile_file(parent).payload, store=store)
    assert summary["status"] == "completed", summary["error"]
    assert is_execution_id(summary["execution_id"])
    got = summary["result"]
    assert got["me"] == got["job"] and is_execution_id(str(got["me"]))
    [child] = [r for r in store.executions() if r["parent_id"] == summary["execution_id"]]
    assert str(got["me"]) == child["execution_id"] != summary["execution_id"]


REPORTED = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: reported, path: tests/envelopes/reported}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'status': 'STATUS', 'error': 'bad input', 'n': 1}"}
    next:
      arcs:
        - step: went_on
          when: "{{ event.name == 'step.done' }}"
        - step: caught
          when: "{{ event.name == 'step.failed' and output.status == 'error' }}"
  - step: went_on
    tool:
      - {name: a, kind: python, code: "result = {'status': 'STATUS'}"}
      - {name: b, kind: python, input: {a: "{{ a }}"}, code: "result = {'after': a}"}
  - step: caught
    tool: {kind: noop}
"""


@pytest.mark.parametrize(
    ("status", "routed", "pipeline_ok"),
    [("error", "caught", None), ("failed", "caught", None), ("done", "went_on", True)],
)
def test_a_result_that_says_it_failed_fails_its_call(
    status: str, routed: str, pipeline_ok: bool | None
) -> None:
    # NoETL's worker fails a call whose result has `status: error|failed`
    unit = compile_source(REPORTED.replace("STATUS", status))
    summary = run_embedded(unit.payload)
    assert routed in summary["steps"] and summary["status"] == "completed", summary
    if routed == "caught":
        assert summary["steps"]["start"]["status"] == "failed"


def test_failed_in_a_pipeline_is_a_value_and_error_fails_the_task() -> None:
    text = REPORTED.replace("'status': 'STATUS', 'error'", "'status': 'ok', 'error'")
    done = run_embedded(compile_source(text.replace("STATUS", "failed")).payload)
    assert done["steps"]["went_on"]["result"] == {"after": {"status": "failed"}}
    failed = run_embedded(compile_source(text.replace("STATUS", "error")).payload)
    assert failed["status"] == "failed"
    assert failed["error"]["type"] == "ToolReportedError", failed["error"]


def test_an_iteration_sees_noetls_loop_index() -> None:
    text = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: loop_index, path: tests/envelopes/loop_index}
workflow:
  - step: start
    loop: {in: [a, b, c], iterator: x}
    tool:
      kind: python
      input: {i: "{{ loop.index }}", first: "{{ loop.first }}", same: "{{ loop_index }}", x: "{{ x }}"}
      code: "result = [i, first, same, x]"
"""
    summary = run_embedded(compile_source(text).payload)
    assert summary["result"]["results"] == [
        [0, True, 0, "a"],
        [1, False, 1, "b"],
        [2, False, 2, "c"],
    ]


def test_legacy_retry_pagination_reads_the_body_and_adds_each_pages_items() -> None:
    with serve() as (url, state):
        summary = _run("legacy_retry_pages.yaml", url)
    assert summary["status"] == "completed", summary["error"]
    assert summary["result"] == {"count": 35, "first": 1, "last": 35}
    offsets = [r.split("offset=")[1].split("&")[0] for r in state.requests if "/users" in r]
    assert offsets == ["0", "10", "20", "30"]


def test_a_later_step_and_the_arcs_read_the_http_envelope_by_noetls_names() -> None:
    with serve() as (url, _):
        summary = _run("step_names.yaml", url)
    assert summary["status"] == "completed", summary["error"]
    assert "wrong" not in summary["steps"]
    assert summary["result"] == {
        "keys": ["data", "elapsed", "headers", "status_code", "url"],
        "body_items": 5,
        "items": 5,
        "page": 4,
        "url_ok": True,
    }


def test_execution_id_splices_unquoted_into_a_bigint_column() -> None:
    # NoETL's playbooks write `{{ execution_id }}` into BIGINT columns without quotes
    import os

    from noetlc.runtime.postgres.testing import dsn_or_skip

    dsn = dsn_or_skip()
    table = f"noetlc_ids_{os.getpid()}"
    text = f"""\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: bigint_ids, path: tests/envelopes/bigint_ids}}
workflow:
  - step: start
    tool:
      kind: postgres
      auth: "{dsn}"
      query: |
        CREATE TEMP TABLE {table} (execution_id BIGINT NOT NULL, job TEXT);
        INSERT INTO {table} VALUES ({{{{ execution_id }}}}, '{{{{ job.uuid }}}}');
        SELECT execution_id, job FROM {table} WHERE execution_id = {{{{ execution_id }}}};
"""
    summary = run_embedded(compile_source(text).payload)
    assert summary["status"] == "completed", summary["error"]
    [row] = summary["result"]["rows"]
    assert str(row["execution_id"]) == row["job"] == summary["execution_id"]


def test_step_vars_read_the_steps_own_result_by_its_name() -> None:
    with serve() as (url, state):
        summary = _run("legacy_vars_pages.yaml", url)
    assert summary["status"] == "completed", summary["error"]
    assert summary["result"] == {"seen": 35}
    assert len([r for r in state.requests if "assessments" in r]) == 4


CASE_SET_LIST = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: case_set_list, path: tests/envelopes/case_set_list}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'users': [{'id': 7}], 'meta': {'n': 1}}"}
    case:
      - when: "{{ event.name == 'call.done' and response is defined }}"
        then:
          - set:
              - {name: first_id, value: "{{ response.users[0].id }}"}
              - {name: count, value: "{{ response.meta.n }}"}
          - next: [{step: use}]
  - step: use
    tool:
      kind: python
      input: {first: "{{ vars.first_id }}", count: "{{ vars.count }}"}
      code: "result = {'first': first, 'count': count}"
"""


def test_a_case_rules_set_list_writes_what_vars_then_read() -> None:
    # the older `set: [{name, value}]` form was dropped without a word; `vars.x` reads ctx
    summary = run_embedded(compile_source(CASE_SET_LIST).payload)
    assert summary["status"] == "completed", summary["error"]
    assert summary["result"] == {"first": 7, "count": 1}
    bad = CASE_SET_LIST.replace('- {name: count, value: "{{ response.meta.n }}"}', "- text")
    unit = compile_source(bad)
    assert [d.code for d in unit.reporter.diagnostics if d.severity == "error"] == ["NOE410"]
