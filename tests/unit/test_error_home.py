"""One home for errors: every exception class of ``harness`` and ``preflight`` is in
``harness/errors.py`` or named in ``docs/architecture.md`` as a justified exception, and no
command exits with a literal code of its own (``sys.exit(3)``) outside that list."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from harness.errors import HarnessError, StoppedError

ROOT = Path(__file__).resolve().parents[2]
ERRORS = "harness/errors.py"


def _justified() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Errors and exit codes", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`((?:harness|preflight)/[\w/]+\.py:\w+(?:\(\d+\))?)`", section))


@functools.cache  # parsed once for the module's tests, which only read the trees
def _sources() -> tuple[tuple[str, ast.Module], ...]:
    found = []
    for top in ("harness", "preflight"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            found.append((rel, ast.parse(path.read_text(encoding="utf-8"))))
    return tuple(found)


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def exception_classes(tree: ast.Module) -> list[str]:
    """Classes whose base is an exception type (by the naming every exception here follows)."""
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(_base_name(b).endswith(("Error", "Exception", "Exit")) for b in node.bases)
    ]


def literal_exits(tree: ast.Module) -> list[str]:
    """``sys.exit(N)``, ``ctx.exit(N)`` and ``SystemExit(N)`` with a literal non-zero ``N``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) != 1:
            continue
        arg = node.args[0]
        if not (isinstance(arg, ast.Constant) and type(arg.value) is int and arg.value != 0):
            continue
        name = _base_name(node.func)
        if name in ("exit", "SystemExit"):
            found.append(f"{'SystemExit' if name == 'SystemExit' else 'exit'}({arg.value})")
    return found


def test_every_exception_class_is_in_errors_or_justified() -> None:
    justified = _justified()
    outside = [
        f"{rel}:{name}"
        for rel, tree in _sources()
        if rel != ERRORS
        for name in exception_classes(tree)
    ]
    assert outside, "the scan found no class at all: it is broken"
    assert sorted(set(outside) - justified) == [], "move these to harness/errors.py"
    stale = {j for j in justified if "(" not in j} - set(outside)
    assert not stale, f"docs/architecture.md justifies classes that no longer exist: {stale}"


def test_no_command_exits_with_a_literal_code_of_its_own() -> None:
    justified = _justified()
    found = [f"{rel}:{call}" for rel, tree in _sources() for call in literal_exits(tree)]
    assert sorted(set(found) - justified) == [], "exit through an error class's exit_code"


@pytest.mark.parametrize(
    ("source", "classes", "exits"),
    [
        ("class A(ValueError): pass\nclass B(x.TransportError): pass", ["A", "B"], []),
        ("class S(msgspec.Struct): pass\nclass E(Exception): pass", ["E"], []),
        ("import sys\nsys.exit(3)\nsys.exit(0)\nsys.exit(code)", [], ["exit(3)"]),
        ("raise SystemExit(2)\nctx.exit(130)", [], ["SystemExit(2)", "exit(130)"]),
    ],
)
def test_the_scan_finds_what_it_looks_for(
    source: str, classes: list[str], exits: list[str]
) -> None:
    tree = ast.parse(source)
    assert exception_classes(tree) == classes
    assert literal_exits(tree) == exits


def test_interrupts_and_stopped_runs_share_one_exit_code() -> None:
    from harness.errors import RunStoppedError

    assert issubclass(RunStoppedError, StoppedError)
    assert issubclass(StoppedError, HarnessError)
    assert RunStoppedError.exit_code == StoppedError.exit_code == 130
