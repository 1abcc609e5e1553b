"""The nats tool against the NATS server (with JetStream) on NOETLC_TEST_NATS_URL, default
nats://127.0.0.1:4222: skipped with the reason when it is unreachable, except under CI
(`CI=true`), where `.ci/run` starts it and a missing server fails."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.registry import ToolContext, call_tool

URL = os.environ.get("NOETLC_TEST_NATS_URL", "nats://127.0.0.1:4222")


def _reachable(url: str) -> str | None:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 4222), 2):
            return None
    except OSError as exc:
        return f"NATS not reachable at {url}: {exc}"


@pytest.fixture(scope="module")
def url() -> str:
    reason = _reachable(URL)
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return URL


def nats(args: dict[str, object], keychain: Keychain | None = None) -> dict[str, object]:
    return call_tool("nats", args, None, ToolContext(keychain=keychain))


def test_key_value_put_get_keys_delete(url: str) -> None:
    bucket = f"t_{uuid.uuid4().hex[:8]}"
    put = nats({"url": url, "operation": "kv_put", "bucket": bucket, "key": "s1",
                "value": {"user_id": 1, "ok": True}})  # fmt: skip
    assert put["status"] == "ok" and put["result"]["revision"] >= 1  # type: ignore[index]
    got = nats({"url": url, "operation": "kv_get", "bucket": bucket, "key": "s1"})
    assert got["result"]["value"] == {"user_id": 1, "ok": True}  # type: ignore[index]
    assert got["result"]["found"] is True  # type: ignore[index]
    text = nats({"url": url, "op": "kv_put", "bucket": bucket, "key": "s2", "value": "plain"})
    assert text["status"] == "ok"
    keys = nats({"url": url, "operation": "kv_keys", "bucket": bucket})
    assert keys["result"]["keys"] == ["s1", "s2"]  # type: ignore[index]
    assert nats({"url": url, "operation": "kv_delete", "bucket": bucket, "key": "s1"})[
        "result"
    ] == {"bucket": bucket, "key": "s1", "deleted": True}
    gone = nats({"url": url, "operation": "kv_get", "bucket": bucket, "key": "s1"})
    assert gone["status"] == "ok" and gone["result"]["found"] is False  # type: ignore[index]


def test_a_missing_bucket_is_not_found(url: str) -> None:
    out = nats({"url": url, "operation": "kv_get", "bucket": f"none_{uuid.uuid4().hex[:6]}",
                "key": "k"})  # fmt: skip
    assert out["error"]["type"] == "NotFound"  # type: ignore[index]


def test_publish_reaches_a_subscriber_and_request_gets_the_reply(url: str) -> None:
    import nats as nats_client

    subject = f"noetlc.test.{uuid.uuid4().hex[:8]}"
    received: list[bytes] = []
    ready = threading.Event()
    stop = threading.Event()

    async def responder() -> None:
        nc = await nats_client.connect(url)

        async def on_message(msg: object) -> None:
            received.append(msg.data)  # type: ignore[attr-defined]
            if msg.reply:  # type: ignore[attr-defined]
                await msg.respond(b'{"echo": ' + msg.data + b"}")  # type: ignore[attr-defined]

        await nc.subscribe(subject, cb=on_message)
        await nc.flush()
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.02)
        await nc.close()

    thread = threading.Thread(target=asyncio.run, args=(responder(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        pub = nats({"url": url, "subject": subject, "data": {"n": 1}})
        assert pub["status"] == "ok", pub
        assert pub["result"]["bytes"] == len(b'{"n": 1}')  # type: ignore[index]
        reply = nats({"url": url, "operation": "request", "subject": subject, "payload": {"n": 2},
                      "timeout": 30})  # fmt: skip
        assert reply["status"] == "ok", reply
        assert reply["result"]["data"] == {"echo": {"n": 2}}  # type: ignore[index]
    finally:
        stop.set()
        thread.join(10)
    assert received[:2] == [b'{"n": 1}', b'{"n": 2}'], received


def test_request_without_listener_is_no_responders(url: str) -> None:
    out = nats({"url": url, "operation": "request", "subject": f"nobody.{uuid.uuid4().hex}",
                "data": "x", "timeout": 1})  # fmt: skip
    assert out["error"]["type"] in ("NoResponders", "Timeout")  # type: ignore[index]


def test_the_server_from_a_keychain_entry(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOETL_KEYCHAIN_NATS_CREDENTIAL", '{"url": "' + url + '"}')
    bucket = f"t_{uuid.uuid4().hex[:8]}"
    out = nats({"auth": "nats_credential", "operation": "kv_put", "bucket": bucket, "key": "a",
                "value": 1}, Keychain())  # fmt: skip
    assert out["status"] == "ok", out


def test_an_unreachable_server_is_a_retryable_connection_error() -> None:
    # a refused connection, with an overall limit no loaded machine reaches first: the
    # classification is tested, not the speed
    out = nats({"url": "nats://127.0.0.1:1", "subject": "x", "timeout": 60})
    assert out["error"]["type"] == "ConnectionError"  # type: ignore[index]
    assert out["error"]["retryable"] is True  # type: ignore[index]


@pytest.mark.parametrize(
    ("tool", "code"),
    [
        ("{kind: nats, operation: kv_get, key: k}", "NOE602"),  # no bucket
        ("{kind: nats, operation: publish}", "NOE602"),  # no subject
        ("{kind: nats, operation: kv_pop, bucket: b, key: k}", "NOE603"),
        ("{kind: nats, subjct: a}", "NOE601"),
    ],
)
def test_the_compiler_checks_nats_arguments(tool: str, code: str) -> None:
    diags = compile_source(f"workflow:\n  - step: start\n    tool: {tool}\n").reporter.sorted()
    assert code in [d.code for d in diags], [(d.code, d.message) for d in diags]


def test_a_playbook_puts_and_gets_through_nats(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from noetlc.cli import vm_main

    bucket = f"t_{uuid.uuid4().hex[:8]}"
    playbook = tmp_path / "kv.yaml"
    playbook.write_text(
        f"""
workload: {{url: "{url}", bucket: {bucket}, session: {{user_id: 7}}}}
workflow:
  - step: start
    tool:
      - {{name: put, kind: nats, url: "{{{{ workload.url }}}}", operation: kv_put,
          bucket: "{{{{ workload.bucket }}}}", key: s1, value: "{{{{ workload.session }}}}"}}
      - {{name: get, kind: nats, url: "{{{{ workload.url }}}}", operation: kv_get,
          bucket: "{{{{ workload.bucket }}}}", key: s1}}
"""
    )
    code = vm_main.main(["run", str(playbook), "--json", "--quiet", "--db", "memory:"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, summary
    assert summary["result"]["value"] == {"user_id": 7}
