"""The package layering of the design, enforced over every import in harness/ and preflight/.

The rules (docs/design.md section 2, docs/architecture.md):

1. ``harness.ect`` imports nothing of the project but itself and ``harness.canonical``.
2. Nothing depends on a study except the command line: outside ``harness.studies`` only the
   command-line layer imports ``harness.studies``.
3. ``preflight`` judges the harness and is not part of it: in ``harness`` only the command-line
   layer imports ``preflight``.
4. Command-line modules are imported only by the command-line layer.
5. ``harness.policies`` never imports ``harness.worlds``, ``harness.faults`` or a study: the
   policies decide on their own input view (``harness.policies.view``), which an agent loop
   outside the benchmark can build.
6. ``harness.worlds`` never imports ``harness.faults``: fault operators derive snapshots from
   the worlds, and the benchmark that applies them sits above both.
7. No module imports by name at run time (``importlib.import_module``, ``__import__``): such an
   import is invisible to rules 1-6.
8. The framework adapters (``harness.integrations``, extras) are imported only by themselves and
   the examples: ``harness.gate`` and everything else stay importable without a framework.

The command-line layer is ``harness.cli``, ``harness.__main__`` and every private command module
(a module whose name ends in ``_cli``, e.g. ``harness.store._cli`` or ``preflight._cli``).
Imports are read with ``ast`` (including those inside functions and ``TYPE_CHECKING`` blocks);
relative imports are resolved against the importing module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[2]
PACKAGES: Final = ("harness", "preflight")
_CLI_ENTRY: Final = frozenset({"harness.cli", "harness.__main__", "harness._entry"})
_ECT_MAY_IMPORT: Final = ("harness.ect", "harness.canonical")
_DYNAMIC_IMPORTS: Final = frozenset({"import_module", "__import__"})
_POLICIES_NEVER_IMPORT: Final = ("harness.worlds", "harness.faults", "harness.studies")


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _is_cli(module: str) -> bool:
    return module in _CLI_ENTRY or module.rsplit(".", 1)[-1].endswith("_cli")


def _is_project(name: str) -> bool:
    return any(_within(name, package) for package in PACKAGES)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _targets(
    module: str, is_package: bool, tree: ast.AST, known: frozenset[str]
) -> Iterator[tuple[int, str]]:
    """Every project module ``module`` imports, with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node)
            for alias in node.names:
                # ``from harness import studies`` imports the submodule harness.studies.
                sub = f"{source}.{alias.name}"
                yield node.lineno, sub if sub in known else source


def _dynamic_imports(tree: ast.AST) -> Iterator[int]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in _DYNAMIC_IMPORTS:
                yield node.lineno


def _rule(importer: str, target: str) -> str | None:
    """Why ``importer`` may not import ``target``, or None when it may."""
    if _within(importer, "harness.ect") and not any(
        _within(target, allowed) for allowed in _ECT_MAY_IMPORT
    ):
        return "harness.ect imports nothing of the project but harness.canonical"
    if (
        _within(target, "harness.studies")
        and not _within(importer, "harness.studies")
        and not _is_cli(importer)
    ):
        return "nothing depends on a study except the command line"
    if _within(target, "preflight") and _within(importer, "harness") and not _is_cli(importer):
        return "the harness does not import preflight (only its command line does)"
    if _is_cli(target) and not _is_cli(importer):
        return "only the command line imports a command-line module"
    if _within(importer, "harness.policies") and any(
        _within(target, below) for below in _POLICIES_NEVER_IMPORT
    ):
        return "policies never import worlds, faults or studies"
    if _within(importer, "harness.worlds") and _within(target, "harness.faults"):
        return "worlds never import faults (the benchmark above both applies them)"
    if _within(target, "harness.integrations") and not any(
        _within(importer, p) for p in ("harness.integrations", "harness.examples")
    ):
        return "only the examples import a framework adapter (an extra)"
    return None


def violations(sources: Mapping[str, tuple[bool, str]]) -> list[str]:
    """Every layering violation in ``sources`` (module -> (is a package ``__init__``, text))."""
    known = frozenset(sources)
    found: list[str] = []
    for module, (is_package, text) in sorted(sources.items()):
        tree = ast.parse(text)
        for line, target in sorted(set(_targets(module, is_package, tree, known))):
            why = _rule(module, target) if _is_project(target) else None
            if why is not None:
                found.append(f"{module}:{line} imports {target}: {why}")
        found.extend(
            f"{module}:{line} imports by name at run time: every import must be static"
            for line in _dynamic_imports(tree)
        )
    return found


