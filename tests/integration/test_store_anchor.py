"""Anchored integrity: the published manifest digest and an SSH signature refuse a rewritten store.

The chain is unkeyed: a tamperer who rewrites a cell can recompute the chain, HEAD and MANIFEST,
and ``store verify`` alone then says ok. The anchor kept elsewhere (``--expect-manifest`` with
the digest printed at finalize, or a signature checked against an allowed-signers file) is what
refuses it. The signing tests use a real key made by ``ssh-keygen`` in a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result
from v2_report_support import CONFIG_PATH, synthetic_store

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.cli import main
from harness.errors import AnchorMismatchError
from harness.store import (
    RunStore,
    StoreManifest,
    finalize_store,
    read_sealed,
    sign_manifest,
    verify_signature,
    verify_store,
)

LOCK = b"study lock for anchor tests\n"
ROWS = [{"cell": i} for i in range(3)]


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _line(domain: Domain, body: bytes) -> bytes:
    return digest_bytes(domain, body)[7:].encode() + b" " + body + b"\n"


def sealed(root: Path) -> str:
    with RunStore.create(root, LOCK, ROWS) as writer:
        for row in range(len(ROWS)):
            writer.commit_cell(row, {"answer": row}, [])
    return finalize_store(root)


def rewrite_with_chain(root: Path) -> None:
    """Change cell 1's result and recompute every hash after it, HEAD and MANIFEST: what anyone
    with write access can do to an unkeyed chain."""
    lines = (root / "records.log").read_bytes().splitlines(keepends=True)
    out = [lines[0]]
    prev = "blake3:" + lines[0][:64].decode()
    for index, line in enumerate(lines[1:], start=1):
        body = msgspec.json.decode(line[65:-1])
        body["prev"] = prev
        if index == 2:
            body["result"] = {"answer": 99}
        new = _line(Domain.STORE_RECORD, canonical_bytes(body))
        out.append(new)
        prev = "blake3:" + new[:64].decode()
    (root / "records.log").write_bytes(b"".join(out))
    head = {"schema_version": 1, "count": len(out), "head": prev}
    (root / "HEAD").write_bytes(_line(Domain.STORE_HEAD, canonical_bytes(head)))
    old = msgspec.json.decode((root / "MANIFEST").read_bytes()[65:-1], type=StoreManifest)
    manifest = msgspec.structs.replace(old, head=prev)
    (root / "MANIFEST").write_bytes(_line(Domain.STORE_MANIFEST, canonical_bytes(manifest)))


def test_store_verify_expect_manifest_refuses_a_store_rewritten_with_its_chain(
    tmp_path: Path,
) -> None:
    root = tmp_path / "run"
    published = sealed(root)
    ok = _invoke("store", "verify", str(root), "--expect-manifest", published)
    assert ok.exit_code == 0, ok.output
    rewrite_with_chain(root)
    assert verify_store(root).status.value == "ok"  # the chain alone cannot tell
    refused = _invoke("store", "verify", str(root), "--expect-manifest", published)
    assert refused.exit_code == 3
    assert f"not the expected {published}: refused" in refused.stderr


def test_store_verify_expect_manifest_refuses_a_store_without_manifest(tmp_path: Path) -> None:
    root = tmp_path / "run"
    published = sealed(root)
    (root / "MANIFEST").unlink()  # a deleted MANIFEST: never plain ok
    plain = _invoke("store", "verify", str(root))
    assert plain.exit_code == 4
    assert plain.stdout.startswith("status: not finalized")
    refused = _invoke("store", "verify", str(root), "--expect-manifest", published)
    assert refused.exit_code == 3
    assert "not finalized (no MANIFEST)" in refused.stderr


def test_store_verify_expect_manifest_must_be_a_digest(tmp_path: Path) -> None:
    root = tmp_path / "run"
    sealed(root)
    result = _invoke("store", "verify", str(root), "--expect-manifest", "abc")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --expect-manifest 'abc' is not a digest")


def test_store_finalize_prints_the_digest_to_publish(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        for row in range(len(ROWS)):
            writer.commit_cell(row, {"answer": row}, [])
    result = _invoke("store", "finalize", str(root))
    assert result.exit_code == 0
    digest = result.stdout.strip()
    assert f"manifest {digest}: publish this digest" in result.stderr


def test_v2_report_expect_manifest_refuses_another_manifest_and_writes_nothing(
    tmp_path: Path,
) -> None:
    store = synthetic_store(tmp_path / "run")
    published = verify_store(store).manifest_digest
    assert published is not None
    out = tmp_path / "out"
    args = ["v2", "report", str(store), "--config", str(CONFIG_PATH), "--out", str(out)]
    ok = _invoke(*args, "--expect-manifest", published)
    assert ok.exit_code == 0, ok.output
    assert f"manifest {published}" in ok.stdout
    shutil.rmtree(out)
    other = "blake3:" + "0" * 64
    refused = _invoke(*args, "--expect-manifest", other)
    assert refused.exit_code == 3
    assert f"not the expected {other}: no report written" in refused.stderr
    assert not out.exists()


# --- SSH signatures ---------------------------------------------------------------------------


def _keypair(directory: Path, name: str) -> tuple[Path, str]:
    key = directory / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return key, key.with_suffix(".pub").read_text().strip()


@pytest.mark.skipif(
    shutil.which("ssh-keygen") is None,
    reason="ssh-keygen (OpenSSH 8.2+) is not installed; manifest signing is optional",
)
def test_store_manifest_signature_made_and_checked_with_a_real_ssh_key(tmp_path: Path) -> None:
    root = tmp_path / "run"
    sealed(root)
    key, public = _keypair(tmp_path, "sealer")
    signed = _invoke("store", "sign", str(root), "--key", str(key))
    assert signed.exit_code == 0, signed.output
    assert (root / "MANIFEST.sig").read_bytes().startswith(b"-----BEGIN SSH SIGNATURE-----")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"sealer@example.org {public}\n")
    checked = _invoke("store", "verify", str(root), "--allowed-signers", str(allowed))
    assert checked.exit_code == 0, checked.output
    assert "signed by sealer@example.org" in checked.stderr
    named = ["--allowed-signers", str(allowed), "--signer", "sealer@example.org"]
    assert _invoke("store", "verify", str(root), *named).exit_code == 0

    # Another key is not allowed: the signature does not prove who sealed it.
    _, stranger = _keypair(tmp_path, "stranger")
    others = tmp_path / "others"
    others.write_text(f"stranger@example.org {stranger}\n")
    refused = _invoke("store", "verify", str(root), "--allowed-signers", str(others))
    assert refused.exit_code == 3

    # A store rewritten with its chain and manifest no longer matches the signature.
    rewrite_with_chain(root)
    assert verify_store(root).status.value == "ok"
    forged = _invoke("store", "verify", str(root), "--allowed-signers", str(allowed))
    assert forged.exit_code == 3
    assert "ssh-keygen could not verify" in forged.stderr


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_store_sign_refuses_a_store_that_is_not_finalized(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        writer.commit_cell(0, {"answer": 0}, [])
    key, _ = _keypair(tmp_path, "sealer")
    result = _invoke("store", "sign", str(root), "--key", str(key))
    assert result.exit_code == 3
    assert "not finalized and intact: nothing to sign" in result.stderr
    assert not (root / "MANIFEST.sig").exists()


# --- one snapshot: what is signed and checked is what was verified ------------------------------

_needs_ssh = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen")


def _allowed(tmp_path: Path, public: str) -> Path:
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"sealer@example.org {public}\n")
    return allowed


def _forged_pair(tmp_path: Path, root: Path) -> tuple[bytes, bytes]:
    """The sealed MANIFEST, and the one a rewrite of the store with its chain would carry
    (computed on a copy; ``root`` is left as it was)."""
    copy = tmp_path / "forged-copy"
    shutil.copytree(root, copy)
    rewrite_with_chain(copy)
    return (root / "MANIFEST").read_bytes(), (copy / "MANIFEST").read_bytes()


def _put(root: Path, name: str, data: bytes) -> None:
    staged = root / f".{name}.staged"
    staged.write_bytes(data)
    os.replace(staged, root / name)


@_needs_ssh
def test_sign_signs_the_manifest_it_verified_when_the_file_is_swapped_after(
    tmp_path: Path,
) -> None:
    """The swap lands after verification read MANIFEST and before signing, deterministically:
    the signature covers the verified bytes, so the swapped-in forgery never carries it."""
    root = tmp_path / "run"
    sealed(root)
    key, public = _keypair(tmp_path, "sealer")
    allowed = _allowed(tmp_path, public)
    good, _ = _forged_pair(tmp_path, root)
    snapshot = read_sealed(root)
    rewrite_with_chain(root)  # records, HEAD and MANIFEST all forged, consistently
    assert (root / "MANIFEST").read_bytes() != good
    sign_manifest(root, snapshot, key)
    forged = _invoke("store", "verify", str(root), "--allowed-signers", str(allowed))
    assert forged.exit_code == 3
    assert "ssh-keygen could not verify" in forged.stderr
    # The signature is over the bytes verified: beside the genuine store, it verifies.
    restored = tmp_path / "restored"
    sealed(restored)
    _put(restored, "MANIFEST.sig", (root / "MANIFEST.sig").read_bytes())
    assert (restored / "MANIFEST").read_bytes() == good
    assert verify_signature(restored, read_sealed(restored), allowed) == "sealer@example.org"


@_needs_ssh
def test_verify_checks_the_signature_over_the_manifest_it_verified(tmp_path: Path) -> None:
    """The forged store is verified; then the genuine MANIFEST is swapped back before the
    signature is checked: the check still covers the forged bytes the chain was checked
    against, and refuses."""
    root = tmp_path / "run"
    sealed(root)
    key, public = _keypair(tmp_path, "sealer")
    allowed = _allowed(tmp_path, public)
    sign_manifest(root, read_sealed(root), key)
    good = (root / "MANIFEST").read_bytes()
    rewrite_with_chain(root)
    snapshot = read_sealed(root)
    assert snapshot.report.status.value == "ok"
    assert snapshot.manifest != good
    _put(root, "MANIFEST", good)  # what a second read of the file would now see
    with pytest.raises(AnchorMismatchError, match="ssh-keygen could not verify"):
        verify_signature(root, snapshot, allowed)


def test_signing_refuses_a_view_that_is_not_sealed(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        writer.commit_cell(0, {"answer": 0}, [])
    snapshot = read_sealed(root)
    assert snapshot.manifest is None
    with pytest.raises(AnchorMismatchError, match="not finalized and intact"):
        verify_signature(root, snapshot, tmp_path / "allowed")


def _flipping(root: Path, states: list[bytes], stop: threading.Event) -> threading.Thread:
    def flip() -> None:
        turn = 0
        while not stop.is_set():
            _put(root, "MANIFEST", states[turn % len(states)])
            turn += 1
            time.sleep(0.001)

    thread = threading.Thread(target=flip)
    thread.start()
    return thread


@_needs_ssh
def test_store_sign_racing_a_swapped_manifest_never_signs_the_forgery(tmp_path: Path) -> None:
    """MANIFEST flips between the sealed one and a forgery while `store sign` runs: each run
    either refuses (it verified the forgery against the genuine chain) or signs the genuine
    bytes; the forgery never gets a signature."""
    root = tmp_path / "run"
    sealed(root)
    key, public = _keypair(tmp_path, "sealer")
    allowed = _allowed(tmp_path, public)
    good, forgery = _forged_pair(tmp_path, root)
    stop = threading.Event()
    thread = _flipping(root, [good, forgery], stop)
    outcomes: list[int] = []
    try:
        for _ in range(12):
            (root / "MANIFEST.sig").unlink(missing_ok=True)
            result = _invoke("store", "sign", str(root), "--key", str(key))
            outcomes.append(result.exit_code)
            if result.exit_code == 0:
                signature = tmp_path / "race.sig"
                signature.write_bytes((root / "MANIFEST.sig").read_bytes())
                check = [
                    "ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I",
                    "sealer@example.org", "-n", "ect-harness-store-manifest", "-s", str(signature),
                ]  # fmt: skip
                on_forgery = subprocess.run(check, input=forgery, capture_output=True, timeout=60)
                on_good = subprocess.run(check, input=good, capture_output=True, timeout=60)
                assert on_forgery.returncode != 0
                assert on_good.returncode == 0
    finally:
        stop.set()
        thread.join()
    assert set(outcomes) <= {0, 3}


@_needs_ssh
def test_store_verify_racing_a_swapped_manifest_never_passes_a_forged_store(
    tmp_path: Path,
) -> None:
    """The store is rewritten with its chain; MANIFEST flips between the forged seal (which
    matches the forged chain) and the genuine one (which the signature covers). No run of
    `store verify --allowed-signers` passes: the chain and the signature see one read."""
    root = tmp_path / "run"
    sealed(root)
    key, public = _keypair(tmp_path, "sealer")
    allowed = _allowed(tmp_path, public)
    sign_manifest(root, read_sealed(root), key)
    good = (root / "MANIFEST").read_bytes()
    rewrite_with_chain(root)
    forgery = (root / "MANIFEST").read_bytes()
    stop = threading.Event()
    thread = _flipping(root, [good, forgery], stop)
    try:
        codes = [
            _invoke("store", "verify", str(root), "--allowed-signers", str(allowed)).exit_code
            for _ in range(12)
        ]
    finally:
        stop.set()
        thread.join()
    assert codes == [3] * 12
