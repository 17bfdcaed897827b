"""Explicit credential input: named sources only, clear errors that never quote the key, and no
key left where a child process could inherit it."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from harness.errors import CredentialError
from harness.providers import (
    Credential,
    CredentialSource,
    ProviderName,
    load_credential,
    open_provider,
    scrub_ambient,
    select_provider,
)
from harness.providers.gemini import GeminiProvider

KEY = "AIzaSECRET-credential-test-9876543210"


def test_credential_from_file(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text(KEY + "\n")
    credential = load_credential(CredentialSource(kind="file", name=str(path)))
    assert credential.reveal() == KEY
    assert KEY not in repr(credential)
    assert KEY not in str(credential)
    assert str(path) in repr(credential)


def test_credential_from_env_is_removed_after_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_TEST_KEY", KEY)
    credential = load_credential(CredentialSource(kind="env", name="HARNESS_TEST_KEY"))
    assert credential.reveal() == KEY
    assert "HARNESS_TEST_KEY" not in os.environ


def test_credential_refuses_pickling(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text(KEY)
    credential = load_credential(CredentialSource(kind="file", name=str(path)))
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(credential)


def test_credential_redaction() -> None:
    credential = Credential(KEY, CredentialSource(kind="env", name="X"))
    assert credential.redact(f"a {KEY} b {KEY}") == "a [REDACTED] b [REDACTED]"
    assert credential.redact_bytes(b"x" + KEY.encode()) == (b"x[REDACTED]", True)
    assert credential.redact_bytes(b"clean") == (b"clean", False)


@pytest.mark.parametrize(
    "key", [KEY, "ect-local-7Hq2Zp9Lw4Xv", 'k/"\\%u0041-odd'], ids=["google", "odd", "escapes"]
)
def test_credential_redaction_finds_every_spelling_a_decoder_turns_into_the_key(key: str) -> None:
    credential = Credential(key, CredentialSource(kind="env", name="X"))
    once = json.dumps(key)[1:-1]
    every = json.dumps(key, ensure_ascii=True).replace(key[0], f"\\u{ord(key[0]):04x}", 1)[1:-1]
    spellings = [
        key,
        once,  # JSON-escaped where it must be
        every,  # the first character as \uXXXX
        json.dumps(every)[1:-1],  # JSON inside JSON
        f"\\u{ord(key[0]):04X}{once[1:]}",  # upper-case hex digits
        "".join(f"%{ord(c):02X}" for c in key),  # percent-escaped
    ]
    for spelling in spellings:
        text = f'{{"id": "{spelling}", "tail": 1}}'
        clean = credential.redact(text)
        assert clean == '{"id": "[REDACTED]", "tail": 1}', spelling
        assert credential.redact_bytes(text.encode()) == (clean.encode(), True)
    assert credential.scan().offsets(f"ab{every}".encode()) == [2]
    value, found = credential.redact_value({"a": [f"x {key}"], key: (1, key)})
    assert found
    assert value == {"a": ["x [REDACTED]"], "[REDACTED]": (1, "[REDACTED]")}
    assert credential.redact_value({"a": ["clean"]}) == ({"a": ["clean"]}, False)
    assert key not in repr(credential.scan())
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(credential.scan())


def _bad_file(tmp_path: Path, content: bytes | None) -> CredentialSource:
    path = tmp_path / "key"
    if content is not None:
        path.write_bytes(content)
    return CredentialSource(kind="file", name=str(path))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"^credential file '.*key' does not exist$"),
        (b"", r"^credential file '.*key' is empty$"),
        (b"  \n\n", r"^credential file '.*key' is empty$"),
        (KEY.encode() + b"\n" + KEY.encode(), r"must hold one API key"),
        (b"two words", r"must hold one API key"),
        (b"\xff\xfe" + KEY.encode(), r"must hold one API key"),
    ],
    ids=["missing", "empty", "blank", "two-lines", "spaces", "not-ascii"],
)
def test_credential_file_errors_are_one_line_without_content(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    with pytest.raises(CredentialError, match=message) as caught:
        load_credential(_bad_file(tmp_path, content))
    text = str(caught.value)
    assert "\n" not in text
    assert KEY not in text
    assert "words" not in text


def test_credential_file_that_is_a_directory(tmp_path: Path) -> None:
    source = CredentialSource(kind="file", name=str(tmp_path))
    with pytest.raises(CredentialError, match=r"is a directory$"):
        load_credential(source)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a mode-000 file")
def test_credential_file_unreadable(tmp_path: Path) -> None:
    source = _bad_file(tmp_path, KEY.encode())
    Path(source.name).chmod(0)
    with pytest.raises(CredentialError, match=r"^cannot read credential file"):
        load_credential(source)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("HARNESS_UNSET_KEY", None, r"^credential variable 'HARNESS_UNSET_KEY' is not set$"),
        ("HARNESS_EMPTY_KEY", "", r"^credential variable 'HARNESS_EMPTY_KEY' is empty$"),
        ("BAD-NAME", None, r"is not a valid variable name$"),
        ("HARNESS_SPACE_KEY", f"{KEY} {KEY}", r"must hold one API key"),
    ],
    ids=["unset", "empty", "bad-name", "two-words"],
)
def test_credential_env_errors(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str | None, message: str
) -> None:
    if value is not None:
        monkeypatch.setenv(name, value)
    with pytest.raises(CredentialError, match=message) as caught:
        load_credential(CredentialSource(kind="env", name=name))
    assert KEY not in str(caught.value)


def test_scrub_ambient_removes_google_and_gemini_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "gemini_x"):
        monkeypatch.setenv(name, "v")
    monkeypatch.setenv("HARNESS_KEEP", "v")
    with structlog.testing.capture_logs() as events:
        removed = scrub_ambient()
    assert removed == ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "gemini_x")
    assert os.environ["HARNESS_KEEP"] == "v"
    assert events[0]["event"] == "provider.environment.scrubbed"
    assert events[0]["names"] == list(removed)


def test_open_gemini_leaves_no_key_for_a_child_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CHILD_KEY", KEY)
    monkeypatch.setenv("GOOGLE_API_KEY", "ambient")
    selection = select_provider(
        "gemini",
        credential_file=None,
        credential_env="HARNESS_CHILD_KEY",
        base_url="http://127.0.0.1:9/",
    )
    provider = open_provider(selection)
    assert isinstance(provider, GeminiProvider)
    assert provider.name is ProviderName.GEMINI
    # A real child, inheriting the environment as any tool worker would.
    child = subprocess.run(
        [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    inherited = json.loads(child.stdout)
    assert KEY not in child.stdout
    assert "HARNESS_CHILD_KEY" not in inherited
    assert not [n for n in inherited if n.upper().startswith(("GOOGLE_", "GEMINI_"))]
    provider.close()


def test_open_gemini_with_a_missing_credential_file_is_one_clear_error(tmp_path: Path) -> None:
    selection = select_provider(
        "gemini", credential_file=tmp_path / "nope", credential_env=None, base_url=None
    )
    with pytest.raises(CredentialError, match=r"^credential file '.*nope' does not exist$"):
        open_provider(selection)
