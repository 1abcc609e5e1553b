"""An execution that fails outside its VM (it could not start, a server refused it) is
summarised in the shape of every other execution's summary (a reader of `summary` never
meets a missing key), and its log ends with `execution.failed` like any other."""

from __future__ import annotations

from pathlib import Path

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.driver import failed_summary
from noetlc.runtime.embedded import run_embedded

HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello.yaml"


def test_a_failed_start_has_the_keys_of_a_run_summary() -> None:
    unit = compile_source(HELLO.read_text())
    assert unit.payload is not None
    ran = run_embedded(unit.payload)
    error = {"code": "NOE850", "message": "could not start"}
    failed = failed_summary("x-1", error, 0)
    assert set(failed) == set(ran)
    assert failed["status"] == "failed" and failed["error"] == error
    assert failed["steps"] == {} and failed["result"] is None and failed["events"] == 0


def test_a_service_execution_that_cannot_start_is_failed_with_that_summary(
    tmp_path: Path,
) -> None:
    from noetlc.runtime.stored_program import encode_program
    from noetlc.service.engine import Engine

    unit = compile_source(HELLO.read_text())
    assert unit.payload is not None
    broken = tmp_path / "keychain.yaml"
    broken.write_text("[not: a keychain")  # the run stops at its keychain file
    engine = Engine(f"sqlite:///{tmp_path / 'noetl.db'}", keychain_file=str(broken))
    execution_id = engine.start(encode_program(unit.payload), "hello", {})
    thread, _stop = engine._running.get(execution_id, (None, None))
    if thread is not None:
        thread.join(30)
    record = engine.execution(execution_id)
    assert record is not None and record["status"] == "failed"
    summary = record["summary"]
    # the log ends with the failure (the store's invariant check after the test asserts
    # there is exactly one terminal event): its one event
    assert summary == failed_summary(execution_id, summary["error"], 1)
    assert summary["error"]["code"].startswith("NOE") and summary["error"]["message"]
    assert [e["name"] for e in engine.events(execution_id)] == ["execution.failed"]
