"""Pins of the public surface: exports, reason-code wire strings, purity of the core."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import msgspec

from harness import ect
from harness.ect import ReasonCode, ReasonFamily, family_of
from harness.examples import EXAMPLE_DIR_NAME, regional_sum

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def test_reason_code_wire_strings_are_pinned() -> None:
    # Codes are a public contract: renaming or removing one must fail here. Append new ones
    # to tests/data/reason_codes.txt deliberately.
    pinned = (DATA / "reason_codes.txt").read_text().split()
    assert [code.value for code in ReasonCode] == pinned


def test_every_code_has_a_known_family() -> None:
    assert {family_of(code) for code in ReasonCode} == set(ReasonFamily)


def test_public_exports_resolve() -> None:
    for name in ect.__all__:
        assert hasattr(ect, name), name


def test_core_imports_nothing_impure() -> None:
    # harness/ect may import only itself, harness.canonical and a fixed set of pure modules.
    allowed = {
        "__future__",
        "collections",
        "collections.abc",
        "enum",
        "typing",
        "math",
        "fractions",
        "json",
        "msgspec",
        "msgspec.structs",
    }
    for path in sorted((ROOT / "harness" / "ect").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                ok = (
                    name in allowed or name == "harness.canonical" or name.startswith("harness.ect")
                )
                assert ok, f"{path.name} imports {name}"


def test_example_files_are_current(tmp_path: Path) -> None:
    script = ROOT / "scripts" / "make_example.py"
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True)
    shipped = ROOT / "harness" / "examples" / EXAMPLE_DIR_NAME
    for path in sorted(tmp_path.iterdir()):
        assert path.read_bytes() == (shipped / path.name).read_bytes(), path.name


def test_decision_bytes_identical_across_processes() -> None:
    # Same serialized triple -> byte-identical decision JSON, whatever the hash seed.
    ex = regional_sum()
    bad = msgspec.structs.replace(ex.certificate, claims=ex.certificate.claims[::-1][:1])
    parts = [msgspec.json.encode(p).decode() for p in (*ex[:3], bad)]
    program = (
        "import sys, json; from harness import ect; from harness.canonical import canonical_bytes;"
        "p = json.loads(sys.stdin.read());"
        "sys.stdout.buffer.write(canonical_bytes(ect.verify_json(*[x.encode() for x in p])))"
    )
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", program],
            input=msgspec.json.encode(parts),
            capture_output=True,
            check=True,
            env=env,
        )
        outputs.add(run.stdout)
    assert len(outputs) == 1
    (only,) = outputs
    assert b'"decision":"continue"' in only


def test_the_decision_says_whether_the_answer_was_checked() -> None:
    ex = regional_sum()
    alone = ect.verify(*ex)
    assert alone
    assert alone.answer_checked is False
    with_answer = ect.verify(*ex, answer={"total_visits": 293, "busiest_site": "site-a"})
    assert with_answer
    assert with_answer.answer_checked is True
    d, r, led, c = (msgspec.json.encode(part) for part in ex)
    assert ect.verify_json(d, r, led, c).answer_checked is False
    assert ect.verify_json(d, r, led, c, answer=b"[1]").answer_checked is True  # judged: malformed
    assert ect.verify_json(d, r, led, b"{", answer=b"{}").answer_checked is True
