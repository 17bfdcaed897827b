"""``harness v2 run`` against an endpoint that answers what no model should: the real clients,
the real sandbox and store, a loopback fake (nothing leaves the machine).

Replies of 100 MB, an endless body and a gzip bomb are failed attempts (``response_too_large``)
that keep only their first bytes; the run goes on and finalizes, and the store verifies and
audits.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from providers_fake_gemini import FakeGemini, endless, gzip_bomb, huge
from providers_fake_openai import FakeOpenAI

from harness.cli import main
from harness.lock import project_root, write_lock
from harness.providers.limits import KEPT_PREFIX_BYTES
from harness.store import read_store, verify_store
from harness.store._files import MAX_BLOB

KEY = "fake-key-hostile-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith(("GOOGLE_", "GEMINI_", "OPENAI_")):
            monkeypatch.delenv(name)


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
