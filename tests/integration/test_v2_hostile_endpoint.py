"""``harness v2 run`` against an endpoint that answers what no model should: the real clients,
the real sandbox and store, a loopback fake (nothing leaves the machine).

Replies of 100 MB, an endless body and a gzip bomb are failed attempts (``response_too_large``)
that keep only their first bytes; the run goes on and finalizes, and the store verifies and
audits.

An endpoint that echoes the key it was sent into every field it writes (Gemini ``responseId``
and ``modelVersion``, OpenAI ``id`` and ``model``, the model's own text), raw and JSON-escaped:
the key has a shape no credential pattern knows, so only the run's own key, given to the
audit and the export, finds it. Nothing stored holds it in any spelling; the audit passes and
the export writes a bundle without it; a store that does hold it is refused by both.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from providers_fake_gemini import (
    Answer,
    FakeGemini,
    RecordedRequest,
    drip,
    endless,
    gzip_bomb,
    huge,
)
from providers_fake_openai import FakeOpenAI, SimulatedChat

from harness.cli import main
from harness.lock import project_root, write_lock
from harness.providers import default_generation_config
from harness.providers.limits import KEPT_PREFIX_BYTES
from harness.providers.loopback_sim import SimulatedResponder
from harness.store import read_store, verify_store
from harness.store._files import MAX_BLOB

KEY = "fake-key-hostile-0123456789abcdef"


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lock") / "study-lock.json"
    write_lock(path, project_root())
    return path


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "provider.key"
    path.write_text(KEY + "\n")
    return path


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _attempts(store: Path) -> list[dict[str, Any]]:
    return [a for cell in read_store(store).cells for a in cell.audit]


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_v2_run_through_oversized_replies_goes_on_and_finalizes(
    tmp_path: Path, lock: Path, key: Path, provider: str
) -> None:
    store = tmp_path / "store"
    hostile = (huge(100_000_000), endless(), gzip_bomb())
    if provider == "gemini":
        with FakeGemini() as gemini:
            gemini.script(*hostile)
            flags = ["--provider", "gemini", "--provider-base-url", gemini.base_url]
            result = _invoke(
                "v2", "run", "--store", str(store), "--lock", str(lock), "--limit", "2",
                *flags, "--credential-file", str(key),
            )  # fmt: skip
    else:
        with FakeOpenAI() as chat:
            chat.script(*hostile)
            flags = ["--provider", "openai", "--model", "fake-model"]
            result = _invoke(
                "v2", "run", "--store", str(store), "--lock", str(lock), "--limit", "2",
                *flags, "--provider-base-url", chat.base_url, "--credential-file", str(key),
            )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.stderr
    verified = verify_store(store)
    assert verified
    assert verified.cells == 2
    assert verified.manifest_digest is not None  # finalized
    attempts = _attempts(store)
    too_large = [a for a in attempts if a["failure_kind"] == "response_too_large"]
    assert len(too_large) == 3
    assert all(a["response_bytes"] == KEPT_PREFIX_BYTES for a in too_large)
    assert all(p.stat().st_size <= MAX_BLOB for p in (store / "blobs").iterdir())
    assert max(p.stat().st_size for p in (store / "blobs").iterdir()) <= 1 << 20
    audit = _invoke("audit", str(store))
    assert audit.exit_code == 0, audit.output
    assert "response_too_large 3" in audit.stdout


# No credential pattern matches this shape: only the run's own key finds it.
ODD_KEY = "ect-local-7Hq2Zp9Lw4Xv"


def _escaped(key: str) -> str:
    """``key`` with its first letter as a JSON ``\\u`` escape (decodes to the key)."""
    return f"\\u{ord(key[0]):04x}{key[1:]}"


def _with_key(text: str, key: str) -> str:
    """A JSON action or decision with the key in its free-text fields, raw and escaped."""
    value = json.loads(text)
    for field in ("message", "reason"):
        if isinstance(value.get(field), str):
            value[field] += f" (key {key})"
    return json.dumps(value)


class _EchoGemini:
    """The simulated answers, with the key it was sent written back into every field."""

    def __init__(self) -> None:
        self._inner = SimulatedResponder(default_generation_config())

    def __call__(self, recorded: RecordedRequest) -> Answer:
        key = recorded.headers["x-goog-api-key"]
        answer = self._inner(recorded)
        doc = json.loads(answer.payload)
        for candidate in doc.get("candidates", []):
            for part in candidate["content"]["parts"]:
                part["text"] = _with_key(part["text"], key)
        doc["responseId"] = key
        doc["modelVersion"] = "@@"
        payload = json.dumps(doc).replace('"@@"', f'"{_escaped(key)}"').encode()
        return Answer("reply", status=answer.status, payload=payload)


class _EchoChat:
    """The simulated chat answers, with the bearer key written back into every field."""

    def __init__(self) -> None:
        self._inner = SimulatedChat()

    def __call__(self, recorded: RecordedRequest) -> Answer:
        key = recorded.headers["authorization"].removeprefix("Bearer ")
        answer = self._inner(recorded)
        doc = json.loads(answer.payload)
        for choice in doc.get("choices", []):
            choice["message"]["content"] = _with_key(choice["message"]["content"], key)
        doc["id"] = "@@"
        doc["model"] = key
        payload = json.dumps(doc).replace('"@@"', f'"{_escaped(key)}"').encode()
        return Answer("reply", status=answer.status, payload=payload)


def _holds_key(root: Path, key: str) -> list[str]:
    """Files holding ``key`` raw, escaped as the endpoint wrote it, or escaped once more (the
    candidate text is JSON inside JSON). Independent of the harness's own matcher."""
    escaped = _escaped(key)
    spellings = [s.encode() for s in (key, escaped, escaped.replace("\\", "\\\\"))]
    return [
        path.relative_to(root).as_posix()
        for path in sorted(root.rglob("*"))
        if path.is_file() and any(s in path.read_bytes() for s in spellings)
    ]


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_an_echoing_endpoint_never_puts_the_key_in_the_store_or_the_bundle(
    tmp_path: Path, lock: Path, provider: str
) -> None:
    key = tmp_path / "odd.key"
    key.write_text(ODD_KEY + "\n")
    store = tmp_path / "store"
    common = ("v2", "run", "--store", str(store), "--lock", str(lock), "--limit", "2")
    if provider == "gemini":
        with FakeGemini(responder=_EchoGemini()) as gemini:
            result = _invoke(
                *common, "--provider", "gemini", "--provider-base-url", gemini.base_url,
                "--credential-file", str(key),
            )  # fmt: skip
            sent = gemini.generate_requests
    else:
        with FakeOpenAI(_EchoChat()) as chat:
            result = _invoke(
                *common, "--provider", "openai", "--model", "fake-model",
                "--provider-base-url", chat.base_url, "--credential-file", str(key),
            )  # fmt: skip
            sent = chat.chat_requests
    assert result.exit_code == 0, result.output
    assert sent  # the endpoint did get the key, and echoed it in every reply
    assert _holds_key(store, ODD_KEY) == []
    attempts = [a for a in _attempts(store) if a["role"] != "preflight"]
    assert attempts
    assert all(a["redacted"] for a in attempts)
    assert all(a["response_id"] == "[REDACTED]" for a in attempts)
    assert all(a["model_version"] == "[REDACTED]" for a in attempts)
    # The shape scan alone cannot see this key; the run's own key is checked when given.
    shapes_only = _invoke("audit", str(store))
    assert shapes_only.exit_code == 0, shapes_only.output
    assert "the run's key: not checked" in shapes_only.stdout
    audited = _invoke("audit", str(store), "--credential-file", str(key))
    assert audited.exit_code == 0, audited.output
    assert "the run's key: not found" in audited.stdout
    assert _invoke("v2", "report", str(store)).exit_code == 0
    unkeyed = _invoke("export", str(store), str(tmp_path / "refused"))
    assert unkeyed.exit_code != 0
    assert "was made with an API key" in unkeyed.stderr
    assert not (tmp_path / "refused").exists()
    bundle = tmp_path / "bundle"
    exported = _invoke("export", str(store), str(bundle), "--credential-file", str(key))
    assert exported.exit_code == 0, exported.output
    assert _holds_key(bundle, ODD_KEY) == []
    # A store that does hold the key, JSON-escaped, is refused by both.
    leaked = tmp_path / "leaked"
    shutil.copytree(store, leaked)
    (leaked / "evidence").mkdir(exist_ok=True)
    (leaked / "evidence" / "note").write_text(f'{{"said": "{_escaped(ODD_KEY)}"}}')
    assert _invoke("audit", str(leaked)).exit_code == 0  # no shape matches
    refused = _invoke("audit", str(leaked), "--credential-file", str(key))
    assert refused.exit_code == 3
    assert "the run's key in evidence/note at byte 10: the run's API key" in refused.stdout
    assert "the run's key: found 1 time(s)" in refused.stdout
    assert ODD_KEY not in refused.output
    no_bundle = _invoke("export", str(leaked), str(tmp_path / "b2"), "--credential-file", str(key))
    assert no_bundle.exit_code == 3
    assert "evidence/note at byte 10: the run's API key" in no_bundle.stderr
    assert ODD_KEY not in no_bundle.output
    assert not (tmp_path / "b2").exists()


