"""The web console in a real headless Chromium (Debian's `chromium`, driven by Playwright with
its `executable_path`): a 20-step run and a 200-iteration loop watched live (a step seen
running, loop progress moving, the failed step's line and logs shown), a 1,000-step graph
that fits and zooms, the executions list and the catalog; screenshots go to the test
artifacts folder (`NOETLC_TEST_ARTIFACTS`, default build/test-artifacts). Outside CI a missing
browser or Playwright skips with the reason; under CI the test installs what it needs
(apt-get, as root) and fails when it cannot."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from noetlc.runtime.credentials import new_key
from noetlc.runtime.postgres.testing import must_not_skip
from noetlc.service.serving import Served, artifacts_dir
from noetlc.service.testing import TOKEN, b64
from tests.service.console_playbooks import chain, loop

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def _need(reason: str) -> None:
    if must_not_skip():
        pytest.fail(f"{reason} (CI=true)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists() and must_not_skip() and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"],
            capture_output=True,
            check=False,
        )
    if not Path(CHROMIUM).exists():
        _need(f"no Chromium at {CHROMIUM} (apt-get install -y chromium chromium-driver)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if must_not_skip():
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "-q", "playwright"], check=False
            )
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            _need("Playwright is not installed (pip install playwright)")
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("console")
    server = Served(f"sqlite:///{folder / 'noetl.db'}", folder, new_key(), token=TOKEN)
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        for text in (chain(20, "chain20", fail_last=True), loop(200), chain(1000, "chain1000")):
            reply = httpx.post(
                f"{server.url}/api/catalog/register",
                json={"content": b64(text)},
                headers=headers,
                timeout=300,
            )
            assert reply.status_code == 200, reply.text
        yield server
    finally:
        server.stop()


def _page(browser: Any, width: int = 1440) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors


def _run_from_the_list(page: Any, served: Served, path: str, workload: str) -> None:
    page.goto(f"{served.url}/?token={TOKEN}#/executions?run={path}")
    page.wait_for_selector("#run-path option", state="attached")
    assert page.input_value("#run-path") == path
    page.fill("#run-workload", workload)
    page.click("#run-button")
    page.wait_for_url("**#/execution/*")


def test_a_20_step_run_watched_live(browser: Any, served: Served) -> None:
    shots = artifacts_dir()
    page, errors = _page(browser)
    _run_from_the_list(page, served, "demo/chain20", '{"pause": 0.25}')
    page.wait_for_selector("#graph-box[data-ready='true']")
    assert page.locator("#graph g.node").count() == 20
    # a step is seen running, with the graph following it
    page.wait_for_selector("#graph g.node[data-state='running']", timeout=30000)
    page.wait_for_selector("#graph g.node[data-state='done']", timeout=30000)
    page.screenshot(path=str(shots / "console-20-running.png"))
    page.wait_for_selector("#head[data-ended='true']", timeout=60000)
    assert "FAILED" in page.inner_text("#exec-status")
    assert page.locator("#graph g.node[data-state='done']").count() == 19
    assert page.get_attribute("#graph g.node[data-step='s19']", "data-state") == "failed"
    # the failing step opens by itself: its error at the line that raised, and its logs
    page.wait_for_selector("#step-title[data-step='s19']")
    text = chain(20, "chain20", fail_last=True).splitlines()
    line = text.index("        raise ValueError('deliberate failure in s19')") + 1
    assert f"line {line}:9" in page.inner_text("#exec-error")
    assert "ValueError: deliberate failure in s19" in page.inner_text("#step-error")
    assert page.get_attribute(".error-source .src-line.hit", "data-line") == str(line)
    page.wait_for_selector("#step-logs[data-rows]")
    assert "step s19 says hello" in page.inner_text("#step-logs")
    page.screenshot(path=str(shots / "console-20-failed.png"))
    # the timeline follows: its newest event is in view
    assert "execution.failed" in page.inner_text("#timeline")
    page.select_option("#tl-kind", "errors")
    assert "next.selected" not in page.inner_text("#timeline")
    assert errors == []
    page.close()


def test_a_200_iteration_loop_watched_live(browser: Any, served: Served) -> None:
    shots = artifacts_dir()
    page, errors = _page(browser)
    _run_from_the_list(page, served, "demo/loop200", '{"pause": 0.15, "bad": 150}')
    node = "#graph g.node[data-step='each']"
    page.wait_for_selector(f"{node}[data-state='running']", timeout=30000)
    page.click(node)
    page.wait_for_selector("#loop-progress")
    seen = set()
    for _ in range(1200):  # the progress moves while the loop runs
        if page.get_attribute("#head", "data-ended"):
            break
        label = page.text_content(f"{node} text.progress") or ""
        seen.add(label.split(" ")[0])
        if len(seen) >= 3:
            break
        page.wait_for_timeout(50)
    assert len(seen) >= 2, seen  # at least two different counts seen while it ran
    page.screenshot(path=str(shots / "console-loop-running.png"))
    page.wait_for_selector("#head[data-ended='true']", timeout=90000)
    assert "FAILED" in page.inner_text("#exec-status")
    assert "item 150 is bad" in page.inner_text("#step-error")
    assert page.locator(".error-source .src-line.hit").count() == 1
    page.wait_for_selector("#step-logs[data-rows]")
    assert "item 150" in page.inner_text("#step-logs")
    # the failing iteration is listed with its error (iterations cancelled by the fail-fast
    # loop may be counted as failed too: how many depends on what was in flight)
    failing = page.locator("#step-panel tr[data-iteration='150']")
    assert "FAILED" in failing.inner_text() and "item 150 is bad" in failing.inner_text()
    assert " failed" in page.inner_text("#loop-progress")
    # the execution ended: nothing of the loop is shown running or in flight any more
    assert "0 in flight · 0 running" in page.inner_text("#loop-progress")
    assert "running" not in (page.text_content(f"{node} text.progress") or "")
    assert page.locator("#step-panel .badge.RUNNING").count() == 0
    page.screenshot(path=str(shots / "console-loop-failed.png"))
    assert errors == []
    page.close()


def _finished(served: Served, path: str) -> tuple[str, dict[str, Any]]:
    """Run `path` through the API and wait for its end."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    reply = httpx.post(f"{served.url}/api/execute", json={"path": path}, headers=headers)
    execution_id = reply.json()["execution_id"]
    for _ in range(3000):
        status = httpx.get(
            f"{served.url}/api/executions/{execution_id}/status", headers=headers
        ).json()
        if status["completed"]:
            return execution_id, status
        httpx.get(f"{served.url}/api/health")  # paces the loop without a sleep of its own
    raise AssertionError(f"{path} did not end: {status}")