def project_sources() -> dict[str, tuple[bool, str]]:
    """Module name -> (is a package ``__init__``, source) for every module of the packages."""
    sources: dict[str, tuple[bool, str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            sources[name] = (is_package, path.read_text(encoding="utf-8"))
    return sources


# --- the tree -------------------------------------------------------------------------------


def test_the_tree_keeps_the_layering() -> None:
    found = violations(project_sources())
    assert found == [], "\n".join(found)


def test_the_scan_sees_the_tree_and_its_allowed_edges() -> None:
    # Guards against a scan that silently reads nothing: the modules and the edges the rules
    # allow must be there.
    sources = project_sources()
    known = frozenset(sources)
    assert {"harness.cli", "harness.ect.verifier", "preflight", "preflight._cli"} <= known
    edges = {
        (module, target)
        for module, (is_package, text) in sources.items()
        for _, target in _targets(module, is_package, ast.parse(text), known)
    }
    assert ("harness._evidence_cli", "preflight._cli") in edges
    assert ("harness.studies.v2._cli", "preflight") in edges
    assert ("harness.audit", "harness.preflight_report") in edges
    assert ("harness.ect.verifier", "harness.canonical") in edges


# --- the rules fire -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "text", "expected"),
    [
        ("harness.ect.model", "from harness.store import RunStore\n", "harness.store"),
        ("harness.ect.model", "import harness.providers.audit\n", "harness.providers.audit"),
        ("harness.ect.model", "from harness import log\n", "harness.log"),
        ("harness.replay", "from harness.studies.v2.loop import run_cell\n", "harness.studies"),
        ("harness.audit", "def f():\n    from preflight import decode_report\n", "preflight"),
        ("harness.studies.v2.study", "import preflight\n", "preflight"),
        ("preflight._checks", "from harness.studies.v2 import schedule\n", "harness.studies"),
        ("harness.store.core", "from harness.store._cli import store_group\n", "_cli"),
        ("harness.studies.static.run", "from ._static_cli import add\n", "_static_cli"),
        ("harness.tools.catalog", "from ..studies import v2_report\n", "harness.studies"),
        ("harness.policies.ect_policy", "from harness.worlds import Snapshot\n", "policies never"),
        ("harness.policies.heuristic", "import harness.faults\n", "policies never"),
        ("harness.policies.decision", "from .view import V\nfrom ..faults import F\n", "faults"),
        ("harness.worlds.snapshots", "from harness.faults import apply_fault\n", "worlds never"),
        ("harness.gate.session", "from harness.integrations import inspect\n", "adapter"),
        ("harness.cli", "import harness.integrations.openai_agents\n", "adapter"),
    ],
)
def test_a_forbidden_import_is_reported(module: str, text: str, expected: str) -> None:
    sources = {
        module: (False, text),
        "harness.log": (False, ""),
        "harness.studies.v2.report": (False, ""),
    }
    found = violations(sources)
    assert len(found) == 1, found
    assert found[0].startswith(f"{module}:")
    assert expected in found[0]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("import importlib\nm = importlib.import_module('harness.studies.v2.schedule')\n", 2),
        ("from importlib import import_module\nm = import_module('preflight')\n", 2),
        ("m = __import__('harness.studies')\n", 1),
    ],
)
def test_an_import_by_name_is_reported(text: str, line: int) -> None:
    assert violations({"preflight._schedule": (False, text)}) == [
        f"preflight._schedule:{line} imports by name at run time: every import must be static"
    ]


@pytest.mark.parametrize(
    ("module", "text"),
    [
        ("harness.ect.verifier", "from harness.canonical import Domain\nfrom . import model\n"),
        ("harness.cli", "from harness.studies.v2._cli import v2_group\n"),
        ("harness._evidence_cli", "from preflight._cli import preflight_cmd\n"),
        ("harness.studies.v2._cli", "from preflight import run_preflight\n"),
        ("preflight._cli", "from harness.studies.v2.schedule import canonical_schedule\n"),
        ("harness.studies.v2.replay", "from harness.studies.v2.loop import run_cell\n"),
        ("harness.audit", "from harness.preflight_report import decode_report\n"),
        ("preflight._checks", "from harness.store import lock_digest\nimport msgspec\n"),
        ("harness.policies.ect_policy", "from harness.policies.view import SnapshotView\n"),
        ("harness.faults", "from harness.worlds.snapshots import Snapshot\n"),
    ],
)
def test_an_allowed_import_is_not_reported(module: str, text: str) -> None:
    assert violations({module: (False, text)}) == []
