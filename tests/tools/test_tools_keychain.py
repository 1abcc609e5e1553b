"""The keychain: providers, declared defaults, clear errors (NOE812/813), redaction, and the
secrets tool (a secret never appears in a redacted outcome)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from noetlc.stdlib_tools.keychain import Keychain, KeychainError, env_var
from noetlc.stdlib_tools.registry import ToolContext, call_tool


def test_env_var_names() -> None:
    assert env_var("pg-main.v2") == "NOETL_KEYCHAIN_PG_MAIN_V2"


def test_environment_values_are_strings_or_json() -> None:
    chain = Keychain(
        env={
            "NOETL_KEYCHAIN_TOKEN": "123456",  # digits stay a string: passwords are text
            "NOETL_KEYCHAIN_PG": '{"host": "db", "password": "pw-1234"}',
            "NOETL_KEYCHAIN_ODD": "{not json",
        }
    )
    assert chain.resolve("token") == "123456"
    assert chain.resolve("pg") == {"host": "db", "password": "pw-1234"}
    assert chain.resolve("odd") == "{not json"


def test_file_provider_default_file_and_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "keys.json"
    file.write_text(json.dumps({"api": "from-file", "only_file": {"token": "t-file"}}))
    chain = Keychain(file=file, env={"NOETL_KEYCHAIN_API": "from-env"})
    assert chain.resolve("api") == "from-env"
    assert chain.resolve("only_file") == {"token": "t-file"}
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".noetl").mkdir()
    (tmp_path / ".noetl" / "keychain.yaml").write_text("api: from-default-file\n")
    assert Keychain(env={}).resolve("api") == "from-default-file"


def test_declared_fields_are_defaults_and_not_secret() -> None:
    chain = Keychain(
        [{"name": "pg", "kind": "postgres_credential", "host": "db.internal", "port": 5432}],
        env={"NOETL_KEYCHAIN_PG": '{"user": "app", "password": "hunter22"}'},
    )
    assert chain.resolve_all() == {
        "pg": {"host": "db.internal", "port": 5432, "user": "app", "password": "hunter22"}
    }
    assert chain.redact("host db.internal, password hunter22") == "host db.internal, password ***"


def test_a_missing_entry_is_noe812_naming_the_env_var() -> None:
    chain = Keychain([{"name": "pg_main", "kind": "postgres_credential"}], env={})
    with pytest.raises(KeychainError) as caught:
        chain.resolve_all()
    assert caught.value.code == "NOE812"
    assert "NOETL_KEYCHAIN_PG_MAIN" in (caught.value.hint or "")
    assert caught.value.render().startswith("error[NOE812]: keychain entry `pg_main` is not set")
    out = call_tool(
        "secrets", {"key": "pg_main"}, None, ToolContext(keychain=chain)
    )  # as a tool outcome: the same code and hint
    assert out["error"]["code"] == "NOE812" and "NOETL_KEYCHAIN_PG_MAIN" in out["error"]["hint"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [("- a\n- b\n", "must be a mapping"), ("a: [unclosed\n", "not valid YAML")],
)
def test_a_bad_keychain_file_is_noe813(tmp_path: Path, text: str, reason: str) -> None:
    file = tmp_path / "k.yaml"
    file.write_text(text)
    with pytest.raises(KeychainError) as caught:
        Keychain(file=file)
    assert caught.value.code == "NOE813" and reason in str(caught.value)
    with pytest.raises(KeychainError) as missing:
        Keychain(file=tmp_path / "absent.yaml")
    assert missing.value.code == "NOE813"


def test_redaction_copies_and_masks_every_secret_string() -> None:
    chain = Keychain(
        env={
            "NOETL_KEYCHAIN_DSN": "postgresql://app:pa55word@h/db",
            "NOETL_KEYCHAIN_SHORT": "abc",
            "NOETL_KEYCHAIN_API": '{"token": "tok-9876", "region": "eu"}',
        }
    )
    for name in ("dsn", "short", "api"):
        chain.resolve(name)
    event = {
        "payload": ["connect postgresql://app:pa55word@h/db failed", "auth pa55word"],
        "tok-9876": {"n": 1, "t": "Bearer tok-9876", "s": "abc", "word": "abcdef"},
        "region": "eu",
    }
    redacted = chain.redact(event)
    assert redacted == {
        "payload": ["connect postgresql://app:***@h/db failed", "auth ***"],
        "***": {"n": 1, "t": "Bearer ***", "s": "***", "word": "abcdef"},
        "region": "eu",  # shorter than 4 characters and a field of a mapping: not masked
    }
    assert event["region"] == "eu" and "tok-9876" in event  # the original is untouched


def test_the_secrets_tool_result_is_the_value_and_is_redacted_everywhere() -> None:
    chain = Keychain(env={"NOETL_KEYCHAIN_API_TOKEN": "s3cr3t-value"})
    ctx = ToolContext(keychain=chain, task="fetch_token")
    out = call_tool("secrets", {"key": "api_token"}, None, ctx)
    assert out["status"] == "ok" and out["result"] == "s3cr3t-value"
    assert "s3cr3t-value" not in json.dumps(chain.redact(out))
    leaked = call_tool("shell", {"command": "echo s3cr3t-value >&2; exit 1"}, None, ctx)
    assert "s3cr3t-value" not in leaked["error"]["message"]  # error texts are redacted


def test_the_secrets_tool_defaults_to_the_task_name_and_reads_plain_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_SECRET", "plain-env-secret")
    chain = Keychain(env={"NOETL_KEYCHAIN_TEST_SECRET": "keychain-secret"})
    by_name = call_tool("secrets", {}, None, ToolContext(keychain=chain, task="TEST_SECRET"))
    assert by_name["result"] == "keychain-secret"
    env = call_tool(
        "secrets", {"provider": "env"}, None, ToolContext(keychain=chain, task="TEST_SECRET")
    )
    assert env["result"] == "plain-env-secret"
    assert chain.redact("x plain-env-secret") == "x ***"
    nameless = call_tool("secrets", {}, None, ToolContext(keychain=chain))
    assert nameless["error"]["type"] == "ToolArgumentError"


def test_masking_is_by_field_in_every_encoded_form() -> None:
    import base64
    from urllib.parse import quote

    password = 'p@ss/w0rd+"quoted"\n'
    chain = Keychain(
        env={
            "NOETL_KEYCHAIN_PG": json.dumps(
                {
                    "user": "analyst",
                    "host": "db.internal",
                    "port": 5432,
                    "database": "sales",
                    "password": password,
                    "dsn": f"postgresql://analyst:{quote(password, safe='')}@db.internal:5432/sales",
                    "nested": {"private_key": "-----BEGIN KEY-----\nabcdef\n-----END KEY-----"},
                    "api_token": "tok-0123456789",
                }
            )
        }
    )
    chain.resolve("pg")
    forms = [
        password,
        quote(password, safe=""),
        base64.b64encode(password.encode()).decode(),
        json.dumps(password)[1:-1],
        base64.b64encode(f"analyst:{password}".encode()).decode(),  # basic auth
        "-----BEGIN KEY-----\nabcdef\n-----END KEY-----",
        json.dumps("-----BEGIN KEY-----\nabcdef\n-----END KEY-----")[1:-1],
        "tok-0123456789",
    ]
    for form in forms:
        masked = chain.redact(f"[{form}]")
        assert form not in masked, (form, masked)
    text = "postgresql://analyst:***@db.internal:5432/sales user analyst port 5432 db sales"
    shown = chain.redact(
        f"postgresql://analyst:{quote(password, safe='')}@db.internal:5432/sales"
        " user analyst port 5432 db sales"
    )
    assert shown == text  # user, host, port and database stay readable


def test_a_mapping_of_unknown_fields_is_masked_whole_but_for_plain_names() -> None:
    chain = Keychain(env={"NOETL_KEYCHAIN_X": '{"value": "opaque-123", "host": "h.example"}'})
    chain.resolve("x")
    assert chain.redact("opaque-123 at h.example") == "*** at h.example"
