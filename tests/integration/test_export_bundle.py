"""``harness export``: a verifiable, self-contained bundle, or a refusal that writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from v2_report_support import CONFIG_PATH, all_results, synthetic_store

from harness.canonical import Domain, digest_bytes
from harness.cli import main
from harness.errors import ExportError, PrivacyError
from harness.store import RunStore, verify_store
from harness.studies.v2.export import BUNDLE_MANIFEST, export_bundle
from harness.studies.v2.report import build_report


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_store(tmp_path_factory.mktemp("export") / "run")


def _planted(root: Path, answer: object) -> Path:
    results = all_results()
    results[0] = msgspec.structs.replace(results[0], final_answer={"slot": answer})
    return synthetic_store(root, results=results)


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(".out"))


def test_export_bundle_is_a_verifiable_self_contained_store(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    manifest = export_bundle(store, out, config_path=CONFIG_PATH, names=["alice-laptop"])
    listed = {f.path for f in manifest.files}
    assert {"records.log", "HEAD", "journal.log", "MANIFEST", "study.lock"} <= listed
    assert {"schedule.json", "v2-config.json", "report/table4.csv", "report/figure.png"} <= listed
    assert "writer.lock" not in listed
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {
        BUNDLE_MANIFEST
    }
    assert on_disk == listed
    for item in manifest.files:
        data = (out / item.path).read_bytes()
        assert (len(data), digest_bytes(Domain.EXPORT, data)) == (item.size, item.digest)
    assert verify_store(out)
    assert verify_store(out).manifest_digest == manifest.store_manifest
    # The bundle reanalyses on its own: the same tables from its own config and records.
    again = build_report(out, out / "v2-config.json").files
    assert again["table4.csv"] == (out / "report" / "table4.csv").read_bytes()
    assert json.loads((out / BUNDLE_MANIFEST).read_bytes())["simulated"] is True


@pytest.mark.parametrize(
    ("answer", "names", "kind"),
    [
        ("/home/alice/study/notes.txt", [], "local absolute path"),
        ("AIza" + "Q" * 35, [], "Google API key"),
        ("computed on Alice-Laptop", ["alice-laptop"], "local user or host name"),
    ],
    ids=["local-path", "credential", "host-name"],
)
def test_export_privacy_check_refuses_and_writes_nothing(
    tmp_path: Path, answer: str, names: list[str], kind: str
) -> None:
    root = _planted(tmp_path / "run", answer)
    out = tmp_path / "out"
    with pytest.raises(PrivacyError) as raised:
        export_bundle(root, out, config_path=CONFIG_PATH, names=names)
    message = str(raised.value)
    assert message.startswith("export refused: ")
    assert "records.log at byte " in message
    assert message.count(f": {kind}") >= 1
    assert message.endswith("; nothing written")
    assert answer not in message
    assert not out.exists()
    assert _leftovers(tmp_path) == []


def test_export_refuses_an_unfinalized_store(tmp_path: Path) -> None:
    result = all_results()[0]
    from harness.lock import build_lock, encode_lock

    rows = [{"cell_id": result.cell_id}, {"cell_id": "later"}]
    with RunStore.create(tmp_path / "run", encode_lock(build_lock()), rows) as writer:
        writer.commit_cell(0, msgspec.to_builtins(result), [])
    with pytest.raises(ExportError, match=r"is not finalized"):
        export_bundle(tmp_path / "run", tmp_path / "out", config_path=CONFIG_PATH, names=[])


def test_export_refuses_an_existing_output(store: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(ExportError, match=r"already exists"):
        export_bundle(store, tmp_path / "out", config_path=CONFIG_PATH, names=[])


def test_export_refuses_a_tampered_or_stale_report(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(store, copy)
    (copy / "report" / "table4.csv").write_text("forged\n")
    with pytest.raises(ExportError, match=r"report file table4.csv .* does not match its manifest"):
        export_bundle(copy, tmp_path / "out", config_path=CONFIG_PATH, names=[])
    other = synthetic_store(tmp_path / "other")
    shutil.rmtree(other / "report")
    shutil.copytree(_planted(tmp_path / "third", 7) / "report", other / "report")
    with pytest.raises(ExportError, match=r"was computed from another state of the store"):
        export_bundle(other, tmp_path / "out2", config_path=CONFIG_PATH, names=[])


def test_export_refuses_a_config_the_lock_does_not_cover(store: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_bytes(CONFIG_PATH.read_bytes() + b"\n")
    with pytest.raises(ExportError, match=r"is not the study config store .* is locked to"):
        export_bundle(store, tmp_path / "out", config_path=config, names=[])


def test_export_cli(store: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["export", str(store), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"wrote {tmp_path / 'out'}: ")
    assert "privacy check passed" in result.stdout
    planted = _planted(tmp_path / "run", "/root/.config/gcloud/key.json")
    result = CliRunner().invoke(main, ["export", str(planted), str(tmp_path / "out2")])
    assert result.exit_code == 3
    assert result.output.startswith("error: export refused: ")
    assert result.output.count("\n") == 1
    assert not (tmp_path / "out2").exists()
