"""Terminal escapes from untrusted sources reach no terminal raw, command by command.

The payloads (window title, OSC 52 clipboard write, clear screen, bidi override, a C1 CSI) come
from where a hostile party puts them: the endpoint's failure details and the model's reply text
(the real ``openai`` client against ``providers_fake_openai.FakeOpenAI`` on 127.0.0.1, the real
sandbox and store), a store directory's name, a file planted in a store, a path on the command
line. Each command's whole output (stdout and stderr, text and JSON) must hold none of them raw;
the text forms show them escaped, the JSON forms decode to the stored value.
"""

from __future__ import annotations

import dataclasses
import json
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from providers_fake_openai import FakeOpenAI, chat_error
from v2_support import config

from harness.cli import main
from harness.lock import project_root, write_lock
from harness.providers.loopback import Answer, FakeGemini, RecordedRequest
from harness.providers.loopback_sim import SimulatedResponder
from harness.store import RunStore

PAYLOAD = "\x1b]0;pwned-title\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[H\u202eevil\u202c\x9b31m"
SHOWN = "\\x1b]0;pwned-title\\x07\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\x1b[H\\u202eevil\\u202c\\x9b31m"
MODEL = "fake-model-1"
_UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"}


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lock") / "study-lock.json"
    write_lock(path, project_root())
    return path


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_inert(result: Result) -> str:
    """The command's whole output holds no terminal control; returns stdout and stderr."""
    text = result.stdout + result.stderr
    raw = sorted(
        {f"U+{ord(c):04X}" for c in text if unicodedata.category(c) in _UNSAFE} - {"U+000A"}
    )
    assert raw == [], text
    assert "Traceback" not in text
    return text


def _strings(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON document (keys and values)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _openai(fake: FakeOpenAI) -> list[str]:
    return [
        "--provider", "openai", "--model", MODEL, "--provider-base-url", fake.base_url,
        "--no-credential",
    ]  # fmt: skip


def test_provider_failure_details_in_run_audit_status_and_stores(
    tmp_path: Path, lock: Path
) -> None:
    """An endpoint refusing every call with a message full of escapes: the run's stop line,
    `audit`, `v2 status`, `stores` and their JSON forms show it inert."""
    with FakeOpenAI() as fake:
        fake.script(*[chat_error(401, f"bad key {PAYLOAD}")] * 8)
        store = tmp_path / "runs" / "store"
        run = _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *_openai(fake))
    assert run.exit_code == 75, run.output
    assert SHOWN in assert_inert(run)
    audit = _invoke("audit", str(store))
    assert audit.exit_code == 0, audit.output
    assert f"authentication_failed: 4 x HTTP 401: bad key {SHOWN}" in assert_inert(audit)
    as_json = _invoke("audit", str(store), "--json")
    assert_inert(as_json)
    assert any(PAYLOAD in text for text in _strings(json.loads(as_json.stdout)))
    status = _invoke("v2", "status", str(store))
    assert_inert(status)
    listed = _invoke("stores", str(tmp_path / "runs"))
    assert listed.exit_code == 0, listed.output
    assert_inert(listed)


class _Payloaded:
    """The simulated model behind the loopback Gemini endpoint, its critic's reason prefixed
    with the payload (what a hostile or compromised model could say)."""

    def __init__(self) -> None:
        self._inner = SimulatedResponder(config().generation_config)

    def __call__(self, recorded: RecordedRequest) -> Answer:
        answer = self._inner(recorded)
        doc = json.loads(answer.payload)
        part = doc["candidates"][0]["content"]["parts"][0]
        value = json.loads(part["text"])
        if isinstance(value, dict) and isinstance(value.get("reason"), str):
            value["reason"] = PAYLOAD + value["reason"]
        part["text"] = json.dumps(value)
        return dataclasses.replace(answer, payload=json.dumps(doc).encode())


CRITIC_CELL = "w10-lookup.clean.full_trace.s1"


@pytest.fixture(scope="module")
def model_store(tmp_path_factory: pytest.TempPathFactory, lock: Path) -> Path:
    base = tmp_path_factory.mktemp("model")
    key = base / "gemini.key"
    key.write_text("fake-key-terminal-escapes-0123456789\n")
    store = base / "store"
    with FakeGemini(responder=_Payloaded(), record=False) as fake:
        run = _invoke(
            "v2", "run", "--store", str(store), "--lock", str(lock), "--provider", "gemini",
            "--credential-file", str(key), "--provider-base-url", fake.base_url,
            "--cells", CRITIC_CELL,
        )  # fmt: skip
    assert run.exit_code == 0, run.output
    assert_inert(run)
    return store


def test_model_text_in_v2_show(model_store: Path) -> None:
    shown = _invoke("v2", "show", str(model_store), CRITIC_CELL)
    assert shown.exit_code == 0, shown.output
    text = assert_inert(shown)
    assert f"  critic: complete: {SHOWN}" in text
    as_json = _invoke("v2", "show", str(model_store), CRITIC_CELL, "--json")
    assert as_json.exit_code == 0, as_json.output
    assert_inert(as_json)
    assert any(PAYLOAD in text for text in _strings(json.loads(as_json.stdout)))
    assert_inert(_invoke("v2", "cells", str(model_store)))
    assert_inert(_invoke("audit", str(model_store)))


def test_directory_names_in_stores(tmp_path: Path) -> None:
    parent = tmp_path / "runs"
    parent.mkdir()
    with RunStore.create(parent / f"run-{PAYLOAD}", b"lock\n", [{"cell": 0}]) as writer:
        writer.commit_cell(0, {"row": 0}, [])
    listed = _invoke("stores", str(parent))
    assert listed.exit_code == 0, listed.output
    assert f"run-{SHOWN}" in assert_inert(listed)
    assert len(listed.stdout.splitlines()) == 2  # the header and one row: no line injected
    as_json = _invoke("stores", str(parent), "--json")
    assert_inert(as_json)
    assert json.loads(as_json.stdout)["runs"][0]["id"] == f"run-{PAYLOAD}"


def test_store_contents_and_paths_in_store_verify_and_errors(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, b"lock\n", [{"cell": 0}]) as writer:
        writer.commit_cell(0, {"row": 0}, [])
    (root / f"planted-{PAYLOAD}").symlink_to("/etc/hostname")
    verify = _invoke("store", "verify", str(root))
    assert verify.exit_code == 3, verify.output
    assert f"planted-{SHOWN} is a symbolic link" in assert_inert(verify)
    assert_inert(_invoke("store", "verify", str(root), "--json"))
    missing = _invoke("audit", str(tmp_path / f"missing-{PAYLOAD}"))
    assert missing.exit_code == 2
    assert f"missing-{SHOWN}" in assert_inert(missing)
