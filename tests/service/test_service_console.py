"""The web console in a real headless Chromium (Debian's `chromium`, driven by Playwright with
its `executable_path`): load the executions page, start an execution from it, watch its steps
turn done on the step graph, open the catalog view; screenshots go to the test artifacts
folder. Outside CI a missing browser or Playwright skips with the reason; under CI the test
installs what it needs (apt-get, as root) and fails when it cannot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from noetlc.runtime.credentials import new_key
from noetlc.runtime.postgres.testing import must_not_skip
from noetlc.service.serving import Served, artifacts_dir
from noetlc.service.testing import TOKEN, b64

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
CHAIN = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: console_chain, path: demo/console_chain}
workload: {pause: 0.4}
workflow:
  - step: start
    tool: {kind: python, input: {p: "{{ workload.pause }}"}, code: "import time; time.sleep(p); result = {'n': 1}"}
    next: middle
  - step: middle
    tool: {kind: python, input: {n: "{{ start.n }}"}, code: "import time; time.sleep(0.4); result = {'n': n + 1}"}
    next: finish
  - step: finish
    tool: {kind: python, input: {n: "{{ middle.n }}"}, code: "result = {'n': n + 1}"}
"""


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


def test_the_console_shows_an_execution_live(browser: object, tmp_path: Path) -> None:
    served = Served(f"sqlite:///{tmp_path / 'noetl.db'}", tmp_path, new_key(), token=TOKEN)
    shots = artifacts_dir()
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        reply = httpx.post(
            f"{served.url}/api/catalog/register", json={"content": b64(CHAIN)}, headers=headers
        )
        assert reply.status_code == 200, reply.text
        page = browser.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{served.url}/?token={TOKEN}#/executions")
        page.wait_for_selector("#run-path option", state="attached")
        assert page.input_value("#run-path") == "demo/console_chain"
        page.fill("#run-workload", '{"pause": 0.6}')
        page.click("#run-button")
        page.wait_for_url("**#/execution/*")
        page.wait_for_selector("#graph g.node")
        assert page.locator("#graph g.node").count() == 3
        # the first step runs while the others wait
        page.wait_for_selector(
            "#graph g.node[data-state='running'], #graph g.node[data-state='done']"
        )
        page.wait_for_function(
            "document.querySelectorAll(\"#graph g.node[data-state='done']\").length === 3",
            timeout=30000,
        )
        page.wait_for_selector("#head[data-ended='true']")
        assert "COMPLETED" in page.inner_text("#exec-status")
        assert page.locator(".step-result").count() == 3
        assert '"n": 3' in page.inner_text(".step-result[data-step='finish']")
        assert "workflow.finished" in page.inner_text("#timeline")
        page.screenshot(path=str(shots / "console-execution.png"), full_page=True)

        page.goto(f"{served.url}/?token={TOKEN}#/executions")
        page.wait_for_selector("#executions tr.row")
        page.select_option("#f-status", "COMPLETED")
        page.wait_for_function("document.getElementById('count').textContent === '1 execution(s)'")
        page.select_option("#f-status", "FAILED")
        page.wait_for_function("document.getElementById('count').textContent === '0 execution(s)'")
        page.select_option("#f-status", "")
        page.wait_for_selector("#executions tr.row")
        page.screenshot(path=str(shots / "console-executions.png"), full_page=True)

        page.goto(f"{served.url}/?token={TOKEN}#/catalog/demo%2Fconsole_chain")
        page.wait_for_selector(".source")
        assert "console_chain" in page.inner_text(".source")
        page.screenshot(path=str(shots / "console-catalog.png"), full_page=True)
        assert errors == []
        page.close()
    finally:
        served.stop()
    assert (shots / "console-execution.png").stat().st_size > 0
    assert os.path.getsize(shots / "console-executions.png") > 0