class _Hostile:
    """The issue's endpoint at once: the first 40 generateContent requests drip a byte every
    0.2 s, the next answers 100 MB, and every other reply echoes the key (``_EchoGemini``)."""

    def __init__(self, drips: int) -> None:
        self._echo = _EchoGemini()
        self._drips = drips
        self._lock = threading.Lock()
        self.seen = 0

    def __call__(self, recorded: RecordedRequest) -> Answer:
        with self._lock:
            number = self.seen
            self.seen += 1
        if number < self._drips:
            return drip(0.2)
        if number == self._drips:
            return huge(100_000_000)
        return self._echo(recorded)


@pytest.mark.slow
def test_a_run_against_a_dripping_huge_echoing_endpoint_finalizes_without_the_key(
    tmp_path: Path, lock: Path
) -> None:
    # The frozen deadline (90 s) applies: the 40 drips are given up at it, in parallel.
    key = tmp_path / "odd.key"
    key.write_text(ODD_KEY + "\n")
    store = tmp_path / "store"
    hostile = _Hostile(40)
    with FakeGemini(responder=hostile, record=False) as gemini:
        result = _invoke(
            "v2", "run", "--store", str(store), "--lock", str(lock), "--limit", "40",
            "--max-cells", "40", "--provider", "gemini", "--provider-base-url", gemini.base_url,
            "--credential-file", str(key),
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    verified = verify_store(store)
    assert verified
    assert verified.cells == 40
    assert verified.manifest_digest is not None
    kinds = [a["failure_kind"] for a in _attempts(store) if a["role"] != "preflight"]
    assert kinds.count("deadline_exceeded") == 40
    assert kinds.count("response_too_large") == 1
    assert "local_capacity" not in kinds
    assert len(kinds) == hostile.seen  # every journaled attempt reached the endpoint
    assert _holds_key(store, ODD_KEY) == []
    audited = _invoke("audit", str(store), "--credential-file", str(key))
    assert audited.exit_code == 0, audited.output
    assert "the run's key: not found" in audited.stdout
    assert _invoke("v2", "report", str(store)).exit_code == 0
    bundle = tmp_path / "bundle"
    exported = _invoke("export", str(store), str(bundle), "--credential-file", str(key))
    assert exported.exit_code == 0, exported.output
    assert _holds_key(bundle, ODD_KEY) == []
