"""The ECT verifier over the whole benchmark, in memory and through exported files.

Clean snapshots must be ``complete``, every F1-F8 and U1-U3 snapshot ``continue``, and each
fault must trip the reason-code families its construction implies (and no others).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from harness import ect
from harness.benchmark.build import benchmark
from harness.cli import main

# fault -> (families that must fire, families that may also fire)
EXPECTED: dict[str, tuple[set[str], set[str]]] = {
    "C0": (set(), set()),
    "F1": ({"COVERAGE"}, set()),
    "F2": ({"SCOPE"}, {"REPLAY"}),
    "F3": ({"EVIDENCE"}, {"REPLAY"}),
    "F4": ({"SCOPE"}, {"REPLAY"}),
    "F5": ({"COVERAGE"}, set()),
    "F6": ({"REPLAY"}, set()),
    "F7": ({"EVIDENCE", "REPLAY"}, set()),
    "F8": ({"ADAPTER", "COVERAGE"}, set()),
    "U1": ({"TRANSFORM"}, set()),
    "U2": ({"SCOPE"}, set()),
    "U3": ({"SCOPE"}, set()),
    "T1": (set(), set()),
}


def test_ect_decides_every_snapshot_as_its_gold_label() -> None:
    counts = {"complete": 0, "continue": 0}
    for snapshot in benchmark().snapshots():
        decision = ect.verify(
            snapshot.descriptor, snapshot.requirements, snapshot.ledger, snapshot.certificate
        )
        assert decision.decision.value == snapshot.gold_decision, snapshot.snapshot_id
        families = {code.family.value for code in decision.reason_codes}
        must, may = EXPECTED[snapshot.fault]
        assert must <= families <= must | may, (snapshot.snapshot_id, families)
        if snapshot.split != "v2":
            counts[decision.decision.value] += 1
    assert counts == {"complete": 48, "continue": 384}


def test_exported_static_grid_verifies_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "grid"
    runner = CliRunner()
    result = runner.invoke(main, ["static", "export", "--out", str(out)])
    assert result.exit_code == 0, result.output
    folders = sorted(out.iterdir())
    assert len(folders) == 432
    for folder in folders:
        gold = json.loads((folder / "gold.json").read_text())
        args = ["verify"] + [
            arg
            for name in ("descriptor", "requirements", "ledger", "certificate")
            if (folder / f"{name}.json").exists()
            for arg in (f"--{name}", str(folder / f"{name}.json"))
        ]
        verdict = runner.invoke(main, args)
        assert verdict.exit_code == (0 if gold["decision"] == "complete" else 1), folder.name
        assert json.loads(verdict.stdout)["decision"] == gold["decision"]
        assert (folder / "certificate.json").exists() == (gold["fault"] != "F8")
