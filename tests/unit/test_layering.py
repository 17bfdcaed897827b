"""The package layering, enforced over every import in harness/ and preflight/.

The layer order is read from the table in docs/architecture.md ("Layers", bottom up): every
module falls in exactly one row (the longest listed path containing its file), and a module may
import only modules of its own layer or of a layer below. The rules the order does not imply:

1. Nothing imports a study (anything under ``harness/studies/``) but the command line.
2. Only the examples and the adapters themselves import ``harness.integrations`` (extras).
3. Only the command line imports ``click`` (and ``harness.terminal``, whose ``echo`` is the one
   printing function): importing a library package loads no command-line library.
4. No module imports by name at run time (``importlib.import_module``, ``__import__``): such an
   import is invisible to the others.

Imports are read with ``ast`` (including those inside functions and ``TYPE_CHECKING`` blocks);
relative imports are resolved against the importing module.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple

import pytest

ROOT: Final = Path(__file__).resolve().parents[2]
ARCHITECTURE: Final = ROOT / "docs" / "architecture.md"
PACKAGES: Final = ("harness", "preflight")
_DYNAMIC_IMPORTS: Final = frozenset({"import_module", "__import__"})
_COMMAND_LINE: Final = "command line"
_CLICK_ALSO: Final = frozenset({"harness.terminal"})
_INTEGRATIONS_USERS: Final = ("harness.integrations", "harness.examples")


class Layer(NamedTuple):
    """One row of the documented table: its name and the paths it lists."""

    name: str
    paths: tuple[str, ...]


def documented_layers(text: str) -> list[Layer]:
    """The layers of docs/architecture.md's "Layers" table, bottom up."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    layers: list[Layer] = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or cells[0] in ("layer", "---"):
            continue
        paths = tuple(re.findall(r"`((?:harness|preflight)/[^`]*)`", cells[1]))
        layers.append(Layer(cells[0], paths))
    return layers


def _path(module: str, is_package: bool) -> str:
    parts = module.split(".")
    return "/".join(parts) + ("/__init__.py" if is_package else ".py")


def layer_of(module: str, is_package: bool, layers: Sequence[Layer]) -> int | None:
    """The index of the layer whose longest listed path holds ``module``'s file, or None."""
    path = _path(module, is_package)
    best: tuple[int, int] | None = None
    for index, layer in enumerate(layers):
        for listed in layer.paths:
            holds = path.startswith(listed) if listed.endswith("/") else path == listed
            if holds and (best is None or len(listed) > best[0]):
                best = (len(listed), index)
    return None if best is None else best[1]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


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
    """Every module ``module`` imports (of the project or not), with its line."""
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


class _Placed(NamedTuple):
    module: str
    is_package: bool
    layer: int | None


def _rule(importer: _Placed, target: _Placed, layers: Sequence[Layer]) -> str | None:
    """Why ``importer`` may not import ``target``, or None when it may."""
    on_command_line = importer.layer is not None and layers[importer.layer].name == _COMMAND_LINE
    if not _is_project(target.module):
        if _within(target.module, "click") and not (
            on_command_line or importer.module in _CLICK_ALSO
        ):
            return "only the command line imports click"
        return None
    if importer.layer is not None and target.layer is not None and target.layer > importer.layer:
        return (
            f"layer {layers[importer.layer].name!r} may not import layer "
            f"{layers[target.layer].name!r} above it"
        )
    if (
        _within(target.module, "harness.studies")
        and not _within(importer.module, "harness.studies")
        and not on_command_line
    ):
        return "nothing imports a study but the command line"
    if _within(target.module, "harness.integrations") and not any(
        _within(importer.module, user) for user in _INTEGRATIONS_USERS
    ):
        return "only the examples import a framework adapter (an extra)"
    return None


def violations(
    sources: Mapping[str, tuple[bool, str]], layers: Sequence[Layer] | None = None
) -> list[str]:
    """Every layering violation in ``sources`` (module -> (is a package ``__init__``, text))."""
    if layers is None:
        layers = documented_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    known = frozenset(sources)
    found: list[str] = []
    for module, (is_package, text) in sorted(sources.items()):
        importer = _Placed(module, is_package, layer_of(module, is_package, layers))
        if importer.layer is None:
            found.append(f"{module}: in no layer of docs/architecture.md")
        tree = ast.parse(text)
        for line, name in sorted(set(_targets(module, is_package, tree, known))):
            if name in sources:
                target = _Placed(name, sources[name][0], layer_of(name, sources[name][0], layers))
            else:  # a name the sources do not hold: a package or a module, whichever is listed
                placed = layer_of(name, True, layers)
                target = _Placed(name, placed is not None, placed)
                if placed is None:
                    target = _Placed(name, False, layer_of(name, False, layers))
            why = _rule(importer, target, layers)
            if why is not None:
                found.append(f"{module}:{line} imports {name}: {why}")
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
    assert {"harness.cli", "harness.ect.verifier", "preflight", "harness.cli.preflight"} <= known
    edges = {
        (module, target)
        for module, (is_package, text) in sources.items()
        for _, target in _targets(module, is_package, ast.parse(text), known)
    }
    assert ("harness.cli.evidence", "harness.cli.preflight") in edges
    assert ("harness.cli.v2", "preflight") in edges
    assert ("harness.audit", "harness.preflight_report") in edges
    assert ("harness.ect.verifier", "harness.canonical") in edges