def test_a_1000_step_graph_fits_and_zooms(browser: Any, served: Served) -> None:
    shots = artifacts_dir()
    execution_id, status = _finished(served, "demo/chain1000")
    assert status["status"] == "COMPLETED"
    page, errors = _page(browser)
    page.goto(f"{served.url}/?token={TOKEN}#/execution/{execution_id}")
    page.wait_for_selector("#graph-box[data-shown-ms]", timeout=120000)
    shown_ms = int(page.get_attribute("#graph-box", "data-shown-ms") or "0")
    assert "1000 step(s)" in page.inner_text("#graph-note")
    drawn = page.locator("#graph g.node").count()
    assert 0 < drawn <= 1000
    page.wait_for_function(
        f"document.querySelectorAll(\"#graph g.node[data-state='done']\").length === {drawn}",
        timeout=60000,
    )
    page.click("button[data-act='fit']")
    fitted = float(page.get_attribute("#graph", "data-zoom") or "0")
    box = page.locator("#graph").bounding_box()
    nodes = page.locator("#graph g.viewport").bounding_box()
    assert box and nodes and nodes["width"] <= box["width"] + 1  # all of it in view
    # too far out to read: each node is drawn as a thick border of its state's colour
    assert "far" in (page.get_attribute("#graph", "class") or "")
    page.screenshot(path=str(shots / "console-1000-fit.png"))
    for _ in range(12):  # zoom in until the labels are readable
        page.click("button[data-act='in']")
        if float(page.get_attribute("#graph", "data-zoom") or "0") >= 0.8:
            break
    assert float(page.get_attribute("#graph", "data-zoom") or "0") > fitted * 4
    assert "far" not in (page.get_attribute("#graph", "class") or "")
    page.screenshot(path=str(shots / "console-1000-zoom.png"))
    # a collapsed chain lists its steps
    page.click("button[data-act='fit']")
    page.locator("#graph g.node.chain").first.dispatch_event("click")
    page.wait_for_selector("#step-panel a[data-member]")
    (shots / "console-1000-timing.json").write_text(
        json.dumps({"graph_shown_ms": shown_ms, "nodes_drawn": drawn})
    )
    assert errors == []
    page.close()


