"""Secrets stay secret whatever their type: numbers and nested values are masked in events,
the stored summary, error messages and results stored by reference; a step reads another
step's secret-bearing result as `***` in a plain run, as after a resume and in distributed
mode (the log is what every mode reads)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import SQLiteStore
from noetlc.stdlib_tools.keychain import MASK, Keychain

PIN = 98765432
PASSWORD = 55554444

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: secrets, path: t/secrets}
keychain:
  - {name: pin, kind: secret}
  - {name: db, kind: secret}
workflow:
  - step: start
    tool:
      kind: python
      input: {pin: "{{ keychain.pin }}", db: "{{ keychain.db }}"}
      code: |
        result = {"pin": pin, "password": db["password"], "said": f"pin {pin} ok",
                  "big": "x" * 1200000 + str(pin)}
    next: echo
  - step: echo
    tool:
      kind: python
      input: {seen: "{{ start.pin }}", said: "{{ start.said }}"}
      code: |
        result = {"seen": seen, "said": said}
    next: boom
  - step: boom
    tool:
      kind: python
      input: {pin: "{{ keychain.pin }}"}
      code: |
        raise ValueError(f"wrong pin {pin}")
"""


def _run(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    keychain = tmp_path / "keychain.yaml"
    keychain.write_text(f"pin: {PIN}\ndb: {{user: admin, password: {PASSWORD}}}\n")
    unit = compile_source(PLAYBOOK, "secrets.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    db = tmp_path / "noetl.db"
    store = SQLiteStore(str(db))
    try:
        summary = run_embedded(unit.payload, {}, store, keychain_file=str(keychain))
    finally:
        store.close()
    return summary, db


def _everything_stored(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        texts = []
        for table in tables:
            for row in conn.execute(f"select * from {table}"):
                for cell in row:
                    if isinstance(cell, bytes):
                        texts.append(cell.decode("utf-8", "replace"))
                    else:
                        texts.append(str(cell))
    return "\n".join(texts)


def test_numeric_and_nested_secrets_are_masked_everywhere(tmp_path: Path) -> None:
    summary, db = _run(tmp_path)
    assert summary["status"] == "failed"  # `boom` raised, quoting the pin
    stored = _everything_stored(db)
    assert "x" * 1000 in stored  # the big result is stored (by reference)
    for secret in (str(PIN), str(PASSWORD)):
        assert secret not in stored, f"{secret} is stored in plain text"
        assert secret not in json.dumps(summary)
    assert MASK in stored


def test_a_step_sees_a_secret_as_the_log_keeps_it(tmp_path: Path) -> None:
    summary, _ = _run(tmp_path)
    echo = summary["steps"]["echo"]["result"]
    # the same view in a plain run, after a resume (the VM rebuilt from the log) and in
    # distributed mode (results travel through the log)
    assert echo == {"seen": MASK, "said": f"pin {MASK} ok"}


def test_the_keychain_masks_numbers_by_value_and_inside_text() -> None:
    chain = Keychain(env={"NOETL_KEYCHAIN_PIN": str(PIN)}, file=None)
    chain.register(PIN)
    chain.register({"password": PASSWORD, "port": 5432, "nested": [{"token": 123456789}]})
    masked = chain.redact(
        {"a": PIN, "b": [PASSWORD, 123456789], "c": f"pin={PIN}", "port": 5432, "n": 7, "f": 1.5}
    )
    assert masked == {
        "a": MASK,
        "b": [MASK, MASK],
        "c": f"pin={MASK}",
        "port": 5432,
        "n": 7,
        "f": 1.5,
    }
    assert chain.redact({"flag": True}) == {"flag": True}