# --- the documented table -----------------------------------------------------------------


def _layers() -> list[Layer]:
    return documented_layers(ARCHITECTURE.read_text(encoding="utf-8"))


def test_every_documented_path_exists_and_is_listed_once() -> None:
    listed = [path for layer in _layers() for path in layer.paths]
    assert listed, "the Layers table of docs/architecture.md lists no path"
    assert len(listed) == len(set(listed))
    assert [path for path in listed if not (ROOT / path).exists()] == []


def test_the_order_puts_canonical_below_ect_and_perturb_above_it() -> None:
    layers = _layers()
    names = [layer.name for layer in layers]

    def at(module: str, is_package: bool = False) -> str:
        index = layer_of(module, is_package, layers)
        assert index is not None, module
        return names[index]

    assert (at("harness.canonical"), at("harness.ect.verifier"), at("harness.perturb")) == (
        "base",
        "core",
        "foundation",
    )
    assert names.index("base") < names.index("core") < names.index("foundation")
    assert names[-1] == _COMMAND_LINE
    assert at("harness.cli", is_package=True) == _COMMAND_LINE
    assert at("harness.cli.store") == _COMMAND_LINE
    # The longest listed path wins: the study packages sit with their shared modules.
    assert at("harness.studies.v2.report") == at("harness.studies.runs") == "studies"


# --- the rules fire -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "text", "expected"),
    [
        ("harness.canonical", "from harness.ect.model import Receipt\n", "'base' may not import"),
        ("harness.ect.model", "from harness.store import RunStore\n", "layer 'store' above"),
        ("harness.ect.model", "import harness.providers.attempts\n", "layer 'providers' above"),
        ("harness.ect.model", "from harness import log\n", "layer 'foundation' above"),
        ("harness.perturb", "from harness.tools import adapter\n", "layer 'tools' above"),
        ("harness.audit", "def f():\n    from preflight import decode\n", "'preflight' above"),
        ("harness.store.core", "from harness.cli.store import store_group\n", "'command line'"),
        ("harness.tools.catalog", "from ..studies import v2_report\n", "'studies' above"),
        ("harness.policies.ect_policy", "from harness.worlds import Snapshot\n", "'worlds'"),
        ("harness.policies.decision", "from .view import V\nfrom ..faults import F\n", "'faults'"),
        ("harness.worlds.snapshots", "from harness.faults import apply_fault\n", "'faults' above"),
        ("harness.gate.session", "from harness.integrations import inspect\n", "'integrations'"),
        ("harness.examples.scripted", "from harness.studies.v2 import schedule\n", "a study"),
        ("preflight._checks", "from harness.studies.v2 import schedule\n", "a study"),
        ("harness.mcp_proxy.server", "import harness.integrations.openai_agents\n", "adapter"),
        ("harness.cli.v2", "import harness.integrations.openai_agents\n", "adapter"),
        ("harness.providers.selection", "import click\n", "only the command line imports click"),
        ("harness.store._writer", "def f():\n    from click import echo\n", "imports click"),
        ("harness.new_module", "import json\n", "in no layer of docs/architecture.md"),
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
        ("harness.perturb", "from harness.ect.model import SlotRequirement\n"),
        ("harness.cli.static", "from harness.cli.v2 import v2_group\nimport click\n"),
        ("harness.cli.evidence", "from harness.cli.preflight import preflight_cmd\n"),
        ("harness.cli.v2", "from preflight import run_preflight\n"),
        ("harness.cli.preflight", "from harness.studies.v2.schedule import canonical_schedule\n"),
        ("harness.studies.v2.replay", "from harness.studies.v2.loop import run_cell\n"),
        ("harness.studies.v2.study", "from harness.studies.runs import default_store_dir\n"),
        ("harness.audit", "from harness.preflight_report import decode_report\n"),
        ("preflight._checks", "from harness.store import lock_digest\nimport msgspec\n"),
        ("harness.policies.ect_policy", "from harness.policies.view import SnapshotView\n"),
        ("harness.faults", "from harness.worlds.snapshots import Snapshot\n"),
        ("harness.terminal", "def echo() -> None:\n    import click\n"),
        ("harness.examples.inspect_task", "from harness.integrations.inspect import ect_react\n"),
    ],
)
def test_an_allowed_import_is_not_reported(module: str, text: str) -> None:
    assert violations({module: (False, text)}) == []