def test_the_executions_list_and_the_catalog(browser: Any, served: Served) -> None:
    shots = artifacts_dir()
    _finished(served, "demo/chain20")
    _finished(served, "demo/loop200")
    page, errors = _page(browser)
    page.goto(f"{served.url}/?token={TOKEN}#/executions")
    page.wait_for_selector("#executions tr.row")
    page.fill("#f-text", "deliberate")
    page.wait_for_function(
        "[...document.querySelectorAll('#executions tr.row')].every("
        "(r) => r.textContent.includes('demo/chain20') && r.textContent.includes('FAILED'))"
    )
    page.fill("#f-text", "")
    page.select_option("#f-status", "COMPLETED")
    page.wait_for_function(
        "[...document.querySelectorAll('#executions tr.row .badge')]"
        ".every((b) => b.textContent === 'COMPLETED')"
    )
    page.select_option("#f-status", "")
    page.wait_for_function(  # the unfiltered list again (not the one of the last filter)
        "[...document.querySelectorAll('#executions tr.row .badge')]"
        ".some((b) => b.textContent === 'FAILED')"
    )
    page.screenshot(path=str(shots / "console-executions.png"))
    page.fill("#run-workload", "{not json")
    assert "invalid" in (page.get_attribute("#run-workload", "class") or "")

    page.goto(f"{served.url}/?token={TOKEN}#/catalog")
    page.wait_for_selector("#catalog tr.row")
    page.fill("#cat-search", "loop")
    assert page.locator("#catalog tr.row").count() == 1
    page.goto(f"{served.url}/?token={TOKEN}#/catalog/demo%2Floop200")
    page.wait_for_selector("#source .src-line")
    assert page.locator("#source .src-line").count() == len(loop(200).splitlines())
    page.screenshot(path=str(shots / "console-catalog.png"), full_page=True)
    # two versions: the diff between them
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for text in (chain(3, "diffed"), chain(3, "diffed").replace("says hello", "says goodbye")):
        reply = httpx.post(
            f"{served.url}/api/catalog/register", json={"content": b64(text)}, headers=headers
        )
        assert reply.status_code == 200, reply.text
    page.goto(f"{served.url}/?token={TOKEN}#/catalog/demo%2Fdiffed")
    page.wait_for_selector("#diff .d-add")
    assert page.input_value("#diff-a") == "1" and page.input_value("#diff-b") == "2"
    assert page.locator("#diff .d-del").count() == 3 and page.locator("#diff .d-add").count() == 3
    assert "says goodbye" in page.inner_text("#diff .d-add >> nth=0")
    page.screenshot(path=str(shots / "console-catalog-diff.png"), full_page=True)
    assert errors == []
    page.close()


LONELY = (
    "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: lonely, path: t/lonely}\n"
    "workflow:\n  - step: start\n    tool: {kind: noop}\n"
    "  - step: orphan\n    tool: {kind: noop}\n"
)


def test_the_address_token_is_kept_and_the_catalog_reads_summaries(
    browser: Any, served: Served
) -> None:
    """A `?token=` in the address is stored and taken out of the URL (only the event stream
    sends it as a parameter); the catalog lists summaries (`findings_count`) and fetches the
    chosen version's content and findings alone."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    registered = httpx.post(
        f"{served.url}/api/catalog/register",
        json={"content": b64(LONELY)},
        headers=headers,
        timeout=60,
    )
    assert registered.status_code == 200, registered.text
    findings = registered.json()["findings"]
    assert findings, "an unreachable step is a lint finding"
    page, errors = _page(browser)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{served.url}/?token={TOKEN}#/catalog")
    page.wait_for_selector("#catalog tr.row[data-path='t/lonely']")
    assert "token" not in page.url and page.url.endswith("#/catalog")
    assert page.evaluate("localStorage.getItem('noetl-token')") == TOKEN
    cells = page.locator("#catalog tr.row[data-path='t/lonely'] td")
    assert cells.nth(4).text_content() == str(len(findings))
    page.goto(f"{served.url}/#/catalog/t%2Flonely")  # the stored token, none in the address
    page.wait_for_selector("#findings a[data-line]")
    assert page.locator("#findings a[data-line]").count() == len(findings)
    assert page.locator("#source .src-line").count() == len(LONELY.splitlines())
    api_calls = [url for url in asked if "/api/" in url]
    assert api_calls and not [url for url in api_calls if "token=" in url]
    assert errors == []
    page.close()


def test_10000_steps_are_collapsed_and_laid_out_without_freezing(
    browser: Any, served: Served
) -> None:
    """The graph module on a 10,000-step graph (a chain with a fan-out, made in the page: no
    10,000-step compile needed): drawn collapsed, laid out in the worker while the page
    answers."""
    shots = artifacts_dir()
    page, errors = _page(browser)
    page.goto(f"{served.url}/?token={TOKEN}#/catalog")
    page.wait_for_selector("#catalog")
    page.evaluate(
        """async () => {
          const { createGraph } = await import("/static/js/graph.js");
          const steps = [], edges = [];
          for (let i = 0; i < 10000; i++) steps.push({ name: "s" + i, line: i + 1 });
          for (let i = 1; i < 9000; i++) edges.push({ source: "s" + (i - 1), target: "s" + i });
          for (let i = 9000; i < 10000; i++) edges.push({ source: "s8999", target: "s" + i });
          const main = document.getElementById("main");
          main.innerHTML = '<div class="panel graph-panel"><div id="graph-box"></div></div>';
          window.drawn = createGraph(document.getElementById("graph-box"), { steps, edges }, () => {});
          window.drawn.ready.then(() => { window.laidOut = true; });
        }"""
    )
    for _ in range(600):  # the page keeps answering (evaluate returns) while the worker works
        if page.evaluate("window.laidOut === true"):
            break
        page.wait_for_timeout(50)
    assert page.evaluate("window.laidOut === true")
    note = page.inner_text("#graph-note")
    assert "10000 step(s)" in note and "chains collapsed" in note
    drawn = page.locator("#graph g.node").count()
    assert 0 < drawn <= 1500
    page.evaluate("window.drawn.set('s5', 'done'); window.drawn.set('s9500', 'failed')")
    page.screenshot(path=str(shots / "console-10000.png"))
    assert errors == []
    page.close()
